"""Memory extraction: structured output from a scripted model, the code-level secret filter, and
applying the result to a real Chroma store with the real local embedder."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from memora.extraction import (
    COMPACT_INSTRUCTIONS,
    COMPACT_LEARNER_INSTRUCTIONS,
    EXTRACTION_INSTRUCTIONS,
    ExtractionInput,
    ExtractionOutcome,
    ExtractionResult,
    Rejection,
    apply,
    extract,
    looks_secret,
)
from memora.llm import LLM, LLMError
from memora.longterm import MemoryStore
from memora.longterm.dedupe import embedding_text, may_replace
from memora.longterm.embeddings import LocalUSE
from memora.longterm.memories import NewMemory, SearchWords
from memora.longterm.ranking import DEFAULT_MIN_SCORE
from tests.support.fakes import FakeLLM, outage

NOW = datetime(2026, 11, 15, 9, 0, tzinfo=UTC)


def mem(text: str, category: str = "other", replaces: str | int | None = None) -> dict[str, object]:
    return {"text": text, "category": category, "replaces": replaces}


def found(*memories: dict[str, object]) -> dict[str, object]:
    """The extraction's answer holding these memories (as the model writes them)."""
    return {"memories": list(memories)}


def facts_json(what: str) -> str:
    return json.dumps(found(mem(f"The user is {what}.", "personal")))


async def run(
    llm: LLM, store: MemoryStore, user_id: int, message: str, *, reply: str = "OK"
) -> tuple[ExtractionOutcome, list[str]]:
    existing = await store.searcher.similar(user_id, message, k=5)
    outcome = await extract(llm, ExtractionInput(message, reply, existing, NOW))
    results = await apply(store, user_id, outcome, existing, chat_id=10, message_id=20, now=NOW)
    return outcome, [r.action for r in results]


# -- the call ------------------------------------------------------------------------------------


async def test_extraction_is_structured_and_stored(store: MemoryStore) -> None:
    llm = FakeLLM()
    llm.parsed.append(
        found(
            mem("使用者的英文程度是 B1。", "level"),
            mem("使用者想加強旅遊英文。", "goal"),
        )
    )
    outcome, actions = await run(llm, store, 1, "我的英文程度大概是 B1，最近想加強旅遊英文。")
    assert outcome.error is None and outcome.rejected == []
    assert [(m.text, m.category) for m in outcome.memories] == [
        ("使用者的英文程度是 B1。", "level"),
        ("使用者想加強旅遊英文。", "goal"),
    ]
    assert '"使用者想加強旅遊英文。"' in outcome.raw  # the model's raw JSON, for /extraction
    assert outcome.usage.total_tokens > 0
    assert actions == ["added", "added"]
    stored = await store.memories(1)
    assert [(m.text, m.category, m.source) for m in stored] == [
        ("使用者的英文程度是 B1。", "level", "extracted"),
        ("使用者想加強旅遊英文。", "goal", "extracted"),
    ]
    assert stored[0].chat_id == 10 and stored[0].message_id == 20
    call = llm.calls[-1]
    assert call.kind == "parse" and call.schema == "ExtractionResult"
    assert call.instructions == EXTRACTION_INSTRUCTIONS


async def test_an_empty_result_stores_nothing(store: MemoryStore) -> None:
    llm = FakeLLM()
    llm.parsed.append(found())
    outcome, actions = await run(llm, store, 1, "請給我三個機場常用單字。")
    assert outcome.error is None and outcome.memories == [] and actions == []
    assert await store.count(1) == 0


