"""The LLM clients (memora.llm, a class per API) and the OpenAI embedder, via the real openai SDK
over HTTP to tests/support/fake_openai.py: both APIs, structured output, streaming, failures."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from itertools import pairwise
from typing import Literal

import numpy as np
import pytest
from pydantic import BaseModel

from memora.llm import (
    LLM,
    ChatCompletionsLLM,
    ChatMessage,
    LLMError,
    OpenAILLM,
    Parsed,
    ResponsesLLM,
    schema_sketch,
    validated,
)
from memora.llm.sdk_errors import NO_RESPONSES_API
from memora.longterm.embeddings import OpenAIEmbedder
from tests.support.fake_openai import (
    CutMode,
    FakeOpenAI,
    FakeReply,
    approx_tokens,
    fake_embedding,
    text_pieces,
)

API = Literal["responses", "chat_completions"]
APIS: list[API] = ["responses", "chat_completions"]

INSTR = "You are a patient English tutor."
MSGS = [
    ChatMessage("user", "Hi, I goed to school."),
    ChatMessage("assistant", "You mean 'went'."),
    ChatMessage("user", "Yes, I went to school yesterday."),
]


class Level(BaseModel):
    code: Literal["A1", "A2", "B1"]
    confidence: float


class Correction(BaseModel):
    corrected: str
    mistakes: list[str]
    count: int
    ok: bool
    note: str | None = None
    level: Level


@asynccontextmanager
async def make_llm(
    fake: FakeOpenAI,
    api: API = "responses",
    *,
    client_timeout: float = 10.0,
    max_retries: int = 2,
    reasoning_effort: str | None = None,
    max_output_tokens: int | None = None,
) -> AsyncIterator[OpenAILLM]:
    llm = OpenAILLM.for_api(
        api,
        model="gpt-fake",
        api_key="sk-fake",
        base_url=fake.base_url,
        timeout=client_timeout,
        max_retries=max_retries,
        reasoning_effort=reasoning_effort,
        max_output_tokens=max_output_tokens,
    )
    try:
        yield llm
    finally:
        await llm.aclose()


def expected_input_tokens(instructions: str, messages: list[ChatMessage]) -> int:
    return approx_tokens(instructions) + sum(approx_tokens(m.content) for m in messages)


# -- one class per API -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("api", "cls"), [("responses", ResponsesLLM), ("chat_completions", ChatCompletionsLLM)]
)
async def test_for_api_picks_the_class_that_speaks_that_api(
    fake: FakeOpenAI, api: API, cls: type[OpenAILLM]
) -> None:
    async with make_llm(fake, api) as llm:
        assert type(llm) is cls and llm.api == api
        assert llm.streams  # until a server refuses
        client: LLM = llm  # the protocol the engine takes
        assert (await client.complete(INSTR, MSGS)).text.startswith("Echo:")


async def test_chat_completions_sends_instructions_as_the_first_system_message(
    fake: FakeOpenAI,
) -> None:
    messages = [ChatMessage("developer", "Memories: likes tea"), *MSGS]
    async with make_llm(fake, "chat_completions", reasoning_effort="high") as llm:
        await llm.complete(INSTR, messages)
    body = fake.last_request.body
    assert body["messages"][:2] == [
        {"role": "system", "content": INSTR},
        {"role": "system", "content": "Memories: likes tea"},  # older servers lack "developer"
    ]
    # Chat Completions names the effort `reasoning_effort` (Responses: `reasoning.effort`)
    assert "reasoning" not in body and body["reasoning_effort"] == "high"


async def test_responses_sends_reasoning_effort_on_replies_and_structured_calls(
    fake: FakeOpenAI,
) -> None:
    async with make_llm(fake, "responses", reasoning_effort="low") as llm:
        await llm.complete(INSTR, MSGS)
        await llm.parse(INSTR, MSGS, Correction)
    assert [r.body["reasoning"] for r in fake.requests] == [{"effort": "low"}] * 2
    assert all(r.instructions == INSTR for r in fake.requests)


@pytest.mark.parametrize("api", APIS)
async def test_parse_returns_the_schema_type_itself(fake: FakeOpenAI, api: API) -> None:
    async with make_llm(fake, api) as llm:
        out: Parsed[Correction] = await llm.parse(INSTR, MSGS, Correction)
    assert isinstance(out.parsed, Correction)  # no re-validation needed by the caller
    assert out.parsed.level.code == "A1"


@pytest.mark.parametrize("api", APIS)
async def test_a_reply_with_no_text_is_an_llm_error(fake: FakeOpenAI, api: API) -> None:
    fake.queue_reply("   ")
    async with make_llm(fake, api) as llm:
        with pytest.raises(LLMError, match="empty answer"):
            await llm.complete(INSTR, MSGS)


@pytest.mark.parametrize("api", APIS)
async def test_each_client_learns_for_itself_that_its_server_cannot_stream(
    fake: FakeOpenAI, api: API
) -> None:
    fake.refuse_streams = True
    async with make_llm(fake, api) as first:
        await first.complete(INSTR, MSGS, on_delta=Collector())
        assert not first.streams
    fake.refuse_streams = False
    async with make_llm(fake, api) as second:  # e.g. after a restart: the server may be new
        seen = Collector()
        await second.complete(INSTR, MSGS, on_delta=seen)
    assert seen.texts and second.streams
    assert [r.stream for r in fake.requests] == [True, False, True]


# -- plain replies ---------------------------------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
async def test_complete_echoes_last_user_message_with_usage(fake: FakeOpenAI, api: API) -> None:
    async with make_llm(fake, api) as llm:
        out = await llm.complete(INSTR, MSGS)
    assert out.text == "Echo: Yes, I went to school yesterday."
    assert out.usage.input_tokens == expected_input_tokens(INSTR, MSGS)
    assert out.usage.output_tokens == approx_tokens(out.text)
    [req] = fake.requests
    assert req.kind == "reply"
    assert req.path == ("/v1/responses" if api == "responses" else "/v1/chat/completions")
    assert req.instructions == INSTR
    assert req.messages == [m.as_dict() for m in MSGS]
    assert req.model == "gpt-fake"
    assert req.schema_name is None
    assert req.headers["authorization"] == "Bearer sk-fake"


# -- structured output -----------------------------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
async def test_parse_scripted_object(fake: FakeOpenAI, api: API) -> None:
    answer = {
        "corrected": "I went to school.",
        "mistakes": ["goed"],
        "count": 1,
        "ok": False,
        "note": None,
        "level": {"code": "A2", "confidence": 0.8},
    }
    fake.queue_reply(answer)
    async with make_llm(fake, api) as llm:
        out = await llm.parse(INSTR, MSGS, Correction)
    assert out.parsed == Correction.model_validate(answer)
    assert json.loads(out.text) == answer
    assert out.usage.input_tokens == expected_input_tokens(INSTR, MSGS)
    [req] = fake.requests
    assert req.kind == "structured"
    assert req.schema_name == "Correction"
    assert req.schema is not None and "level" in req.schema["properties"]
    assert req.instructions == INSTR


@pytest.mark.parametrize("api", APIS)
async def test_parse_default_minimal_object(fake: FakeOpenAI, api: API) -> None:
    async with make_llm(fake, api) as llm:
        out = await llm.parse(INSTR, MSGS, Correction)
    assert out.parsed == Correction(
        corrected="",
        mistakes=[],
        count=0,
        ok=False,
        note=None,
        level=Level(code="A1", confidence=0),
    )


@pytest.mark.parametrize("api", APIS)
async def test_parse_refusal_gives_none(fake: FakeOpenAI, api: API) -> None:
    fake.queue_reply(FakeReply(refusal="I can't help with that."), kind="structured")
    async with make_llm(fake, api) as llm:
        out = await llm.parse(INSTR, MSGS, Correction)
    assert out.parsed is None


@pytest.mark.parametrize("api", APIS)
async def test_parse_malformed_json_keeps_the_text_and_says_why(fake: FakeOpenAI, api: API) -> None:
    fake.queue_reply("this is not json")
    async with make_llm(fake, api) as llm:
        out = await llm.parse(INSTR, MSGS, Correction)
    assert out.parsed is None and out.text == "this is not json"
    assert out.problem is not None and "not valid JSON" in out.problem


GOOD = {"corrected": "I went.", "mistakes": [], "count": 0, "ok": True, "level": {"code": "B1",
        "confidence": 1}}  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "```json\n" + json.dumps(GOOD) + "\n```",
        "Sure! Here it is: " + json.dumps(GOOD) + " Hope this helps.",
        json.dumps(GOOD)[:-1] + ",}",  # a trailing comma
    ],
)
async def test_parse_reads_fenced_wrapped_and_trailing_comma_json(
    fake: FakeOpenAI, text: str
) -> None:
    fake.queue_reply(text)
    async with make_llm(fake, "chat_completions") as llm:
        out = await llm.parse(INSTR, MSGS, Correction)
    assert out.parsed == Correction.model_validate(GOOD) and out.problem is None


def test_the_schema_sketch_keeps_keys_enums_and_types_in_few_tokens() -> None:
    """What the instructions spell out where the server does not enforce the schema."""
    assert schema_sketch(Correction) == (
        '{"corrected":string,"mistakes":[string],"count":int,"ok":bool,"note":string|null,'
        '"level":{"code":"A1"|"A2"|"B1","confidence":number}}'
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (json.dumps(GOOD)[:40], "cut off"),  # truncated: never completed by guessing
        ('{"corrected": "x"}', "does not fit the schema"),
    ],
)
def test_lenient_reading_does_not_guess(text: str, why: str) -> None:
    parsed, problem = validated(Correction, text)
    assert parsed is None and problem is not None
    assert why in problem or "not valid JSON" in problem


async def test_a_server_refusing_json_schema_gets_json_object_once_and_for_good(
    fake: FakeOpenAI,
) -> None:
    """llama.cpp's server answers json_schema with HTTP 500: no SDK retries of it, one fallback
    to json_object with the schema attached, remembered for the next calls."""
    fake.refused_formats = frozenset({"json_schema"})
    async with make_llm(fake, "chat_completions", max_retries=2) as llm:
        first = await llm.parse(INSTR, MSGS, Correction)
        second = await llm.parse(INSTR, MSGS, Correction)
        assert llm.structured_mode == "json_object"
    assert first.parsed is not None and second.parsed is not None
    formats = [r.response_format for r in fake.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    assert [r.retry_count for r in fake.requests] == [0, 0, 0]
    assert fake.requests[1].schema is not None  # the schema rides along
    assert schema_sketch(Correction) in (fake.requests[1].instructions or "")


@pytest.mark.parametrize("api", APIS)
async def test_a_server_refusing_every_format_gets_plain_instructions(
    fake: FakeOpenAI, api: API
) -> None:
    fake.refused_formats = frozenset({"json_schema", "json_object"})
    fake.refused_format_status = 400
    fake.queue_reply("```json\n" + json.dumps(GOOD) + "\n```", kind="reply")
    async with make_llm(fake, api) as llm:
        out = await llm.parse(INSTR, MSGS, Correction)
        assert llm.structured_mode == "instructions"
    assert out.parsed == Correction.model_validate(GOOD)
    assert [r.response_format for r in fake.requests] == ["json_schema", "json_object", None]
    assert schema_sketch(Correction) in (fake.requests[-1].instructions or "")


@pytest.mark.parametrize("api", APIS)
async def test_max_output_tokens_caps_every_call_when_set(fake: FakeOpenAI, api: API) -> None:
    """llama.cpp's server lets a model write until its context is full when no cap is sent."""
    field = "max_tokens" if api == "chat_completions" else "max_output_tokens"

    async def noop(_: str) -> None:
        return None

    for cap in (None, 64):
        fake.reset()
        async with make_llm(fake, api, max_output_tokens=cap) as llm:
            await llm.complete(INSTR, MSGS)
            await llm.complete(INSTR, MSGS, on_delta=noop)
            await llm.parse(INSTR, MSGS, Correction)
        assert [r.body.get(field) for r in fake.requests] == [cap, cap, cap]


