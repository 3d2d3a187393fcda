"""Search terms for memories that have none (a /remember fact, a memory older than terms), written
by the extraction call that already runs after each reply: the real engine, the real openai SDK
against tests/support/fake_openai.py, real SQLite and a real Chroma store with the real local
embedder."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from memora.commands import CommandContext, run_command
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.extraction import MAX_ASKS, MAX_BACKFILL
from memora.llm import ResponsesLLM
from memora.longterm import MemoryStore
from memora.longterm.lexical import BM25, tokenize
from memora.longterm.memories import NewMemory, SearchWords, indexed_text
from memora.longterm.ranking import DEFAULT_MIN_SCORE
from memora.storage import Database
from tests.support.fake_openai import FakeOpenAI, needs_terms_listed, terms_writer

MEI = UserRef(41, "Mei")
BOB = UserRef(42, "Bob")
CHAT = ChatRef(41)
BOB_CHAT = ChatRef(42)

SISTER = "My younger sister studies nursing in Japan."
SISTER_TERMS = ["sister", "妹妹", "nursing", "護理", "Japan", "日本"]
SISTER_SITUATIONS = ["family news", "家人近況", "hospital words", "醫院用語"]
QUERY = "我妹妹最近在日本好嗎？"  # shares no word with the English text, only with its terms


@pytest.fixture
def engine(
    fake: FakeOpenAI, sqlite_db: Database, store: MemoryStore, make_engine: Callable[..., Engine]
) -> Engine:
    llm = ResponsesLLM(model="gpt-test", api_key="x", base_url=fake.base_url)
    config = EngineConfig(max_input_tokens=2000)
    return make_engine(db=sqlite_db, llm=llm, store=store, config=config)


async def turn(engine: Engine, text: str, user: UserRef = MEI, chat: ChatRef = CHAT) -> None:
    assert (await engine.handle_turn(chat, user, text)).ok
    await engine.drain()


async def extraction_log(engine: Engine, user: UserRef = MEI, chat: ChatRef = CHAT) -> str:
    return (await run_command(engine, "extraction", CommandContext(chat, user, ""))).text


def lexical_scores(memories: list[str], query: str) -> list[float]:
    """BM25 over what the store indexes for each memory (text + terms), for the query."""
    return list(BM25.from_texts(memories).scores(tokenize(query)))


async def test_a_remembered_fact_gets_terms_at_the_next_turn_and_is_found_lexically(
    engine: Engine, fake: FakeOpenAI, store: MemoryStore
) -> None:
    await engine.queries.remember(CHAT, MEI, SISTER)
    await engine.queries.remember(CHAT, MEI, "I prefer short explanations.")
    (bare, _) = await store.memories(MEI.id)
    assert bare.terms == () and bare.source == "manual"
    assert lexical_scores([indexed_text(bare.text, bare.terms)], QUERY) == [0.0]

    fake.responder = terms_writer({SISTER: SISTER_TERMS}, situations={SISTER: SISTER_SITUATIONS})
    await turn(engine, "Can you help me with phrasal verbs?")

    (request,) = fake.requests_of("structured")  # no new call: the one extraction call
    assert set(needs_terms_listed(request).values()) == {SISTER, "I prefer short explanations."}
    assert "terms_for" in json.dumps(request.schema)
    sister, short = await store.memories(MEI.id)
    assert sister.text == SISTER and sister.terms == tuple(SISTER_TERMS)
    assert sister.situations == tuple(SISTER_SITUATIONS)
    assert sister.updated_at == bare.updated_at  # terms are not an update of the memory
    assert short.terms == ()  # the model gave none: it stays term-less, asked again later
    indexed = [indexed_text(m.text, m.terms) for m in (sister, short)]
    assert lexical_scores(indexed, QUERY)[0] > 0  # 妹妹 and 日本 now match lexically
    hits = await engine.queries.search_memories(MEI.id, QUERY, top_k=1)
    assert [h.memory.text for h in hits.hits] == [SISTER]
    assert "search terms added: " + SISTER in await extraction_log(engine)

    exported = await engine.export.export_chat(CHAT.id)
    assert exported is not None
    mems = exported["participants"][str(MEI.id)]["memories"]
    assert mems[0]["terms"] == SISTER_TERMS and mems[0]["situations"] == SISTER_SITUATIONS

    fake.reset()
    fake.responder = terms_writer({})
    await turn(engine, "And what about idioms?")
    (again,) = fake.requests_of("structured")
    assert list(needs_terms_listed(again).values()) == ["I prefer short explanations."]


async def test_another_users_memories_never_reach_the_request(
    engine: Engine, fake: FakeOpenAI, store: MemoryStore
) -> None:
    await engine.queries.remember(BOB_CHAT, BOB, "Bob's bank PIN hint is his dog's name.")
    await engine.queries.remember(BOB_CHAT, BOB, "Bob lives in Tainan.")
    await engine.queries.remember(CHAT, MEI, SISTER)
    fake.responder = terms_writer({SISTER: SISTER_TERMS, "Bob lives in Tainan.": ["Tainan"]})
    await turn(engine, "Hello again!")
    (request,) = fake.requests_of("structured")
    sent = json.dumps(request.body, ensure_ascii=False)
    assert SISTER in sent and "Bob" not in sent and "Tainan" not in sent
    assert all(m.terms == () for m in await store.memories(BOB.id))
    assert (await store.memories(MEI.id))[0].terms == tuple(SISTER_TERMS)


async def test_a_broken_answer_loses_nothing_and_the_next_turn_fills_the_terms(
    engine: Engine, fake: FakeOpenAI, store: MemoryStore
) -> None:
    await engine.queries.remember(CHAT, MEI, SISTER)
    fake.queue_reply("not json {", kind="structured")
    fake.queue_reply('{"terms_for": [{"id": 1, "terms": ', kind="structured")  # asked again
    await turn(engine, "Hi!")
    assert "failed" in await extraction_log(engine)
    (memory,) = await store.memories(MEI.id)
    assert memory.text == SISTER and memory.terms == ()

    fake.responder = terms_writer({SISTER: SISTER_TERMS})
    await turn(engine, "Hi again!")
    (memory,) = await store.memories(MEI.id)
    assert memory.terms == tuple(SISTER_TERMS)


async def test_unlisted_numbers_are_ignored_and_secret_terms_dropped(
    engine: Engine, fake: FakeOpenAI, store: MemoryStore
) -> None:
    await engine.queries.remember(CHAT, MEI, "I work at a bank in Taipei.")
    answer = {
        "memories": [],
        "terms_for": [
            {"id": "t1", "terms": ["bank", "銀行", "A123456789", "Taipei"]},
            {"id": "t7", "terms": ["hijack"]},  # no memory t7 was listed
            {"id": "m1", "terms": ["hijack"]},  # another list's id
        ],
    }
    fake.queue_reply(answer, kind="structured")
    await turn(engine, "What's new?")
    (memory,) = await store.memories(MEI.id)
    assert memory.terms == ("bank", "銀行", "Taipei")
    log = await extraction_log(engine)
    assert "ignored terms for unlisted memory t7" in log
    assert "ignored terms for unlisted memory m1" in log
    assert "A123456789" not in log and "[redacted]" in log


async def test_a_bounded_number_per_call_newest_first_until_all_have_terms(
    engine: Engine, fake: FakeOpenAI, store: MemoryStore
) -> None:
    facts = [
        "I play the violin.",
        "My cat is called Mochi.",
        "I work night shifts at a hospital.",
        "我每天搭捷運上班。",
        "I'm allergic to peanuts.",
        "My favourite film is Spirited Away.",
        "我下個月要搬到台中。",
    ][: MAX_BACKFILL + 2]
    for fact in facts:
        await engine.queries.remember(CHAT, MEI, fact)
    assert len(await store.memories(MEI.id)) == len(facts)
    fake.responder = terms_writer(
        {f: [f"hobby{n}", f"愛好{n}"] for n, f in enumerate(facts)},
        situations={f: [f"free time{n}"] for n, f in enumerate(facts)},
    )
    await turn(engine, "Let's practise.")
    first = list(needs_terms_listed(fake.requests_of("structured")[-1]).values())
    assert first == facts[::-1][:MAX_BACKFILL]
    await turn(engine, "Once more.")
    second = list(needs_terms_listed(fake.requests_of("structured")[-1]).values())
    assert second == facts[:2][::-1]
    assert all(m.terms for m in await store.memories(MEI.id))
    await turn(engine, "Done.")
    assert needs_terms_listed(fake.requests_of("structured")[-1]) == {}


async def test_store_add_terms_only_fills_what_it_was_asked_for(store: MemoryStore) -> None:
    one = (await store.writer.add(51, NewMemory("The user likes jazz.", "manual"))).memory
    two = (await store.writer.add(51, NewMemory("The user lives in Tainan.", "manual"))).memory
    other = (await store.writer.add(52, NewMemory("The user likes tea.", "manual"))).memory
    await store.writer.supersede(51, two.id, "The user lives in Tainan now.")
    filled, tokens = await store.writer.add_terms(
        51,
        {
            one.id: (one.text, SearchWords(("jazz", "爵士"))),
            two.id: (two.text, SearchWords(("Tainan",))),  # written for the old text: skipped
            other.id: (other.text, SearchWords(("tea",))),  # another user's: not found for 51
        },
    )
    assert [m.id for m in filled] == [one.id] and tokens >= 0
    again, _ = await store.writer.add_terms(51, {one.id: (one.text, SearchWords(("other",)))})
    assert again == []  # has terms now, and no situations were written
    # Situations fill a memory that has terms but none, and its terms stay.
    (more,), _ = await store.writer.add_terms(
        51, {one.id: (one.text, SearchWords(("other",), ("concert", "音樂會")))}
    )
    assert more.terms == ("jazz", "爵士") and more.situations == ("concert", "音樂會")
    assert (await store.writer.add_terms(51, {one.id: (one.text, SearchWords(("x",), ("y",)))}))[
        0
    ] == []
    by_id = {m.id: m for m in await store.memories(51)}
    assert by_id[one.id].terms == ("jazz", "爵士") and by_id[two.id].terms == ()
    assert by_id[one.id].situations == ("concert", "音樂會")
    assert (await store.memories(52))[0].terms == ()
    hits = await store.searcher.search(51, "我喜歡爵士樂", top_k=1, min_score=0.0)
    assert hits.hits[0].memory.id == one.id


async def test_in_a_group_only_memories_said_in_that_group_are_listed(
    engine: Engine, fake: FakeOpenAI, store: MemoryStore
) -> None:
    """/extraction in a group shows what the call wrote: never terms for a private memory."""
    group = ChatRef(-4100, "group", "Study group")
    await engine.queries.remember(CHAT, MEI, SISTER)  # said in the private chat
    await engine.queries.remember(group, MEI, "I lead the group's Friday reading session.")
    fake.responder = terms_writer({SISTER: SISTER_TERMS})
    await turn(engine, "Hi everyone!", chat=group)
    (request,) = fake.requests_of("structured")
    assert list(needs_terms_listed(request).values()) == [
        "I lead the group's Friday reading session."
    ]
    assert "妹妹" not in await extraction_log(engine, chat=group)
    await turn(engine, "Hi!")  # the private chat: its own memory gets its terms there
    by_text = {m.text: m.terms for m in await store.memories(MEI.id)}
    assert by_text[SISTER] == tuple(SISTER_TERMS)


async def test_a_memory_the_model_never_gives_terms_is_not_asked_about_forever(
    engine: Engine, fake: FakeOpenAI, store: MemoryStore
) -> None:
    """A model that never writes terms would carry the same memories in every call: after
    MAX_ASKS answered calls without its terms, a memory is left out (a failed call is no ask)."""
    await engine.queries.remember(CHAT, MEI, SISTER)
    fake.queue_reply("not json", kind="structured")
    fake.queue_reply("still not json", kind="structured")
    await turn(engine, "Turn zero.")  # broken twice: not counted
    fake.responder = terms_writer({})  # answers, never with terms
    for n in range(MAX_ASKS):
        await turn(engine, f"Turn {n + 1}.")
        assert list(needs_terms_listed(fake.requests_of("structured")[-1]).values()) == [SISTER]
    await turn(engine, "One more.")
    assert needs_terms_listed(fake.requests_of("structured")[-1]) == {}
    assert (await store.memories(MEI.id))[0].terms == ()
    await engine.queries.remember(
        CHAT, MEI, "I prefer short explanations."
    )  # a new one is asked about
    await turn(engine, "And again.")
    listed = needs_terms_listed(fake.requests_of("structured")[-1])
    assert list(listed.values()) == ["I prefer short explanations."]


async def test_a_memory_stored_before_situations_gets_them_after_the_term_less_ones(
    engine: Engine, fake: FakeOpenAI, store: MemoryStore
) -> None:
    """A memory with terms but no situations (stored before situations existed) is listed too,
    after the memories that have no terms at all; its situations are filled in, its terms stay,
    and a message that only a situation names then finds it."""
    allergy = "使用者對花生過敏"
    await store.writer.add_many(MEI.id, [NewMemory(allergy, "extracted", terms=("peanut", "花生"))])
    await engine.queries.remember(CHAT, MEI, SISTER)
    ask = "How do I ask the waiter in a restaurant what is in a dish?"
    before = await store.searcher.search(MEI.id, ask, top_k=3, min_score=DEFAULT_MIN_SCORE)
    assert allergy not in [h.memory.text for h in before.hits]
    fake.responder = terms_writer(
        {SISTER: SISTER_TERMS, allergy: ["allergy", "過敏"]},
        situations={SISTER: SISTER_SITUATIONS, allergy: ["restaurant", "餐廳", "點餐"]},
    )
    await turn(engine, "Let's practise.")
    (request,) = fake.requests_of("structured")
    assert list(needs_terms_listed(request).values()) == [SISTER, allergy]
    by_text = {m.text: m for m in await store.memories(MEI.id)}
    assert by_text[allergy].terms == ("peanut", "花生")  # kept: only the situations were missing
    assert by_text[allergy].situations == ("restaurant", "餐廳", "點餐")
    assert by_text[SISTER].terms == tuple(SISTER_TERMS)
    after = await store.searcher.search(MEI.id, ask, top_k=3, min_score=DEFAULT_MIN_SCORE)
    assert [h.memory.text for h in after.hits] == [allergy]
    await turn(engine, "Again.")
    assert needs_terms_listed(fake.requests_of("structured")[-1]) == {}