async def test_prompt_grounds_time_and_numbers_existing_memories(store: MemoryStore) -> None:
    await store.writer.add(1, NewMemory("The user lives in Taipei.", "manual", category="personal"))
    await store.writer.add(1, NewMemory("My level is B1", "manual", category="level"))
    llm = FakeLLM()
    existing = await store.memories(1)
    await extract(
        llm,
        ExtractionInput(
            "I have an IELTS exam next month.", "Good luck! Let's practise speaking.", existing, NOW
        ),
    )
    prompt = llm.calls[-1].messages[-1].content
    assert "2026-11-15" in prompt and "2026-11" in prompt  # the date "next month" is relative to
    assert "1. [personal] The user lives in Taipei." in prompt
    assert "2. [level] My level is B1" in prompt
    assert "I have an IELTS exam next month." in prompt
    assert "Good luck! Let's practise speaking." in prompt
    for rule in ("next month", "password", "one-time requests", "replaces", "language"):
        assert rule in EXTRACTION_INSTRUCTIONS and rule in COMPACT_INSTRUCTIONS
    for part in ("profile", "mistakes", "vocabulary", "YYYY-MM-DD", "IANA", "only in profile"):
        assert part in COMPACT_LEARNER_INSTRUCTIONS


async def test_model_failures_never_raise(store: MemoryStore) -> None:
    llm = FakeLLM()
    llm.parsed.append(outage())
    failed = await extract(llm, ExtractionInput("hi", "", [], NOW))
    assert failed.error and "503" in failed.error and failed.memories == []

    llm.parsed.extend(['{"memories": [{"category": "level"}]}'] * 2)  # no text, twice
    invalid = await extract(llm, ExtractionInput("hi", "", [], NOW))
    assert invalid.error and "unusable answer" in invalid.error and invalid.memories == []
    assert llm.count("parse") == 3  # the outage, then one answer and one retry

    llm.parsed.append(RuntimeError("SDK surprise"))
    weird = await extract(llm, ExtractionInput("hi", "", [], NOW))
    assert weird.error and "SDK surprise" in weird.error

    results = await apply(store, 1, failed, [], chat_id=1, message_id=1)
    assert results == [] and await store.count(1) == 0


async def test_a_refusal_keeps_the_raw_text() -> None:
    class Refusing(FakeLLM):
        async def parse(self, instructions, messages, schema, **kw):  # type: ignore[no-untyped-def]
            from memora.llm import Parsed, Usage

            return Parsed(
                text="I can't help with that.", usage=Usage(5, 6), problem="the model refused"
            )

    outcome = await extract(Refusing(), ExtractionInput("hi", "", [], NOW))
    assert outcome.error and outcome.raw == "I can't help with that."
    assert outcome.usage.total_tokens == 11


# -- secrets -------------------------------------------------------------------------------------


async def test_secrets_are_dropped_by_code_even_when_the_model_returns_them(
    store: MemoryStore,
) -> None:
    llm = FakeLLM()
    llm.parsed.append(
        ExtractionResult.model_validate(
            found(
                mem("The user's password is hunter2.", "personal"),
                mem("使用者的信用卡號是 4111 1111 1111 1111。", "personal"),
                mem("The user's API key is sk-proj-AbCdEf0123456789XyZ.", "other"),
                mem("The user is a nurse.", "personal"),
            )
        )
    )
    outcome, actions = await run(
        llm, store, 5, "My password is hunter2, card 4111 1111 1111 1111. I'm a nurse."
    )
    assert [m.text for m in outcome.memories] == ["The user is a nurse."]
    assert [why for _, why in outcome.rejected] == [Rejection.SECRET] * 3
    assert "hunter2" not in outcome.raw and "4111 1111" not in outcome.raw
    assert "sk-proj" not in outcome.raw and "[redacted]" in outcome.raw
    assert actions == ["added"]
    assert [m.text for m in await store.memories(5)] == ["The user is a nurse."]


@pytest.mark.parametrize(
    "text",
    [
        "The user's password is hunter2",
        "使用者的密碼是 abc123",
        "用户的密码是 qwerty",
        "The user's PIN is 4821",
        "My bank PIN code: 4821",
        "Card 4111-1111-1111-1111 expires soon",
        "5500 0000 0000 0004",
        "key sk-abcdefghijklmnop1234",
        "bot token 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "IBAN DE89 3704 0044 0532 0130 00",
        "GB82WEST12345698765432",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
        "身分證字號 A123456789",
        "A123456789",
        "the verification code is 552211",
        "secret: Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1",
    ],
)
def test_looks_secret_catches(text: str) -> None:
    assert looks_secret(text)