async def test_an_over_long_request_says_so(fake: FakeOpenAI) -> None:
    fake.like_llama_cpp(context_window=10)
    async with make_llm(fake, "chat_completions") as llm:
        with pytest.raises(LLMError) as info:
            await llm.complete(INSTR, MSGS)
    assert str(info.value) == "the model service answered HTTP 400 (context_length_exceeded)"
    assert [r.retry_count for r in fake.requests] == [0]


async def test_an_outage_is_not_taken_for_a_refused_format(fake: FakeOpenAI) -> None:
    fake.fail_next(1, status=500, kind="structured")
    async with make_llm(fake, "chat_completions", max_retries=2) as llm:
        with pytest.raises(LLMError, match="HTTP 500"):
            await llm.parse(INSTR, MSGS, Correction)  # not yet known to work: no retries
        assert llm.structured_mode == "json_schema"
        await llm.parse(INSTR, MSGS, Correction)
        fake.fail_next(1, status=500, kind="structured")
        assert (await llm.parse(INSTR, MSGS, Correction)).parsed is not None  # now retried
    assert [r.retry_count for r in fake.requests] == [0, 0, 0, 1]


async def test_a_404_names_the_api_setting_only_when_the_responses_api_is_missing(
    fake: FakeOpenAI,
) -> None:
    fake.fail_next(1, status=404, kind="structured")
    async with make_llm(fake, "responses", max_retries=0) as llm:
        with pytest.raises(LLMError) as missing:
            await llm.parse(INSTR, MSGS, Correction)
    assert missing.value.code == NO_RESPONSES_API
    assert 'set [llm] api = "chat_completions"' in str(missing.value)
    fake.fail_next(1, status=404, kind="reply")  # a chat server's 404 is only a 404
    async with make_llm(fake, "chat_completions", max_retries=0) as llm:
        with pytest.raises(LLMError) as other:
            await llm.complete(INSTR, MSGS)
    assert str(other.value) == "the model service answered HTTP 404" and other.value.code is None


