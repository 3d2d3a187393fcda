"""Usage limits and cost (issue 31): the rules, then the whole flow through the engine on both
stores, then the real bot refusing a learner over the limit before any model request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memora.config import LimitsConfig, ModelPrice, PricingConfig
from memora.storage import Database
from memora.usage import Call, Spent, UsageLedger, cost, over_limit, unpriced

NOW = datetime(2026, 12, 5, 14, 30, tzinfo=UTC)


def test_no_cap_means_no_limit() -> None:
    assert over_limit(LimitsConfig(), Spent(10**9, 10**6), Spent(10**9, 10**6), NOW) is None


def test_a_daily_cap_says_when_it_resets() -> None:
    limits = LimitsConfig(daily_tokens=1000)
    assert over_limit(limits, Spent(999), Spent(999), NOW) is None
    said = over_limit(limits, Spent(1000), Spent(1000), NOW)
    assert said is not None and "2026-12-06 at 00:00 UTC" in said and "Nothing was saved" in said


def test_a_monthly_cap_resets_on_the_first() -> None:
    limits = LimitsConfig(daily_tokens=10**6, monthly_tokens=5000, monthly_voice_seconds=60)
    said = over_limit(limits, Spent(10), Spent(5000), NOW)
    assert said is not None and "this month's" in said and "2027-01-01" in said
    voice = over_limit(limits, Spent(0, 5), Spent(0, 61), NOW)
    assert voice is not None and "voice" in voice


def test_cost_is_the_configured_prices_and_names_unpriced_models() -> None:
    pricing = PricingConfig(
        models={
            "gpt-5-mini": ModelPrice(input=0.25, output=2.0),
            "whisper-1": ModelPrice(audio_minute=0.006),
        }
    )
    calls = [
        Call("reply", "gpt-5-mini", 2_000_000, 500_000),
        Call("transcription", "whisper-1", audio_seconds=120),
    ]
    assert cost(pricing, calls) == pytest.approx(0.5 + 1.0 + 0.012)
    unknown = [*calls, Call("extraction", "local-llama", 10, 5)]
    assert cost(pricing, unknown) is None and unpriced(pricing, unknown) == ["local-llama"]


async def test_the_ledger_adds_up_per_learner_and_day_on_both_stores(db: Database) -> None:
    ledger = UsageLedger(db)
    await ledger.record(
        1,
        [Call("reply", "m", 100, 20), Call("transcription", "w", audio_seconds=12.5)],
        NOW,
        turns=1,
    )
    await ledger.record(1, [Call("extraction", "m", 300, 40)], NOW)
    await ledger.record(1, [Call("reply", "m", 10, 2)], NOW - timedelta(days=40), turns=1)
    await ledger.record(2, [Call("reply", "m", 5, 5)], NOW, turns=1)
    assert await ledger.spent(1, NOW) == Spent(460, 12.5)
    assert await ledger.spent(1, NOW - timedelta(days=60)) == Spent(472, 12.5)
    (alice, bob) = await ledger.report(NOW)
    assert (alice.user_id, alice.turns, alice.total_tokens, alice.voice_seconds) == (
        1,
        1,
        460,
        12.5,
    )
    assert alice.tokens == {"reply": 120, "extraction": 340}
    assert (bob.user_id, bob.total_tokens) == (2, 10)
    limits = LimitsConfig(daily_tokens=460)
    assert await ledger.over_limit(limits, 1, NOW) is not None
    assert await ledger.over_limit(limits, 2, NOW) is None
    assert len(await ledger.export(1)) == 4
    assert await ledger.delete_user(1) == 4
    assert await ledger.spent(1, NOW - timedelta(days=60)) == Spent()