@pytest.mark.parametrize(
    "text",
    [
        "The user's English level is B1.",
        "The user wants to pass TOEIC with 850 points.",
        "使用者打算 2026-12 考多益，目標 850 分。",
        "The user confuses 'pin' and 'pen'.",
        "The user studies 30 minutes every morning.",
        "The user was born in 1990 and lives in Taipei.",
        "The user's phone model is iPhone 15.",
        "The user works at a credit card company.",
        "使用者在信用卡公司上班。",
        "4111 1111 1111 1112",  # fails the Luhn check: not a card number
        "The user passed the GEPT intermediate test in 2025-06-15.",
    ],
)
def test_looks_secret_lets_ordinary_facts_through(text: str) -> None:
    assert not looks_secret(text)


# -- applying: duplicates, supersede, bad indices ------------------------------------------------


async def test_same_fact_from_three_turns_in_two_languages_is_one_memory(
    store: MemoryStore,
) -> None:
    llm = FakeLLM()
    for text in ["使用者的英文程度是 B1。", "The user's English level is B1.", "My level is B1"]:
        llm.parsed.append(found(mem(text, "level")))
    _, first = await run(llm, store, 2, "我的英文程度是 B1")
    _, second = await run(llm, store, 2, "My English level is B1 by the way")
    _, third = await run(llm, store, 2, "as I said, B1")
    assert (first, second, third) == (["added"], ["duplicate"], ["duplicate"])
    assert [m.text for m in await store.memories(2)] == ["使用者的英文程度是 B1。"]


LEVEL_B1 = "The user's English level is B1."


async def test_replaces_supersedes_with_history_and_revert_restores(store: MemoryStore) -> None:
    llm = FakeLLM()
    llm.parsed.append(
        found(
            mem("The user's English level is B1.", "level"),
            mem("The user lives in Taipei.", "personal"),
        )
    )
    await run(llm, store, 3, "I'm B1 and I live in Taipei.")
    existing = await store.searcher.similar(3, "I moved to Tainan and I'm B2 now", k=5)
    texts = [m.text for m in existing]
    taipei_no = f"m{1 + texts.index('The user lives in Taipei.')}"
    level_no = f"m{1 + texts.index(LEVEL_B1)}"
    llm.parsed.append(
        found(
            mem("The user moved to Tainan.", "personal", replaces=taipei_no),
            mem("The user's English level is B2.", "level", replaces=level_no),
        )
    )
    outcome = await extract(
        llm, ExtractionInput("I moved to Tainan and I'm B2 now", "Congratulations!", existing, NOW)
    )
    results = await apply(store, 3, outcome, existing, chat_id=10, message_id=21, now=NOW)
    assert [r.action for r in results] == ["superseded", "superseded"]
    assert results[0].previous is not None
    assert results[0].previous.text == "The user lives in Taipei."
    memories = await store.memories(3)
    assert [m.text for m in memories] == [
        "The user's English level is B2.",
        "The user moved to Tainan.",
    ]
    assert [r.text for r in memories[1].history] == ["The user lives in Taipei."]
    assert [r.text for r in memories[0].history] == ["The user's English level is B1."]
    assert memories[1].message_id == 21

    restored = await store.writer.revert(3, memories[1].id)
    assert restored is not None and restored.text == "The user lives in Taipei."
    assert [r.text for r in restored.history] == ["The user moved to Tainan."]


async def test_a_replaces_id_out_of_range_or_of_no_list_is_an_add(store: MemoryStore) -> None:
    """m7 and m0 name no memory shown; a bare 1 or t1 names none of <existing_memories> (the
    other list's number, read by a careless model): each is an add, the nurse is untouched."""
    await store.writer.add(4, NewMemory("The user is a nurse.", "manual", category="personal"))
    llm = FakeLLM()
    llm.parsed.append(found(mem("The user can only study on weekends.", "constraint", "m7")))
    llm.parsed.append(found(mem("The user enjoys American TV series.", "other", "m0")))
    llm.parsed.append(json.dumps(found(mem("The user has a cat.", "personal", 1))))
    llm.parsed.append(found(mem("The user has a dog.", "personal", "t1")))
    _, first = await run(llm, store, 4, "I can only study on weekends")
    _, second = await run(llm, store, 4, "I love American TV series")
    _, third = await run(llm, store, 4, "I have a cat")
    _, fourth = await run(llm, store, 4, "I have a dog")
    assert first == second == third == fourth == ["added"]
    assert [m.text for m in await store.memories(4)] == [
        "The user is a nurse.",
        "The user can only study on weekends.",
        "The user enjoys American TV series.",
        "The user has a cat.",
        "The user has a dog.",
    ]
    assert all(not m.history for m in await store.memories(4))