# -- token counting --------------------------------------------------------------------------------
async def test_count_input_tokens(fake: FakeOpenAI) -> None:
    fake.queue_reply("not for counts")  # kind=None entries are for generation requests only
    async with make_llm(fake) as llm:
        n = await llm.count_input_tokens(INSTR, MSGS)
        fake.queue_reply(1234, kind="count")
        scripted = await llm.count_input_tokens(INSTR, MSGS)
        reply = await llm.complete(INSTR, MSGS)
    assert n == expected_input_tokens(INSTR, MSGS)
    assert scripted == 1234
    assert reply.text == "not for counts"
    assert [r.kind for r in fake.requests] == ["count", "count", "reply"]
    assert fake.requests[0].path == "/v1/responses/input_tokens"


# -- failures --------------------------------------------------------------------------------------
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("status", [500, 429, 503])
async def test_retried_failures_are_counted(fake: FakeOpenAI, api: API, status: int) -> None:
    fake.fail_next(2, status=status)
    async with make_llm(fake, api, max_retries=2) as llm:
        out = await llm.complete(INSTR, MSGS)
    assert out.text.startswith("Echo:")
    assert [r.retry_count for r in fake.requests] == [0, 1, 2]


async def test_fail_next_by_kind(fake: FakeOpenAI) -> None:
    fake.fail_next(1, status=500, kind="structured")
    async with make_llm(fake, max_retries=0) as llm:
        await llm.complete(INSTR, MSGS)
        with pytest.raises(LLMError, match="HTTP 500"):
            await llm.parse(INSTR, MSGS, Correction)
        await llm.parse(INSTR, MSGS, Correction)
    assert [r.kind for r in fake.requests] == ["reply", "structured", "structured"]


