"""Usage limits and cost (issue 31): the rules, then the whole flow through the engine on both
stores, then the real bot refusing a learner over the limit before any model request."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memora.config import LimitsConfig, ModelPrice, PricingConfig
from memora.usage import Call, Spent, cost, over_limit, unpriced

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