async def test_replaces_only_reaches_the_callers_own_memories(store: MemoryStore) -> None:
    other = (await store.writer.add(99, NewMemory("The user lives in Taipei.", "manual"))).memory
    llm = FakeLLM()
    llm.parsed.append(found(mem("The user moved to Tainan.", "personal", replaces="m1")))
    outcome = await extract(llm, ExtractionInput("I moved to Tainan", "", [other], NOW))
    # a list from another user (a caller bug) cannot make user 4 overwrite user 99's memory
    results = await apply(store, 4, outcome, [other], chat_id=1, message_id=2)
    assert [r.action for r in results] == ["added"]
    assert (await store.get(99, other.id)) == other


async def test_blank_and_repeated_items_are_not_stored_twice(store: MemoryStore) -> None:
    llm = FakeLLM()
    llm.parsed.append(
        found(
            mem("  ", "other"),
            mem("The user is a nurse.", "personal"),
            mem("the user is a nurse", "personal"),
        )
    )
    outcome, actions = await run(llm, store, 6, "I'm a nurse. A nurse!")
    assert [m.text for m in outcome.memories] == ["The user is a nurse."]
    assert outcome.rejected == [("the user is a nurse", Rejection.REPEATED)]
    assert actions == ["added"]


# -- models that misbehave ------------------------------------------------------------------------


async def test_near_shapes_are_read_as_meant() -> None:
    llm = FakeLLM()
    llm.parsed.append('["The user is a nurse.", {"text": "Likes jazz", "category": "hobby"}]')
    outcome = await extract(llm, ExtractionInput("I'm a nurse, I like jazz", "", [], NOW))
    assert outcome.error is None and llm.count("parse") == 1
    assert [(m.text, m.category) for m in outcome.memories] == [
        ("The user is a nurse.", "other"),
        ("Likes jazz", "other"),
    ]


async def test_broken_json_is_asked_for_again_once_with_the_error(store: MemoryStore) -> None:
    llm = FakeLLM()
    llm.parsed.extend(['{"memories": [{"text": "The user is a nurse"', facts_json("a nurse")])
    outcome, actions = await run(llm, store, 21, "I'm a nurse")
    assert actions == ["added"] and outcome.error is None
    retry = llm.calls[-1].messages
    assert [m.role for m in retry] == ["user", "assistant", "user"]
    assert retry[1].content.startswith('{"memories"') and "could not be used" in retry[2].content
    assert "--- asked again ---" in outcome.raw
    assert outcome.usage.input_tokens > 0


async def test_twice_broken_json_is_a_recorded_failure_that_keeps_no_secret() -> None:
    llm = FakeLLM()
    llm.parsed.extend(["not json at all", "my password is hunter22"])
    outcome = await extract(llm, ExtractionInput("x", "", [], NOW))
    assert outcome.error is not None and "unusable answer" in outcome.error
    assert outcome.memories == [] and "hunter22" not in outcome.raw


async def test_a_failed_second_ask_keeps_the_first_answer_and_both_reasons() -> None:
    """Seen on llama.cpp with a 2,048-token context: the first answer was cut off, and asking
    again (the answer and the error appended) no longer fit the context."""
    llm = FakeLLM()
    llm.parsed.extend(
        [
            '{"memories": [{"text": "The user lives in Tai',
            LLMError("the model service answered HTTP 400 (context_length_exceeded)"),
        ]
    )
    outcome = await extract(llm, ExtractionInput("x", "", [], NOW))
    assert outcome.error is not None
    assert "cut off" in outcome.error and "asking again failed" in outcome.error
    assert "context_length_exceeded" in outcome.error
    assert outcome.raw.startswith('{"memories"') and outcome.memories == []
    assert outcome.usage.input_tokens > 0  # the first call's usage is still counted