@pytest.mark.parametrize("api", APIS)
async def test_down_raises_short_llm_error(fake: FakeOpenAI, api: API) -> None:
    fake.down = True
    async with make_llm(fake, api, max_retries=1) as llm:
        with pytest.raises(LLMError) as info:
            await llm.complete(INSTR, MSGS)
    assert str(info.value) == "the model service answered HTTP 503"
    assert len(fake.requests) == 2  # the first try and one retry


async def test_disconnect_raises_llm_error(fake: FakeOpenAI) -> None:
    fake.fail_next(mode="disconnect")
    async with make_llm(fake, max_retries=0) as llm:
        with pytest.raises(LLMError, match="could not be reached"):
            await llm.complete(INSTR, MSGS)
        assert (await llm.complete(INSTR, MSGS)).text.startswith("Echo:")
    assert len(fake.requests) == 2


async def test_timeout_raises_llm_error(fake: FakeOpenAI) -> None:
    fake.latency = 2.0
    started = time.monotonic()
    async with make_llm(fake, client_timeout=0.3, max_retries=0) as llm:
        with pytest.raises(LLMError, match="timed out"):
            await llm.complete(INSTR, MSGS)
    assert time.monotonic() - started < 1.5


# -- streamed replies ------------------------------------------------------------------------------
class Collector:
    """An on_delta callback that keeps every text it is given."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def __call__(self, text: str) -> None:
        self.texts.append(text)


def growing(texts: list[str]) -> bool:
    """Each text extends the one before it."""
    return all(b.startswith(a) and len(b) > len(a) for a, b in pairwise(texts))


@pytest.mark.parametrize("api", APIS)
async def test_stream_delivers_the_text_so_far_in_order(fake: FakeOpenAI, api: API) -> None:
    answer = "Good question! Use **could** for polite requests: Could you help me?"
    fake.queue_reply(answer)
    seen = Collector()
    async with make_llm(fake, api) as llm:
        out = await llm.complete(INSTR, MSGS, on_delta=seen)
    assert out.text == answer
    pieces = text_pieces(answer)
    assert len(pieces) > 5 and seen.texts == ["".join(pieces[: i + 1]) for i in range(len(pieces))]
    assert growing(seen.texts) and seen.texts[-1] == answer
    assert out.usage.input_tokens == expected_input_tokens(INSTR, MSGS)
    assert out.usage.output_tokens == approx_tokens(answer)
    [req] = fake.requests
    assert req.stream and req.kind == "reply" and req.messages == [m.as_dict() for m in MSGS]
    if api == "chat_completions":
        assert req.body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("api", APIS)
async def test_streamed_and_plain_answers_agree(fake: FakeOpenAI, api: API) -> None:
    scripted = FakeReply(text="Same either way.", usage={"input_tokens": 11, "output_tokens": 4})
    fake.queue_reply(scripted)
    fake.queue_reply(scripted)
    async with make_llm(fake, api) as llm:
        plain = await llm.complete(INSTR, MSGS)
        streamed = await llm.complete(INSTR, MSGS, on_delta=Collector())
    assert streamed == plain
    assert (streamed.usage.input_tokens, streamed.usage.output_tokens) == (11, 4)
    assert [r.stream for r in fake.requests] == [False, True]


async def test_stream_with_reasoning_item(fake: FakeOpenAI) -> None:
    llm = ResponsesLLM(
        model="gpt-fake", api_key="sk-fake", base_url=fake.base_url, reasoning_effort="low"
    )
    try:
        seen = Collector()
        out = await llm.complete(INSTR, MSGS, on_delta=seen)
    finally:
        await llm.aclose()
    assert out.text == "Echo: Yes, I went to school yesterday." == seen.texts[-1]
    assert fake.last_request.body["reasoning"] == {"effort": "low"}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("cut", "why"),
    [
        ("disconnect", "the connection to the model service broke mid-answer"),
        ("end", "the answer stream ended before the answer was complete"),
        ("error", "the model service failed mid-answer"),
    ],
)
async def test_a_cut_stream_is_an_llm_error(
    fake: FakeOpenAI, api: API, cut: CutMode, why: str
) -> None:
    fake.queue_reply(FakeReply(text="one two three four five", cut_after=2, cut=cut))
    seen = Collector()
    async with make_llm(fake, api, max_retries=2) as llm:
        with pytest.raises(LLMError) as info:
            await llm.complete(INSTR, MSGS, on_delta=seen)
        assert str(info.value).startswith(why)
        assert seen.texts == ["one ", "one two "]
        assert len(fake.requests) == 1  # a stream that has begun is never retried
        again = await llm.complete(INSTR, MSGS, on_delta=Collector())
    assert again.text.startswith("Echo:")


@pytest.mark.parametrize("api", APIS)
async def test_a_stalled_stream_times_out(fake: FakeOpenAI, api: API) -> None:
    fake.stream_delay = 1.0
    seen = Collector()
    started = time.monotonic()
    async with make_llm(fake, api, client_timeout=0.3, max_retries=0) as llm:
        with pytest.raises(LLMError, match="timed out"):
            await llm.complete(INSTR, MSGS, on_delta=seen)
    assert time.monotonic() - started < 2.0
    assert seen.texts == []


@pytest.mark.parametrize("api", APIS)
async def test_failures_before_a_stream_starts_are_retried(fake: FakeOpenAI, api: API) -> None:
    fake.fail_next(1, status=503)
    seen = Collector()
    async with make_llm(fake, api, max_retries=1) as llm:
        out = await llm.complete(INSTR, MSGS, on_delta=seen)
    assert out.text == seen.texts[-1] == "Echo: Yes, I went to school yesterday."
    assert [r.retry_count for r in fake.requests] == [0, 1]


@pytest.mark.parametrize("api", APIS)
async def test_an_empty_streamed_answer_is_an_llm_error(fake: FakeOpenAI, api: API) -> None:
    fake.queue_reply("")
    async with make_llm(fake, api) as llm:
        with pytest.raises(LLMError, match="empty answer"):
            await llm.complete(INSTR, MSGS, on_delta=Collector())


@pytest.mark.parametrize("api", APIS)
async def test_a_server_that_cannot_stream_gets_plain_requests(fake: FakeOpenAI, api: API) -> None:
    fake.refuse_streams = True
    seen = Collector()
    async with make_llm(fake, api) as llm:
        first = await llm.complete(INSTR, MSGS, on_delta=seen)
        second = await llm.complete(INSTR, MSGS, on_delta=seen)
    assert first.text == second.text == "Echo: Yes, I went to school yesterday."
    assert seen.texts == []  # no progress to show, but the answers arrive
    assert [r.stream for r in fake.requests] == [True, False, False]  # tried once, then plain


@pytest.mark.parametrize("api", APIS)
async def test_a_bad_request_is_not_mistaken_for_a_server_that_cannot_stream(
    fake: FakeOpenAI, api: API
) -> None:
    fake.fail_next(2, status=400)  # the streamed try and the plain retry both fail
    async with make_llm(fake, api) as llm:
        with pytest.raises(LLMError, match="HTTP 400"):
            await llm.complete(INSTR, MSGS, on_delta=Collector())
        assert llm.streams
        await llm.complete(INSTR, MSGS, on_delta=Collector())
    assert [r.stream for r in fake.requests] == [True, False, True]


# -- embeddings ------------------------------------------------------------------------------------
async def test_openai_embedder_vectors(fake: FakeOpenAI) -> None:
    texts = ["I like green apples", "I like green apples a lot", "Quantum chromodynamics"]
    embedder = OpenAIEmbedder(
        model="text-embedding-3-small", api_key="sk-fake", base_url=fake.base_url
    )
    try:
        out = await embedder.embed(texts)
    finally:
        await embedder.aclose()
    assert out.vectors.shape == (3, 1536)
    assert out.vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out.vectors, axis=1), 1.0, rtol=1e-5)
    sims = out.vectors @ out.vectors.T
    assert sims[0, 1] > sims[0, 2]
    assert out.tokens == sum(approx_tokens(t) for t in texts)
    np.testing.assert_allclose(out.vectors[0], fake_embedding(texts[0]), rtol=1e-5, atol=1e-7)
    [req] = fake.requests
    assert req.kind == "embed" and req.texts == texts
    assert req.body["encoding_format"] == "base64"  # the SDK's default on the wire


async def test_openai_embedder_outage_is_a_short_llm_error(fake: FakeOpenAI) -> None:
    fake.down = True
    embedder = OpenAIEmbedder(
        model="text-embedding-3-small", api_key="sk-fake", base_url=fake.base_url, max_retries=0
    )
    try:
        with pytest.raises(LLMError, match="embeddings service answered HTTP 503"):
            await embedder.embed(["hello"])
    finally:
        await embedder.aclose()
