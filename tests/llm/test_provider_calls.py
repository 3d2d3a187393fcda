"""What each model request carries, through the real SDK to the fake server in its provider
profiles: `store: false`, the learner's keyed identifier, a prompt-cache key and a reasoning
effort per call kind, each only where the API takes it; refusals (a parameter, a schema)
learned per model and per schema, and logged once."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from pydantic import BaseModel

from memora.engine import ChatRef, Engine, UserRef
from memora.llm import Api, CallInfo, ChatMessage, Learned, OpenAILLM, ProviderIdentity
from memora.storage import Database
from memora.storage.keys import PROVIDER_IDENTIFIER
from tests.support.fake_openai import FakeOpenAI
from tests.support.fakes import FakeLLM

APIS: list[Api] = ["responses", "chat_completions"]
INSTR = "You are a patient English tutor; answer in json when asked."
MSGS = [ChatMessage("user", "Yesterday I goed to the park.")]
MEI = CallInfo("reply", "a" * 64)


class Fix(BaseModel):
    corrected: str


class Loose(BaseModel):
    """A schema with JSON Schema defaults, which Azure refuses in strict mode."""

    note: str = ""


@asynccontextmanager
async def client(
    fake: FakeOpenAI, api: Api = "responses", model: str = "gpt-5-mini", **kw: Any
) -> AsyncIterator[OpenAILLM]:
    llm = OpenAILLM.for_api(api, model=model, api_key="sk-fake", base_url=fake.base_url, **kw)
    try:
        yield llm
    finally:
        await llm.aclose()


async def noop(_: str) -> None:
    return None


# -- privacy at the provider -----------------------------------------------------------------------
async def test_responses_requests_are_not_stored_unless_the_operator_opts_in(
    fake: FakeOpenAI,
) -> None:
    async with client(fake.like_openai()) as llm:
        await llm.complete(INSTR, MSGS)
        await llm.complete(INSTR, MSGS, on_delta=noop)
        await llm.parse(INSTR, MSGS, Fix)
    async with client(fake, store=True) as llm:
        await llm.complete(INSTR, MSGS)
    assert [r.body.get("store") for r in fake.requests] == [False, False, False, True]


async def test_chat_completions_sends_store_only_when_opted_in(fake: FakeOpenAI) -> None:
    """The API keeps nothing by default, and compatible servers do not know the parameter."""
    async with client(fake.like_openai(), "chat_completions") as llm:
        await llm.complete(INSTR, MSGS)
    async with client(fake, "chat_completions", store=True) as llm:
        await llm.complete(INSTR, MSGS)
    assert ["store" in r.body for r in fake.requests] == [False, True]
    assert fake.requests[1].body["store"] is True


@pytest.mark.parametrize("api", APIS)
async def test_the_learner_is_sent_as_their_identifier_with_a_cache_key_per_call_kind(
    fake: FakeOpenAI, api: Api
) -> None:
    async with client(fake.like_openai(), api) as llm:
        await llm.complete(INSTR, MSGS, call=MEI)
        await llm.complete(INSTR, MSGS, on_delta=noop, call=MEI)
        await llm.complete(INSTR, MSGS, call=CallInfo("summary", MEI.learner))
        await llm.parse(INSTR, MSGS, Fix, call=CallInfo("extraction", MEI.learner))
        await llm.complete(INSTR, MSGS)  # no learner: none sent
    bodies = [r.body for r in fake.requests]
    assert [b.get("safety_identifier") for b in bodies] == [MEI.learner] * 4 + [None]
    assert [b["prompt_cache_key"] for b in bodies] == [
        "memora-reply",
        "memora-reply",
        "memora-summary",
        "memora-extraction",
        "memora-reply",
    ]


def test_the_identifier_is_a_keyed_hash_of_the_learner_never_their_id() -> None:
    one, other = ProviderIdentity("key-one"), ProviderIdentity("key-two")
    assert one.of(123456789) == ProviderIdentity("key-one").of(123456789)  # stable
    assert len(one.of(123456789)) == 64 and "123456789" not in one.of(123456789)
    assert one.of(123456789) != one.of(123456780)
    assert one.of(123456789) != other.of(123456789)  # another deployment cannot match it


async def test_the_engine_sends_each_learners_identifier_on_the_reply_and_background_calls(
    mem_engine: Engine, llm: FakeLLM, db: Database
) -> None:
    alice, bob = UserRef(1001, "Alice"), UserRef(1002, "Bob")
    for i in range(4):
        assert (await mem_engine.handle_turn(ChatRef(1001), alice, f"I like tea {i}")).ok
        await mem_engine.drain()
    assert (await mem_engine.handle_turn(ChatRef(1002), bob, "I like coffee")).ok
    await mem_engine.drain()
    ids = ProviderIdentity(await db.keys.server_key(PROVIDER_IDENTIFIER))
    kinds = {(c.kind, c.info.kind, c.info.learner) for c in llm.calls if c.kind != "count"}
    assert kinds == {
        ("complete", "reply", ids.of(alice.id)),
        ("complete", "summary", ids.of(alice.id)),
        ("parse", "extraction", ids.of(alice.id)),
        ("complete", "reply", ids.of(bob.id)),
        ("parse", "extraction", ids.of(bob.id)),
    }
    assert all(str(alice.id) not in (c.info.learner or "") for c in llm.calls)


# -- reasoning effort per call kind ----------------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
async def test_each_call_kind_sends_its_own_reasoning_effort(fake: FakeOpenAI, api: Api) -> None:
    efforts: Any = {"reply": "minimal", "extraction": "low", "summary": ""}
    async with client(fake.like_openai(), api, efforts=efforts) as llm:
        await llm.complete(INSTR, MSGS, on_delta=noop)
        extraction = await llm.parse(INSTR, MSGS, Fix, call=CallInfo("extraction"))
        summary = await llm.complete(INSTR, MSGS, call=CallInfo("summary"))
    # the fake's reasoning model spends tokens by effort (summary: its default, medium), billed
    # as output and reported in the usage details the client reads
    assert (extraction.usage.reasoning_tokens, summary.usage.reasoning_tokens) == (200, 700)
    assert summary.usage.output_tokens > 700
    if api == "responses":
        sent = [(r.body.get("reasoning") or {}).get("effort") for r in fake.requests]
    else:
        sent = [r.body.get("reasoning_effort") for r in fake.requests]
    assert sent == ["minimal", "low", None]  # "": the model's own default


@pytest.mark.parametrize("api", APIS)
async def test_a_model_that_does_not_reason_refuses_an_effort_once_and_for_good(
    fake: FakeOpenAI, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """gpt-4.1 answers an effort with HTTP 400: asked again without it, and never sent again to
    that model; a streamed reply is still streamed (the 400 is not a refused stream)."""
    learned = Learned()
    with caplog.at_level(logging.WARNING):
        async with client(fake.like_openai(), api, "gpt-4.1-mini", learned=learned,
                          efforts={"reply": "low", "extraction": "low"}) as llm:  # fmt: skip
            first = await llm.complete(INSTR, MSGS, on_delta=noop)
            await llm.complete(INSTR, MSGS, on_delta=noop)
            await llm.parse(INSTR, MSGS, Fix, call=CallInfo("extraction"))
            assert llm.streams
        async with client(fake, api, "gpt-5-mini", learned=learned,
                          reasoning_effort="low") as other:  # fmt: skip
            await other.complete(INSTR, MSGS)
    assert first.text.startswith("Echo:")
    wire = "reasoning" if api == "responses" else "reasoning_effort"
    assert [wire in r.body for r in fake.requests] == [True, False, False, False, True]
    assert [r.stream for r in fake.requests[:3]] == [True, True, True]
    refusals = [r for r in caplog.records if "refuses `reasoning`" in r.getMessage()]
    assert len(refusals) == 1 and "gpt-4.1-mini" in refusals[0].getMessage()


async def test_an_effort_the_model_does_not_take_is_dropped_for_its_own_default(
    fake: FakeOpenAI,
) -> None:
    """gpt-5.1 takes "none" but not "minimal": the 400 names the value; the model's default
    applies from then on."""
    async with client(fake.like_openai(), model="gpt-5.1", reasoning_effort="minimal") as llm:
        await llm.complete(INSTR, MSGS)
        await llm.complete(INSTR, MSGS)
    assert ["reasoning" in r.body for r in fake.requests] == [True, False, False]


@pytest.mark.parametrize("api", APIS)
async def test_a_refused_parameter_is_dropped_for_that_model_and_the_others_kept(
    fake: FakeOpenAI, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    fake.refused_params = frozenset({"safety_identifier"})
    with caplog.at_level(logging.WARNING):
        async with client(fake, api) as llm:
            for _ in range(2):
                await llm.complete(INSTR, MSGS, call=MEI)
                await llm.parse(INSTR, MSGS, Fix, call=MEI)
    assert ["safety_identifier" in r.body for r in fake.requests] == [True] + [False] * 4
    assert all(r.body["prompt_cache_key"] == "memora-reply" for r in fake.requests)
    said = [r for r in caplog.records if "refuses `safety_identifier`" in r.getMessage()]
    assert len(said) == 1


# -- structured output decided per schema ----------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
async def test_a_schema_the_server_refuses_moves_down_alone(fake: FakeOpenAI, api: Api) -> None:
    """Azure refuses `default` in a strict schema: that schema goes to JSON mode, and every
    other schema keeps its strict form (it used to move the whole process down)."""
    fake.like_openai()
    fake.schema_refuses_default = True
    async with client(fake, api) as llm:
        loose = await llm.parse(INSTR, MSGS, Loose)
        fix = await llm.parse(INSTR, MSGS, Fix)
        await llm.parse(INSTR, MSGS, Loose)
        assert llm.structured_mode_for(Loose) == "json_object"
        assert llm.structured_mode_for(Fix) == llm.structured_mode == "json_schema"
    assert loose.parsed is not None and fix.parsed is not None
    sent = [(r.schema_name, r.response_format) for r in fake.requests]
    assert sent == [
        ("Loose", "json_schema"),
        (None, "json_object"),
        ("Fix", "json_schema"),
        (None, "json_object"),
    ]


async def test_a_server_without_json_schema_moves_every_schema_down_once(fake: FakeOpenAI) -> None:
    """A DeepSeek-like server refuses the form itself: learned for every schema at once."""
    async with client(fake.like_deepseek(), "chat_completions", "deepseek-chat") as llm:
        await llm.parse(INSTR, MSGS, Fix)
        await llm.parse(INSTR, MSGS, Loose)
    assert [r.response_format for r in fake.requests] == [
        "json_schema",
        "json_object",
        "json_object",
    ]