async def test_extraction_through_a_server_that_refuses_json_schema(store: MemoryStore) -> None:
    """The llama.cpp case end to end with the real SDK: the first turn falls back to JSON mode
    (no retries of the refused form), later turns ask in JSON mode straight away."""
    from memora.llm import ChatCompletionsLLM
    from tests.support.fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        fake.refused_formats = frozenset({"json_schema"})
        llm = ChatCompletionsLLM(model="smollm2", api_key="x", base_url=fake.base_url)
        try:
            for text in ("The user is a nurse.", "The user lives in Taipei."):
                fake.queue_reply(found(mem(text, "personal")))
                outcome, actions = await run(llm, store, 22, text)
                assert outcome.error is None and actions == ["added"]
        finally:
            await llm.aclose()
        assert [r.response_format for r in fake.requests] == [
            "json_schema",
            "json_object",
            "json_object",
        ]
        assert all(r.retry_count == 0 for r in fake.requests)


async def test_replaces_pointing_at_an_unrelated_memory_does_not_overwrite_it(
    store: MemoryStore,
) -> None:
    await store.writer.add(23, NewMemory("使用者的英文程度是 B1。", "manual", category="level"))
    await store.writer.add(
        23, NewMemory("The user lives in Taipei.", "manual", category="personal")
    )
    existing = await store.memories(23)
    llm = FakeLLM()
    llm.parsed.append(
        found(
            mem("The user is a nurse.", "personal", replaces="m1"),  # unrelated to "B1"
            mem("The user moved to Tainan.", "personal", replaces="m2"),  # a real update
        )
    )
    outcome = await extract(
        llm, ExtractionInput("I'm a nurse and I moved to Tainan", "", existing, NOW)
    )
    results = await apply(store, 23, outcome, existing, chat_id=1, message_id=2)
    assert [r.action for r in results] == ["added", "superseded"]
    assert [m.text for m in await store.memories(23)] == [
        "使用者的英文程度是 B1。",
        "The user moved to Tainan.",
        "The user is a nurse.",
    ]


@pytest.mark.parametrize(
    ("new", "old", "allowed"),
    [
        ("The user moved to Tainan.", "The user lives in Taipei.", True),
        ("使用者的目標改成雅思 7 分。", "使用者的目標是多益 850 分。", True),
        ("The user now works as a teacher.", "The user is a nurse.", True),
        ("The user is a nurse.", "使用者的英文程度是 B1。", False),
        ("The user likes jazz.", "The user's IELTS exam is in 2026-12.", False),
        ("The user's goal is TOEIC 900.", "The user has a daughter.", False),
    ],
)
async def test_may_replace_on_real_embeddings(
    embedder: LocalUSE, new: str, old: str, allowed: bool
) -> None:
    vecs = (await embedder.embed([embedding_text(new), embedding_text(old)])).vectors
    assert may_replace(new, old, float(vecs[0] @ vecs[1])) is allowed


# -- search terms (issue 12: index-time expansion on the call that already runs) ---------------


async def over_http(
    store: MemoryStore, user_id: int, message: str, answer: dict[str, Any]
) -> tuple[ExtractionOutcome, list[str], dict[str, Any]]:
    """One extraction through the real SDK against the fake server, which answers `answer`;
    with the schema of one memory that the SDK sent (strict structured output)."""
    from memora.llm import ResponsesLLM
    from tests.support.fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        llm = ResponsesLLM(model="gpt-test", api_key="x", base_url=fake.base_url)
        fake.queue_reply(answer)
        try:
            outcome, actions = await run(llm, store, user_id, message)
        finally:
            await llm.aclose()
        (request,) = fake.requests_of("structured")
    assert request.schema is not None
    item: dict[str, Any] = request.schema["$defs"]["ExtractedMemory"]
    return outcome, actions, item


