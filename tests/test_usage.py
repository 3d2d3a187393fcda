"""Usage limits and cost (issue 31): the rules, then the whole flow through the engine on both
stores, then the real bot refusing a learner over the limit before any model request."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memora.app import metering
from memora.commands import CommandContext, run_command
from memora.config import LimitsConfig, LLMConfig, ModelPrice, PricingConfig, Settings
from memora.engine import Engine, EngineConfig
from memora.longterm import MemoryStore
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from memora.types import ChatRef, UserRef
from memora.usage import Call, Spent, UsageLedger, cost, over_limit, unpriced
from tests.support.bot import ADMIN, ALICE, ROOT, WAIT, ask, bot_over_fakes
from tests.support.fakes import FakeLLM

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


# -- through the engine -------------------------------------------------------------------------
LEARNER = UserRef(1, "Alice")


async def metered_engine(db: Database, llm: FakeLLM, store: MemoryStore, **limits: int) -> Engine:
    settings = Settings(llm=LLMConfig(api_key="k", model="m1", extraction_model="m2"))
    settings = settings.model_copy(update={"limits": LimitsConfig(**limits)})
    return Engine(
        db=db,
        llm=llm,
        counter=LocalTokenCounter(),
        store=store,
        config=EngineConfig(max_recent_turns=1),
        metering=metering(settings, db, "use"),
    )


async def test_every_call_of_a_turn_is_counted_as_the_turns_record_it(
    db: Database, llm: FakeLLM, store: MemoryStore
) -> None:
    engine = await metered_engine(db, llm, store)
    for text in ("I'm a nurse in Taipei.", "I want TOEIC 850.", "How do I say 塞車?"):
        llm.parsed.append({"memories": []})
        assert (await engine.handle_turn(ChatRef(1), LEARNER, text)).ok
        await engine.drain()
    (alice,) = await UsageLedger(db).report(NOW - timedelta(days=1))
    rows = await db.connection.rows(
        "SELECT SUM(actual_input + output_tokens), SUM(summary_tokens), SUM(extraction_tokens) "
        "FROM turns WHERE user_id=?",
        (LEARNER.id,),
    )
    reply, summary, extracted = (int(v) for v in rows[0])
    assert alice.turns == 3 and summary > 0  # folds happened (one recent turn kept)
    assert alice.tokens == {"reply": reply, "summary": summary, "extraction": extracted}
    assert {c.model for c in alice.calls} == {"m1", "m2"}  # extraction on its own model
    assert await engine.queries.reset_chat(1) == 6
    assert (await UsageLedger(db).spent(LEARNER.id, NOW - timedelta(days=1))).tokens == (
        alice.total_tokens
    )  # /reset keeps what was spent
    await engine.forget_user(LEARNER.id)
    assert await UsageLedger(db).report(NOW - timedelta(days=1)) == []


async def test_a_learner_over_the_limit_is_refused_before_any_model_call(
    db: Database, llm: FakeLLM, store: MemoryStore
) -> None:
    engine = await metered_engine(db, llm, store, daily_tokens=1)
    llm.parsed.append({"memories": []})
    assert (await engine.handle_turn(ChatRef(1), LEARNER, "Hello there")).ok
    await engine.drain()
    calls = len(llm.calls)
    refused = await engine.handle_turn(ChatRef(1), LEARNER, "One more question")
    assert not refused.ok and "resets on" in refused.text and "Nothing was saved" in refused.text
    assert len(llm.calls) == calls  # no model call at all
    assert [m.content for m in await engine.queries.history(1)] == [
        "Hello there",
        "Echo: Hello there",
    ]
    admin = await engine.handle_turn(ChatRef(1), LEARNER, "I am the admin", unlimited=True)
    assert admin.ok
    report = await run_command(engine, "usage", CommandContext(ChatRef(1), LEARNER, "", True))
    assert "Alice (1)" in report.text and "2 turns" in report.text
    assert not (await run_command(engine, "usage", CommandContext(ChatRef(1), LEARNER, ""))).ok


# -- the real bot ------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_real_bot_refuses_a_learner_over_the_limit_and_reports_usage(tmp_path: Path) -> None:
    with bot_over_fakes(tmp_path) as (tg, llm, bot):
        bot.env["MEMORA_LIMITS__DAILY_TOKENS"] = "1"
        prices = {"gpt-5-mini": {"input": 1, "cached_input": 0.1, "output": 4}}
        bot.env["MEMORA_PRICING__MODELS"] = json.dumps(prices)
        bot.start()
        try:
            assert ask(tg, "Hello! I'm Alice.") == "Echo: Hello! I'm Alice."
            tg.wait_for(lambda: llm.requests_of("structured"), WAIT, "the extraction call")
            before = len(llm.requests)
            refused = ask(tg, "Can you check my essay?")
            assert "allowance" in refused and "resets on" in refused
            assert len(llm.requests) == before  # refused before any model request
            assert ask(tg, "Admin here", user_id=ADMIN, first_name="Ada") == "Echo: Admin here"
            report = ask(tg, "/usage 1", user_id=ADMIN, first_name="Ada")
        finally:
            assert bot.stop() == 0, bot.output()
    assert f"Alice ({ALICE})" in report and "1 turn ·" in report and "USD" in report
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "usage", "--days", "1"],
        cwd=ROOT,
        env=bot.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"Alice ({ALICE})" in done.stdout and f"Ada ({ADMIN})" in done.stdout
    # Ada's extraction began as Alice's did: its instructions came from the provider's cache
    ada = next(line for line in done.stdout.splitlines() if f"Ada ({ADMIN})" in line)
    assert "cached input" in ada, done.stdout
