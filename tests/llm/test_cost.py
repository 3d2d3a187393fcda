"""Cost you can predict (issue 39): cached input and reasoning tokens as both APIs report them,
kept per turn and per call kind and in the usage ledger, priced with a cached-input price; and
the fake server's prompt cache that reports them the way OpenAI documents it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Literal

import pytest
from pydantic import BaseModel

from memora.commands import CommandContext, run_command
from memora.config import LimitsConfig, ModelPrice, PricingConfig
from memora.engine import Engine, EngineConfig
from memora.extraction import ExtractionInput, ModeAsk, extract, fixed_instructions
from memora.llm import ChatMessage, OpenAILLM, ResponsesLLM, Usage
from memora.longterm import Memory, MemoryStore
from memora.modes import LESSONS, new_mode
from memora.modes.practice import exercise
from memora.shortterm.tokens import o200k
from memora.storage import Database
from memora.types import ChatRef, UserRef
from memora.usage import KINDS, Call, Metering, UsageLedger, cost, render_report
from tests.support.fake_openai import (
    Answer,
    FakeOpenAI,
    FakeReply,
    FakeRequest,
    approx_tokens,
    default_responder,
)

API = Literal["responses", "chat_completions"]
NOW = datetime(2026, 12, 5, 14, 30, tzinfo=UTC)
MODEL = "gpt-5-mini"
LONG = "Rules of the tutor's notes. " * 180  # 5,040 characters: 1,261 of the fake's tokens


class Note(BaseModel):
    text: str


class OtherNote(BaseModel):
    words: list[str]


def client(fake: FakeOpenAI, api: API = "responses") -> OpenAILLM:
    return OpenAILLM.for_api(api, model="gpt-fake", api_key="sk-fake", base_url=fake.base_url)


# -- the fake's prompt cache -----------------------------------------------------------------------
async def test_the_fake_caches_a_repeated_prefix_from_1024_tokens_in_blocks_of_128(
    fake: FakeOpenAI,
) -> None:
    llm = client(fake)
    try:
        first = await llm.complete(LONG, [ChatMessage("user", "I live in Taipei.")])
        again = await llm.complete(LONG, [ChatMessage("user", "My exam is in March.")])
        short = await llm.complete("Be brief.", [ChatMessage("user", "Hello")])
        short_again = await llm.complete("Be brief.", [ChatMessage("user", "Hello")])
    finally:
        await llm.aclose()
    assert first.usage.cached_tokens == 0  # nothing was cached yet
    shared = approx_tokens(LONG)  # the instructions; the messages differ from their first letter
    assert shared == 1261
    assert again.usage.cached_tokens == 1024 + 128  # 1,261 shared: one block past 1,024
    assert again.usage.input_tokens > again.usage.cached_tokens
    assert short_again.usage.cached_tokens == 0 == short.usage.cached_tokens  # under 1,024


async def test_another_schema_or_model_misses_the_cache(fake: FakeOpenAI) -> None:
    llm = client(fake)
    other = OpenAILLM.for_api("responses", model="gpt-other", api_key="k", base_url=fake.base_url)
    try:
        msgs = [ChatMessage("user", "Note this.")]
        await llm.parse(LONG, msgs, Note)
        same = await llm.parse(LONG, msgs, Note)
        changed = await llm.parse(LONG, msgs, OtherNote)
        elsewhere = await other.parse(LONG, msgs, Note)
    finally:
        await llm.aclose()
        await other.aclose()
    assert same.usage.cached_tokens >= 1024
    # OpenAI: "the structured output schema serves as a prefix to the system message"
    assert changed.usage.cached_tokens == 0
    assert elsewhere.usage.cached_tokens == 0


# -- both APIs' usage details ----------------------------------------------------------------------
@pytest.mark.parametrize("api", ["responses", "chat_completions"])
@pytest.mark.parametrize("stream", [False, True])
async def test_both_apis_report_cached_input_and_reasoning_tokens(
    fake: FakeOpenAI, api: API, stream: bool
) -> None:
    """Responses: usage.input_tokens_details.cached_tokens and
    usage.output_tokens_details.reasoning_tokens; Chat Completions:
    usage.prompt_tokens_details.cached_tokens and usage.completion_tokens_details
    .reasoning_tokens; plain, streamed and structured."""
    llm = client(fake, api)
    seen: list[str] = []

    async def on_delta(text: str) -> None:
        seen.append(text)

    try:
        await llm.complete(LONG, [ChatMessage("user", "first")])
        fake.queue_reply(FakeReply(text="Hello there.", usage={"reasoning_tokens": 64}))
        answer = await llm.complete(
            LONG, [ChatMessage("user", "second")], on_delta=on_delta if stream else None
        )
        fake.queue_reply(FakeReply(data={"text": "x"}, usage={"reasoning_tokens": 7}))
        parsed = await llm.parse(LONG, [ChatMessage("user", "third")], Note)
    finally:
        await llm.aclose()
    assert bool(seen) == stream
    assert answer.usage == Usage(
        input_tokens=1261 + approx_tokens("second"),
        output_tokens=approx_tokens("Hello there.") + 64,  # reasoning is billed as output
        cached_tokens=1152,
        reasoning_tokens=64,
    )
    assert parsed.usage.reasoning_tokens == 7
    assert parsed.usage.cached_tokens == 0  # the first call with this schema


async def test_deepseeks_cache_hits_are_read_as_cached_input(fake: FakeOpenAI) -> None:
    """DeepSeek reports its context cache as `prompt_cache_hit_tokens` (64-token units) beside
    the totals, not in `prompt_tokens_details`."""
    fake.like_deepseek()
    llm = OpenAILLM.for_api(
        "chat_completions", model="deepseek-chat", api_key="k", base_url=fake.base_url
    )
    rules = "Answer as a patient English tutor. " * 12  # 420 characters: 106 fake tokens
    try:
        await llm.complete(rules, [ChatMessage("user", "first")])
        again = await llm.complete(rules, [ChatMessage("user", "second")])
    finally:
        await llm.aclose()
    assert approx_tokens(rules) == 106
    assert again.usage.cached_tokens == 64  # one unit of the 106 shared


# -- the ledger and its price ----------------------------------------------------------------------
PRICING = PricingConfig(
    models={"gpt-5-mini": ModelPrice(input=0.25, cached_input=0.025, output=2.0)}
)


def test_cached_input_is_priced_apart_and_defaults_to_the_input_price() -> None:
    call = Call("extraction", "gpt-5-mini", 2_000_000, 100_000, cached_tokens=1_500_000)
    # 500k at 0.25, 1.5M at 0.025, 100k at 2.00
    assert cost(PRICING, [call]) == pytest.approx(0.125 + 0.0375 + 0.2)
    unset = PricingConfig(models={"gpt-5-mini": ModelPrice(input=0.25, output=2.0)})
    assert cost(unset, [call]) == pytest.approx(0.5 + 0.2)


async def test_the_ledger_keeps_cached_and_reasoning_tokens_per_kind(db: Database) -> None:
    ledger = UsageLedger(db)
    reply = Call("reply", "gpt-5-mini", 300, 90, cached_tokens=0, reasoning_tokens=40)
    extraction = Call("extraction", "gpt-5-mini", 1400, 60, cached_tokens=1152, reasoning_tokens=8)
    await ledger.record(1, [reply, extraction], NOW, turns=1)
    await ledger.record(1, [extraction], NOW)
    (alice,) = await ledger.report(NOW)
    by_kind = {c.kind: c for c in alice.calls}
    assert (by_kind["extraction"].cached_tokens, by_kind["extraction"].reasoning_tokens) == (
        2304,
        16,
    )
    assert (by_kind["reply"].cached_tokens, by_kind["reply"].reasoning_tokens) == (0, 40)
    rows = await ledger.export(1)
    assert {(r["kind"], r["cached_tokens"], r["reasoning_tokens"]) for r in rows} == {
        ("reply", 0, 40),
        ("extraction", 2304, 16),
    }
    text = render_report(await ledger.report(NOW), PRICING, 1, NOW)
    assert "cached input 2,304" in text and "reasoning 56" in text
    expected = cost(PRICING, alice.calls)
    assert expected is not None and f"≈ {expected:.4f} USD" in text


# -- through the engine, over the real SDK ---------------------------------------------------------
REASONING = {"reply": 10, "structured": 30}
SUMMARY_REASONING = 20


def reasoning_model(req: FakeRequest) -> Answer:
    """Answers as the default responder, with reasoning tokens by kind of call (a summary is a
    reply call with the summary instructions)."""
    answer = default_responder(req)
    spent = REASONING[req.kind]
    if "running summary" in (req.instructions or ""):
        spent = SUMMARY_REASONING
    if isinstance(answer, str):
        return FakeReply(text=answer, usage={"reasoning_tokens": spent})
    return FakeReply(data=answer, usage={"reasoning_tokens": spent})


@pytest.fixture
def metered(
    fake: FakeOpenAI, db: Database, store: MemoryStore, make_engine: Callable[..., Engine]
) -> Engine:
    return make_engine(
        db=db,
        llm=ResponsesLLM(model="gpt-5-mini", api_key="k", base_url=fake.base_url),
        store=store,
        config=EngineConfig(max_recent_turns=1),
        metering=Metering(UsageLedger(db), LimitsConfig(), dict.fromkeys(KINDS, MODEL), PRICING),
    )


async def test_a_turn_keeps_each_calls_cached_and_reasoning_tokens(
    fake: FakeOpenAI, metered: Engine, db: Database
) -> None:
    fake.responder = reasoning_model
    alice = UserRef(1, "Alice")
    for text in ("I'm a nurse in Taipei.", "I want TOEIC 850.", "How do I say 塞車?"):
        assert (await metered.handle_turn(ChatRef(1), alice, text)).ok
        await metered.drain()
    turns = await db.turns.turn_rows(1)
    assert [t["reply_reasoning"] for t in turns] == [10, 10, 10]
    assert [t["extraction_reasoning"] for t in turns] == [30, 30, 30]
    assert [t["summary_reasoning"] > 0 for t in turns] == [t["summary_tokens"] > 0 for t in turns]
    assert any(t["summary_tokens"] for t in turns)  # folds happened (one recent turn kept)
    # The extraction's instructions repeat on every turn: from the second on they are cached.
    assert turns[0]["extraction_cached"] == 0
    assert all(t["extraction_cached"] >= 1024 for t in turns[1:])
    (spent,) = await UsageLedger(db).report(NOW - timedelta(days=3650))
    kinds = {c.kind: c for c in spent.calls}
    assert kinds["extraction"].cached_tokens == sum(t["extraction_cached"] for t in turns)
    assert kinds["reply"].reasoning_tokens == 30
    assert kinds["summary"].reasoning_tokens == sum(t["summary_reasoning"] for t in turns)
    report = await run_command(metered, "usage", CommandContext(ChatRef(1), alice, "1", True))
    cached = kinds["extraction"].cached_tokens
    assert f"cached input {cached:,}" in report.text and "reasoning" in report.text
    status = await run_command(metered, "status", CommandContext(ChatRef(1), alice, ""))
    last = turns[-1]
    for part in ("cached", "reasoning"):
        shown = " · ".join(f"{k} {last[f'{k}_{part}']}" for k in ("reply", "summary", "extraction"))
        assert shown in status.text, status.text
    assert "reply 10 · summary 20 · extraction 30" in status.text


# -- the order of the extraction request -----------------------------------------------------------
def lesson_asks() -> dict[str, ModeAsk]:
    """What each lesson mode adds to the extraction call, for a turn that answered something."""
    rows = {
        "placement": (2, {"level": "B1"}),
        "roleplay": (2, {"scene": "airport"}),
        "practice": (
            1,
            {"items": [exercise(1, 0, "mistake", "I goed home", "I went home", "", 0)]},
        ),
    }
    asks = {}
    for kind, (step, state) in rows.items():
        row = replace(new_mode(kind, 1, 1, state, NOW), step=step)
        ask = LESSONS[kind].ask(row)
        assert ask is not None, kind
        asks[kind] = ask
    assert set(asks) == set(LESSONS)  # every lesson mode is tried
    return asks


def remembered(text: str, n: int, terms: tuple[str, ...] = ("x",)) -> Memory:
    at = NOW.isoformat()
    return Memory(f"m{n}", 1, text, "manual", "personal", at, at, terms=terms, situations=terms)


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
async def test_the_extraction_begins_with_the_same_1024_tokens_for_every_learner_turn_and_mode(
    fake: FakeOpenAI, api: API
) -> None:
    """The fixed instructions come first in every extraction request, whatever the learner, the
    turn (memories listed, search terms asked for) and the lesson mode; what varies comes after
    them. On a server without json_schema (JSON mode) too, where the schema is written into the
    instructions: after the fixed part."""
    if api == "chat_completions":
        fake.refused_formats = frozenset({"json_schema"})  # a DeepSeek-like server
        fake.refused_format_status = 400
    llm = client(fake, api)
    fixed = fixed_instructions("full", learner=True)
    learners = [
        ("I'm a nurse in Taipei.", ["level: B1"], [], []),
        ("我下個月要考多益", [], [remembered("The user lives in Taipei.", 1)], []),
        ("Forget my job.", ["goal: TOEIC 850"], [], [remembered("The user has a cat.", 2, ())]),
    ]
    cached: dict[str | None, list[int]] = {}
    try:
        for message, profile, existing, bare in learners:
            for kind, mode in [(None, None), *lesson_asks().items()]:
                outcome = await extract(
                    llm,
                    ExtractionInput(
                        message,
                        "Nice to meet you!",
                        existing,
                        NOW,
                        profile_lines=profile,
                        needs_terms=bare,
                    ),
                    mode=mode,
                )
                assert outcome.error is None, outcome.error
                cached.setdefault(kind, []).append(outcome.usage.cached_tokens)
    finally:
        await llm.aclose()
    sent = fake.requests_of("structured")
    assert len(sent) == len(learners) * (1 + len(LESSONS)) + (api == "chat_completions")
    assert all((r.instructions or "").startswith(fixed) for r in sent)
    assert len({r.instructions for r in sent}) > len(LESSONS)  # they do vary, after it
    assert len(o200k().encode(fixed)) >= 1024  # OpenAI caches a prefix from 1,024 tokens
    if api == "responses":  # every later learner's call in the same mode: from the cache
        assert all(c[0] == 0 for c in cached.values())  # the first call of each schema
        floor = approx_tokens(fixed) - 128
        assert all(n >= floor for c in cached.values() for n in c[1:]), cached