async def test_terms_ride_on_the_extraction_call_and_are_stored(store: MemoryStore) -> None:
    """The real SDK asks the fake server for terms in the strict schema; the model's terms
    (English and the learner's language) are cleaned and stored with the memory."""
    from tests.support.fake_openai import extraction_answer

    terms = ["family", "mother", "家人", "媽媽", " Family ", "  mother's   cooking  ", ""]
    answer = extraction_answer(("媽媽很會做菜", "personal", terms))
    outcome, actions, item = await over_http(store, 31, "我媽媽很會做菜", answer)
    assert "terms" in item["properties"] and "terms" in item["required"]  # strict: required
    assert outcome.error is None and actions == ["added"]
    expected = ("family", "mother", "家人", "媽媽", "mother's cooking")  # deduped, collapsed
    assert outcome.memories[0].terms == list(expected)
    (stored,) = await store.memories(31)
    assert stored.text == "媽媽很會做菜" and stored.terms == expected


async def test_situations_ride_on_the_same_call_and_find_a_memory_the_message_never_names(
    store: MemoryStore,
) -> None:
    """The model's situations (requests where the fact matters though they never name it) come in
    the same strict answer, are stored with the memory's terms, and a later message that shares
    only a situation's word finds the memory."""
    answer = found(
        {
            "text": "使用者對花生過敏",
            "category": "personal",
            "replaces": None,
            "terms": ["peanut", "花生", "allergy", "過敏"],
            "situations": ["ordering food", "點餐", "restaurant", "餐廳", " Restaurant "],
        }
    )
    outcome, actions, item = await over_http(store, 33, "我對花生過敏", answer)
    assert "situations" in item["properties"] and "situations" in item["required"]
    assert outcome.error is None and actions == ["added"]
    (stored,) = await store.memories(33)
    assert stored.terms == ("peanut", "花生", "allergy", "過敏")
    assert stored.situations == ("ordering food", "點餐", "restaurant", "餐廳")  # deduped
    # The same fact with its terms only (user 34) is not found by that message: the situation is.
    await store.writer.add_many(
        34, [NewMemory("使用者對花生過敏", "extracted", terms=stored.terms)]
    )
    ask = "How do I ask the waiter in a restaurant what is in a dish?"
    with_situations = await store.searcher.search(33, ask, top_k=5, min_score=DEFAULT_MIN_SCORE)
    terms_only = await store.searcher.search(34, ask, top_k=5, min_score=DEFAULT_MIN_SCORE)
    assert [h.memory.text for h in with_situations.hits] == ["使用者對花生過敏"]
    assert terms_only.hits == []


async def test_situations_as_one_string_and_secrets_among_them() -> None:
    """A small model's "a, b、c" situations are split; a secret-looking one is dropped."""
    llm = FakeLLM()
    item = {
        **mem("The user works night shifts.", "constraint"),
        "terms": ["night shift"],
        "situations": "sleep, 睡覺、A123456789",
    }
    llm.parsed.append(json.dumps(found(item)))
    outcome = await extract(llm, ExtractionInput("I work nights", "", [], NOW))
    assert outcome.error is None
    assert outcome.memories[0].terms == ["night shift"]
    assert outcome.memories[0].situations == ["sleep", "睡覺"]
    assert ("A123456789", Rejection.SECRET) in outcome.rejected


async def test_a_secret_among_the_terms_is_dropped_and_redacted() -> None:
    llm = FakeLLM()
    item = {**mem("The user works at a bank.", "personal"), "terms": ["bank", "A123456789"]}
    llm.parsed.append(found(item))
    outcome = await extract(llm, ExtractionInput("I work at a bank", "", [], NOW))
    assert [m.terms for m in outcome.memories] == [["bank"]]
    assert ("A123456789", Rejection.SECRET) in outcome.rejected
    assert "A123456789" not in outcome.raw


async def test_terms_written_as_one_string_are_read_as_meant() -> None:
    """A small model that writes "a, b、c" instead of a list still gives its terms."""
    llm = FakeLLM()
    item = {**mem("The user likes hiking.", "preference"), "terms": "hiking, 爬山、mountains"}
    llm.parsed.append(json.dumps(found(item)))
    outcome = await extract(llm, ExtractionInput("I like hiking", "", [], NOW))
    assert outcome.error is None
    assert outcome.memories[0].terms == ["hiking", "爬山", "mountains"]


async def test_an_answer_without_terms_still_stores_the_memory(store: MemoryStore) -> None:
    llm = FakeLLM()
    llm.parsed.append(found(mem("The user is a nurse.", "personal")))
    _, actions = await run(llm, store, 32, "I'm a nurse")
    assert actions == ["added"]
    assert (await store.memories(32))[0].terms == ()


async def test_backfill_terms_in_near_shapes_are_read_as_meant() -> None:
    """A small model that answers only `terms_for`, with its terms as one string: read as meant,
    not mistaken for a bare list of memories."""
    from memora.extraction import TERMS_FOR_INSTRUCTIONS
    from memora.longterm.memories import Memory

    bare = Memory("m1", 1, "The user plays the violin.", "manual", "other", "t", "t")
    llm = FakeLLM()
    answer = {
        "terms_for": [{"id": "t1", "terms": "violin, 小提琴", "situations": "concert, 音樂會"}]
    }
    llm.parsed.append(json.dumps(answer))
    outcome = await extract(llm, ExtractionInput("hi", "", [], NOW, needs_terms=[bare]))
    assert outcome.error is None and outcome.memories == []
    assert outcome.terms_for == {1: SearchWords(("violin", "小提琴"), ("concert", "音樂會"))}
    call = llm.calls[-1]
    assert call.instructions == EXTRACTION_INSTRUCTIONS + TERMS_FOR_INSTRUCTIONS
    prompt = call.messages[-1].content
    assert "<needs_terms>\nt1. The user plays the violin.\n</needs_terms>" in prompt


async def test_the_compact_form_shows_fewer_memories_and_only_those_can_be_replaced(
    store: MemoryStore,
) -> None:
    facts = ["The user lives in Taipei.", "The user is a nurse.", "The user likes jazz.",
             "The user has a cat.", "The user studies at night."]  # fmt: skip
    for fact in facts:
        await store.writer.add(24, NewMemory(fact, "manual", category="personal"))
    existing = await store.memories(24)
    llm = FakeLLM()
    llm.parsed.append(found(mem("The user now studies in the morning.", "other", "m5")))
    outcome = await extract(
        llm,
        ExtractionInput("I study in the morning now", "", existing, NOW, needs_terms=existing),
        form="compact",
    )
    call = llm.calls[-1]
    assert call.instructions.startswith(COMPACT_INSTRUCTIONS)
    prompt = call.messages[-1].content
    assert "3. [personal] The user likes jazz." in prompt and "4. [" not in prompt
    assert "2. The user is a nurse." in prompt and "3. The user likes jazz.\n</needs" not in prompt
    assert outcome.form == "compact" and outcome.listed == 3
    results = await apply(store, 24, outcome, existing, chat_id=1, message_id=2)
    assert [r.action for r in results] == ["added"]  # m5 was not shown: not replaced
    assert "The user studies at night." in [m.text for m in await store.memories(24)]


async def test_no_room_to_ask_again_falls_back_to_the_compact_form() -> None:
    """An answer cut at the context's end (broken JSON), then the second ask refused as too
    long: the call is made again in the compact form, which the outcome reports."""
    llm = FakeLLM()
    too_long = LLMError("the model service answered HTTP 400", "context_length_exceeded")
    llm.parsed.extend(['{"memories": [{"text": "The us', too_long, facts_json("a nurse")])
    outcome = await extract(llm, ExtractionInput("I'm a nurse", "", [], NOW))
    assert outcome.error is None and outcome.form == "compact"
    assert [m.text for m in outcome.memories] == ["The user is a nurse."]
    assert llm.calls[-1].instructions.startswith(COMPACT_INSTRUCTIONS)
    assert llm.count("parse") == 3
