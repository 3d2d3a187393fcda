"""The long-term store against a real Chroma PersistentClient and the real local embedder."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memora.longterm import MemoryNotFound, MemoryStore, NewMemory, StoreError
from memora.longterm.calibration import LOCAL_DEDUPE
from memora.longterm.dedupe import Relation, embedding_text, normalise_text, relation
from memora.longterm.embeddings import Embedded, Kind, LocalUSE
from memora.longterm.ranking import (
    DEFAULT_DENSE_WEIGHT,
    USE_SCALE,
    context_can_matter,
    follow_up_rank,
)
from memora.longterm.search import one_blas_thread
from memora.longterm.writes import UserLocks

NOW = datetime(2026, 11, 15, 8, 30, tzinfo=UTC)


# -- duplicates ----------------------------------------------------------------------------------


async def test_same_fact_three_times_in_two_languages_is_one_memory(store: MemoryStore) -> None:
    first = await store.writer.add(
        1, NewMemory("My level is B1", "manual", category="level"), now=NOW
    )
    second = await store.writer.add(1, NewMemory("我的英文程度是B1", "extracted", category="level"))
    third = await store.writer.add(1, NewMemory("The user's English level is B1.", "extracted"))
    assert [first.action, second.action, third.action] == ["added", "duplicate", "duplicate"]
    assert second.memory == first.memory and third.memory == first.memory
    assert [m.text for m in await store.memories(1)] == ["My level is B1"]


async def test_exact_repeat_with_other_spacing_and_punctuation_is_a_duplicate(
    store: MemoryStore,
) -> None:
    await store.writer.add(1, NewMemory("使用者偏好簡短的文法解釋。", "extracted"))
    again = await store.writer.add(1, NewMemory("  使用者偏好簡短的 文法解釋 ", "manual"))
    assert again.action == "duplicate"
    assert await store.count(1) == 1


async def test_a_different_level_is_not_a_duplicate_but_supersedes(store: MemoryStore) -> None:
    b1 = await store.writer.add(1, NewMemory("My level is B1", "manual", category="level"), now=NOW)
    b2 = await store.writer.add(1, NewMemory("My level is B2", "manual", category="other"))
    assert b2.action == "superseded"
    assert b2.previous == b1.memory
    assert b2.memory.id == b1.memory.id
    assert b2.memory.text == "My level is B2"
    assert b2.memory.category == "level"  # an automatic update keeps the known category
    assert [r.text for r in b2.memory.history] == ["My level is B1"]
    assert [m.text for m in await store.memories(1)] == ["My level is B2"]


def test_duplicate_guard_on_measured_pairs(embedder: LocalUSE) -> None:
    def rel(new: str, old: str) -> Relation:
        vectors = embedder._encode([embedding_text(new), embedding_text(old)])
        return relation(new, old, float(vectors[0] @ vectors[1]))

    for new, old in [
        ("My level is B1", "我的英文程度是B1"),
        ("The user's English level is B1", "My level is B1"),
        ("我的英文程度是B1", "The user's English level is B1"),
        ("使用者住在台北。", "The user lives in Taipei."),
        ("用户住在台北。", "使用者住在台北。"),
    ]:
        assert rel(new, old) is Relation.DUPLICATE, (new, old)
    for new, old in [
        ("My level is B2", "My level is B1"),
        ("使用者的英文程度是 B2。", "使用者的英文程度是 B1。"),
    ]:
        assert rel(new, old) is Relation.UPDATE, (new, old)
    for new, old in [
        (
            "The user wants to improve business English.",
            "The user wants to improve travel English.",
        ),
        ("使用者想加強商務英文。", "使用者想加強旅遊英文。"),
        ("The user does not like grammar drills.", "The user likes grammar drills."),
        ("The user prefers American English.", "The user prefers British English."),
        ("The user moved to Tainan.", "The user lives in Taipei."),
    ]:
        assert rel(new, old) is Relation.DISTINCT, (new, old)
    assert normalise_text("B1 ，level!") == normalise_text("b1level")
    assert 0.5 < LOCAL_DEDUPE.same_words < 0.7


async def test_add_many_is_one_batch_that_dedupes_within_itself(store: MemoryStore) -> None:
    results = await store.writer.add_many(
        7,
        [
            NewMemory("使用者想加強旅遊英文。", category="goal"),
            NewMemory("使用者想加強旅遊英文", category="goal"),
            NewMemory("The user is a nurse.", category="personal"),
        ],
        now=NOW,
    )
    assert [r.action for r in results] == ["added", "duplicate", "added"]
    assert results[1].memory.id == results[0].memory.id
    assert [m.text for m in await store.memories(7)] == [
        "使用者想加強旅遊英文。",
        "The user is a nurse.",
    ]


async def test_concurrent_adds_of_one_fact_store_it_once(store: MemoryStore) -> None:
    results = await asyncio.gather(
        *(
            store.writer.add(3, NewMemory("The user is preparing for IELTS.", "extracted"))
            for _ in range(4)
        )
    )
    assert sorted(r.action for r in results) == ["added"] + ["duplicate"] * 3
    assert await store.count(3) == 1


# -- supersede and revert ------------------------------------------------------------------------


async def test_supersede_keeps_history_and_revert_restores(store: MemoryStore) -> None:
    taipei = (
        await store.writer.add(1, NewMemory("The user lives in Taipei.", "extracted"), now=NOW)
    ).memory
    later = datetime(2026, 12, 1, tzinfo=UTC)
    moved = await store.writer.supersede(
        1, taipei.id, "The user moved to Tainan.", reason="moved", chat_id=5, now=later
    )
    assert moved.id == taipei.id and moved.text == "The user moved to Tainan."
    assert moved.created_at == taipei.created_at and moved.updated_at == "2026-12-01T00:00:00+00:00"
    assert [(r.text, r.reason) for r in moved.history] == [("The user lives in Taipei.", "moved")]
    assert moved.chat_id == 5
    assert await store.get(1, taipei.id) == moved

    restored = await store.writer.revert(1, taipei.id)
    assert restored is not None and restored.text == "The user lives in Taipei."
    # nothing is lost: the replaced text is in the history, and a second revert undoes the first
    assert [r.text for r in restored.history] == ["The user moved to Tainan."]
    again = await store.writer.revert(1, taipei.id)
    assert again is not None and again.text == "The user moved to Tainan."
    hits = (await store.searcher.search(1, "Tainan", top_k=3, min_score=0.0)).hits
    assert hits[0].memory.text == "The user moved to Tainan."


async def test_revert_without_history_and_supersede_of_a_missing_memory(
    store: MemoryStore,
) -> None:
    m = (await store.writer.add(1, NewMemory("The user is a nurse.", "manual"))).memory
    assert await store.writer.revert(1, m.id) is None
    assert await store.writer.revert(1, "no-such-id") is None
    with pytest.raises(MemoryNotFound):
        await store.writer.supersede(1, "no-such-id", "x", reason="test")
    with pytest.raises(MemoryNotFound):  # another user's memory is "missing" for this user
        await store.writer.supersede(2, m.id, "The user is a doctor.", reason="test")
    assert (await store.get(1, m.id)) == m


# -- reads ---------------------------------------------------------------------------------------


async def test_list_is_oldest_first_and_search_ranks(store: MemoryStore) -> None:
    texts = [
        "使用者想加強旅遊英文。",
        "使用者偏好簡短的文法解釋。",
        "The user works at a trading company.",
        "The user has a TOEIC exam in 2026-12.",
    ]
    for t in texts:
        await store.writer.add(
            9, NewMemory(t, "extracted"), now=NOW
        )  # same timestamp: order still kept
    assert [m.text for m in await store.memories(9)] == texts
    found = await store.searcher.search(
        9, "幫我安排適合我程度的旅遊英文練習", top_k=2, min_score=0.1
    )
    assert found.hits and found.hits[0].memory.text == "使用者想加強旅遊英文。"
    assert len(found.hits) <= 2
    assert all(0.1 <= h.score <= 1.0 for h in found.hits)
    assert [h.score for h in found.hits] == sorted((h.score for h in found.hits), reverse=True)
    # an unrelated message finds nothing above a sensible floor
    assert (
        await store.searcher.search(9, "What's the weather like?", top_k=3, min_score=0.2)
    ).hits == []
    assert (await store.searcher.search(9, "   ", top_k=3, min_score=0.0)).hits == []
    similar = await store.searcher.similar(9, "I have a TOEIC exam", k=2)
    assert len(similar) == 2 and similar[0].text == "The user has a TOEIC exam in 2026-12."


FOLLOW_UP_MEMORIES = [
    "Drives a taxi in Kaohsiung and often has foreign passengers",
    "Wants to learn how to give directions and talk about fares",
    "女兒在上初中，英語比她好",
    "Is allergic to peanuts",
]


async def test_a_follow_up_finds_what_the_previous_message_was_about(store: MemoryStore) -> None:
    for t in FOLLOW_UP_MEMORIES:
        await store.writer.add(4, NewMemory(t, "extracted"))
    previous = "passenger ask me go airport, how say"
    question = "那如果他們要去火車站呢"  # "and if they want the train station?": no topic word
    alone = await store.searcher.search(4, question, top_k=2, min_score=0.14)
    helped = await store.searcher.search(
        4, question, top_k=2, min_score=0.14, extra_context=previous
    )
    assert alone.hits == []  # the message alone finds nothing at the threshold
    assert {h.memory.text for h in helped.hits} == set(FOLLOW_UP_MEMORIES[:2])
    assert all(h.score >= 0.14 for h in helped.hits)


async def test_the_previous_message_only_adds_after_what_a_follow_up_finds_itself(
    store: MemoryStore,
) -> None:
    for t in FOLLOW_UP_MEMORIES:
        await store.writer.add(4, NewMemory(t, "extracted"))
    question = "and is satay sauce ok with my peanut allergy then?"  # names its own topic
    previous = "passenger ask me go airport, how say"
    # as the engine asks under a memory budget: every memory, the threshold as the floor
    alone = await store.searcher.search(4, question, top_k=4, min_score=0.0, floor=0.14)
    helped = await store.searcher.search(
        4, question, top_k=4, min_score=0.0, floor=0.14, extra_context=previous
    )
    assert alone.hits[0].memory.text == "Is allergic to peanuts"
    assert helped.hits[0] == alone.hits[0]  # same memory, same score
    assert helped.hits[1].memory.text == FOLLOW_UP_MEMORIES[0]  # the context's, next
    assert helped.hits[1].score >= 0.14 > max(h.score for h in alone.hits[1:])
    assert {h.memory.text for h in helped.hits} == set(FOLLOW_UP_MEMORIES)


async def test_a_change_of_topic_keeps_its_own_memories_first(
    tmp_path: Path, embedder: LocalUSE
) -> None:
    counting = CountingEmbedder(embedder)
    async with MemoryStore(tmp_path / "chroma", counting) as store:
        for t in FOLLOW_UP_MEMORIES:
            await store.writer.add(4, NewMemory(t, "extracted"))
        counting.texts.clear()
        question = "Is satay sauce safe for me to eat?"  # a new topic, no pointer back
        previous = "passenger ask me go airport, how say"
        alone = await store.searcher.search(4, question, top_k=4, min_score=0.0)
        helped = await store.searcher.search(
            4, question, top_k=4, min_score=0.0, extra_context=previous
        )
        assert helped.hits == alone.hits
        assert counting.texts[0] == question  # once (then cached)


class CountingEmbedder:
    """The real local model, counting the texts it is asked to embed."""

    def __init__(self, model: LocalUSE, *, local: bool = False) -> None:
        self.model, self.name, self.dim = model, model.name, model.dim
        self.local = local  # say it computes here, as LocalUSE does (store.search)
        self.texts: list[str] = []
        self.calls: list[list[str]] = []

    async def embed(self, texts: list[str], kind: Kind = "passage") -> Embedded:
        self.texts += texts
        self.calls.append(list(texts))
        return await self.model.embed(texts, kind)


MORE_MEMORIES = [
    "Takes foreign passengers to Taoyuan airport most mornings",
    "Wants to say the fare and the tip politely in English",
    "Often gets lost explaining directions to the train station",
    "Avoids satay and other peanut sauces",
    "Is allergic to shrimp as well",
    "每天晚上開計程車到十一點",
    "想學怎麼跟外國乘客聊天氣",
    "Practises English with podcasts while waiting for passengers",
]


@pytest.mark.parametrize("local", [True, False])
async def test_a_follow_up_s_context_is_skipped_only_where_it_cannot_change_the_hits(
    tmp_path: Path, embedder: LocalUSE, local: bool
) -> None:
    """The hits of a follow-up equal those of ranking the message and the previous message +
    the message both in full (follow_up_rank), whether or not the store skipped the context;
    a local model embeds the context only when it can matter, a service's gets it with the
    message in one call."""
    counting = CountingEmbedder(embedder, local=local)
    async with MemoryStore(tmp_path / "chroma", counting) as store:
        await store.writer.add_many(4, [NewMemory(t) for t in FOLLOW_UP_MEMORIES + MORE_MEMORIES])
        data = await store._data(4)
        previous = "passenger ask me go airport, how say"
        skipped = used = 0
        for question in [
            "and is satay sauce ok with my peanut allergy then?",
            "那如果他們要去火車站呢",
            "and what about the tip, how do I say it?",
            "那他們的行李呢",
            "so how do I explain directions to them?",
        ]:
            for top_k, min_score, floor in [(1, 0.14, None), (3, 0.14, None), (4, 0.0, 0.14)]:
                joined = f"{previous}\n{question}"
                store.embeddings.recent.clear()  # every message new: nothing from the vector cache
                counting.calls.clear()
                got = await store.searcher.search(
                    4, question, top_k=top_k, min_score=min_score, floor=floor,
                    extra_context=previous,
                )  # fmt: skip
                embedded = list(counting.calls)
                vectors, _ = await store.embeddings.queries([question, joined])
                with one_blas_thread():
                    message = store.searcher.scores(data, question, vectors[0])
                    together = store.searcher.scores(data, joined, vectors[1])
                edge = min_score if floor is None else floor
                want = follow_up_rank(message, together, edge, top_k, min_score)
                assert [(h.memory.id, h.score) for h in got.hits] == [
                    (data.entries[h.index].memory.id, h.score) for h in want
                ]
                if not local:
                    assert embedded == [[question, joined]]  # one call, as before
                elif context_can_matter(message, edge, top_k):
                    assert embedded == [[question], [joined]]  # the message, then the context
                    used += 1
                else:
                    assert embedded == [[question]]
                    skipped += 1
        assert local <= (skipped >= 3 and used >= 3)  # a local model takes both paths here
        # fewer memories than top_k: the context can always matter, so it comes in one call
        await store.writer.add_many(5, [NewMemory(t) for t in FOLLOW_UP_MEMORIES[:2]])
        await store.memories(5)  # cached: a warm search
        counting.calls.clear()
        question = "那如果他們要去火車站呢"
        small = await store.searcher.search(
            5, question, top_k=3, min_score=0.14, extra_context=previous
        )
        assert counting.calls == [[question, f"{previous}\n{question}"]]
        assert {h.memory.text for h in small.hits} == set(FOLLOW_UP_MEMORIES[:2])


async def test_a_message_is_embedded_once_for_the_reply_and_its_extraction(
    tmp_path: Path, embedder: LocalUSE
) -> None:
    counting = CountingEmbedder(embedder)
    async with MemoryStore(tmp_path / "chroma", counting) as store:
        await store.writer.add(4, NewMemory("The user is a nurse in Kaohsiung.", "manual"))
        message = "I  work night shifts at the hospital."
        found = await store.searcher.search(4, message, top_k=1, min_score=0.0)
        counting.texts.clear()
        # the extraction's look-up of the same message (it was just searched with)
        assert [m.text for m in await store.searcher.similar(4, message, k=1)] == [
            found.hits[0].memory.text
        ]
        again = await store.searcher.search(4, message, top_k=1, min_score=0.0)
        assert counting.texts == [] and again.embedding_tokens == 0
        assert again.hits == found.hits  # the same vector, the same ranking
        await store.delete_user(4)  # a forgotten user's messages are not kept even in memory
        await store.writer.add(4, NewMemory("The user is a teacher.", "manual"))
        counting.texts.clear()
        await store.searcher.similar(4, message, k=1)
        assert counting.texts == [message.replace("  ", " ")]


async def test_user_id_is_required_and_must_be_an_int(store: MemoryStore) -> None:
    with pytest.raises(TypeError):
        await store.searcher.search("1", "x", top_k=1, min_score=0.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await store.memories(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await store.writer.add(1, NewMemory("   ", "manual"))


# -- deletion and persistence --------------------------------------------------------------------


async def test_delete_user_is_complete_and_leaves_others_intact(store: MemoryStore) -> None:
    await store.writer.add_many(
        1, [NewMemory("My level is B1"), NewMemory("使用者住在台北。"), NewMemory("I like cats")]
    )
    await store.writer.add_many(2, [NewMemory("My level is B1"), NewMemory("The user is a nurse.")])
    assert await store.delete_user(1) == 3
    assert await store.count(1) == 0
    assert await store.memories(1) == []
    assert (await store.searcher.search(1, "My level is B1", top_k=5, min_score=0.0)).hits == []
    assert await store.searcher.similar(1, "My level is B1") == []
    assert await store.count(2) == 2
    hits = (await store.searcher.search(2, "level B1", top_k=5, min_score=0.0)).hits
    assert hits and all(h.memory.user_id == 2 for h in hits)
    assert await store.delete_user(1) == 0


async def test_delete_one_memory(store: MemoryStore) -> None:
    a = (await store.writer.add(1, NewMemory("The user is a nurse.", "manual"))).memory
    b = (await store.writer.add(1, NewMemory("使用者住在台北。", "manual"))).memory
    assert await store.delete(2, a.id) is False  # not that user's
    assert await store.delete(1, a.id) is True
    assert await store.delete(1, a.id) is False
    assert [m.id for m in await store.memories(1)] == [b.id]


async def test_memories_survive_reopening_the_store(tmp_path: Path, embedder: LocalUSE) -> None:
    path = tmp_path / "chroma"
    first = await MemoryStore.create(path, embedder)
    added = await first.writer.add(
        42,
        NewMemory(
            "使用者想加強旅遊英文。", "extracted", category="goal", chat_id=-100, message_id=7
        ),
    )
    await first.writer.add(
        42, NewMemory("The user lives in Taipei.", "manual", category="personal")
    )
    moved = await first.writer.supersede(
        42, (await first.memories(42))[1].id, "The user moved to Tainan.", reason="moved"
    )
    await first.close()

    async with MemoryStore(path, embedder) as second:
        memories = await second.memories(42)
        assert [m.text for m in memories] == ["使用者想加強旅遊英文。", "The user moved to Tainan."]
        assert memories[0] == added.memory
        assert memories[1] == moved
        assert memories[1].history[0].text == "The user lives in Taipei."
        hits = (
            await second.searcher.search(42, "travel English practice", top_k=1, min_score=0.0)
        ).hits
        assert hits[0].memory.id == added.memory.id


async def test_a_write_after_a_reload_appends_to_the_loaded_matrix(
    tmp_path: Path, embedder: LocalUSE
) -> None:
    """The load leaves room behind the user's matrix (UserData.with_room): the first write
    after a restart appends its row there instead of copying every memory's, and the memory it
    wrote is found like any other, in this process and the next."""
    path = tmp_path / "chroma"
    async with MemoryStore(path, embedder) as first:
        await first.writer.add_many(42, [NewMemory(t) for t in FACTS[:4]])
    async with MemoryStore(path, embedder) as second:
        loaded = await second._data(42)
        (chunk,) = loaded.matrix.chunks()
        # each memory's vector is its row of that matrix: the vectors are held once, in order
        for row, e in zip(chunk, loaded.entries, strict=True):
            assert np.shares_memory(e.vector, chunk) and np.array_equal(e.vector, row)
        added = await second.writer.add(
            42, NewMemory("The user plays badminton on Sundays.", "manual")
        )
        assert added.action == "added"
        after = await second._data(42)
        assert np.shares_memory(after.matrix.chunks()[0], chunk)  # the row went behind it
        assert len(loaded.entries) == 4 and len(after.entries) == 5  # the old one unchanged
        hits = (await second.searcher.search(42, "badminton", top_k=1, min_score=0.0)).hits
        assert hits[0].memory.id == added.memory.id
    async with MemoryStore(path, embedder) as third:
        reloaded = await third._data(42)
        assert np.array_equal(reloaded.vectors, after.vectors)
        assert [e.memory for e in reloaded.entries] == [e.memory for e in after.entries]


async def test_an_other_embedder_cannot_open_the_memories(
    tmp_path: Path, embedder: LocalUSE
) -> None:
    class Other:
        name = "some-other-model"
        dim = 512

        async def embed(self, texts: list[str], kind: str = "passage") -> Embedded:
            return Embedded(np.ones((len(texts), 512), dtype=np.float32) / np.sqrt(512))

    async with MemoryStore(tmp_path / "chroma", embedder) as s:
        await s.writer.add(1, NewMemory("The user is a nurse.", "manual"))
    with pytest.raises(StoreError, match="use-multilingual-v3"):
        await MemoryStore.create(tmp_path / "chroma", Other())
    async with MemoryStore(tmp_path / "chroma", embedder) as s:  # still opens with the right one
        assert await s.count(1) == 1


async def test_a_small_cache_evicts_users_without_losing_anything(
    tmp_path: Path, embedder: LocalUSE
) -> None:
    async with MemoryStore(tmp_path / "chroma", embedder, max_cached_users=1) as s:
        for uid in (1, 2, 3):
            await s.writer.add(uid, NewMemory(f"The user's English level is B{uid}.", "manual"))
        for uid in (1, 2, 3, 1):
            assert [m.text for m in await s.memories(uid)] == [
                f"The user's English level is B{uid}."
            ]
            hits = (await s.searcher.search(uid, "English level", top_k=5, min_score=0.0)).hits
            assert [h.memory.user_id for h in hits] == [uid]


# -- isolation between users (property) -----------------------------------------------------------

FACTS = [
    "My level is B1",
    "我的英文程度是B2",
    "使用者想加強旅遊英文。",
    "The user prefers short grammar explanations.",
    "The user lives in Taipei.",
    "使用者是護理師。",
    "The user has a TOEIC exam in 2026-12.",
    "用户常搞混现在完成式和过去式。",
    "The user can only study on weekends.",
    "The user enjoys American TV series.",
]


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as r:
        yield r


def test_users_never_see_or_touch_each_others_memories(
    tmp_path: Path, embedder: LocalUSE, runner: asyncio.Runner
) -> None:
    store = runner.run(MemoryStore.create(tmp_path / "chroma", embedder))
    fresh = itertools.count(1)

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        database=None,
    )
    @given(
        users=st.lists(
            st.integers(min_value=-(10**9), max_value=10**9), min_size=2, max_size=4, unique=True
        ),
        facts=st.lists(
            st.lists(st.sampled_from(FACTS), min_size=1, max_size=4), min_size=4, max_size=4
        ),
        query=st.sampled_from([*FACTS, "旅遊", "exam", "weekend"]),
    )
    def check(users: list[int], facts: list[list[str]], query: str) -> None:
        offset = next(fresh) * 10**10  # fresh ids for every example, in one shared store
        ids = [u + offset for u in users]
        runner.run(scenario(ids, facts[: len(ids)], query))

    async def scenario(ids: list[int], facts: list[list[str]], query: str) -> None:
        for uid, texts in zip(ids, facts, strict=True):
            await store.writer.add_many(uid, [NewMemory(t) for t in texts])
        own = {uid: await store.memories(uid) for uid in ids}
        for uid, texts in zip(ids, facts, strict=True):
            mine = own[uid]
            assert mine and all(m.user_id == uid for m in mine)
            assert {m.text for m in mine} <= set(texts)
            assert await store.count(uid) == len(mine)
            mine_ids = {m.id for m in mine}
            hits = (await store.searcher.search(uid, query, top_k=10, min_score=0.0)).hits
            assert {h.memory.id for h in hits} <= mine_ids
            assert {m.id for m in await store.searcher.similar(uid, query, k=10)} <= mine_ids
            for other in ids:
                if other == uid:
                    continue
                for m in own[other]:
                    assert await store.get(uid, m.id) is None
                    assert await store.delete(uid, m.id) is False
                    assert await store.writer.revert(uid, m.id) is None
        victim, survivor = ids[0], ids[1]
        before = await store.memories(survivor)
        assert await store.delete(victim, own[victim][0].id) is True
        assert await store.delete_user(victim) == len(own[victim]) - 1
        assert await store.count(victim) == 0
        assert await store.memories(survivor) == before
        for uid in ids[1:]:
            assert [m.id for m in await store.memories(uid)] == [m.id for m in own[uid]]

    try:
        check()
    finally:
        runner.run(store.close())


async def test_user_locks_serialise_one_user_and_are_dropped_when_unused() -> None:
    locks = UserLocks()
    order: list[str] = []

    async def write(user_id: int, name: str) -> None:
        async with locks.hold(user_id):
            order.append(f"{name} in")
            await asyncio.sleep(0.01)
            order.append(f"{name} out")

    await asyncio.gather(write(1, "a"), write(1, "b"), write(2, "c"))
    assert order.index("a out") < order.index("b in")  # one user: one writer at a time
    assert order.index("c in") < order.index("a out")  # another user does not wait
    assert len(locks) == 0
    with pytest.raises(RuntimeError):
        async with locks.hold(3):
            assert len(locks) == 1
            raise RuntimeError("a failed write")
    assert len(locks) == 0


# -- search terms (written by the extraction call, indexed with the text) ------------------------


async def test_search_terms_make_a_cross_lingual_message_match_lexically(
    tmp_path: Path, embedder: LocalUSE
) -> None:
    """The same Chinese memory for two users, one with its extraction terms: an English message
    that shares only a term with it ranks it higher and clears a threshold the other misses.
    The terms survive reopening the store, are not part of the text, and an update or undo
    (a new text) drops them."""
    path = tmp_path / "chroma"
    text = "養了一隻叫麻糬的柴犬"
    terms = ("dog", "Shiba Inu", "柴犬", "pet", "寵物", "Mochi")
    others = ["目前英文程度大約是 B1", "下個月要去東京出差", "每天通勤的時候用 Podcast 練聽力"]
    async with MemoryStore(path, embedder) as s:
        for user, with_terms in ((1, terms), (2, ())):
            items = [NewMemory(t, category="other") for t in others]
            items.append(NewMemory(text, category="personal", terms=with_terms))
            await s.writer.add_many(user, items, now=NOW)
        query = "any tips for walking my dog in the rain?"
        found = {
            u: (await s.searcher.search(u, query, top_k=4, min_score=0.0)).hits for u in (1, 2)
        }
        assert found[1][0].memory.text == text
        score = {
            u: next(h.score for h in hits if h.memory.text == text) for u, hits in found.items()
        }
        assert score[1] > score[2] + 0.1
    async with MemoryStore(path, embedder) as s:
        (dog,) = [m for m in await s.memories(1) if m.text == text]
        assert dog.terms == terms
        assert all(m.terms == () for m in await s.memories(2))
        hits = (await s.searcher.search(1, "Mochi", top_k=1, min_score=0.0)).hits
        assert hits[0].memory.id == dog.id and hits[0].score > 0.3  # a term no text holds
        updated = await s.writer.supersede(1, dog.id, "養了兩隻柴犬", reason="updated")
        assert updated.terms == ()  # the terms described the old text
        restored = await s.writer.revert(1, dog.id)
        assert restored is not None and restored.text == text and restored.terms == ()


async def test_inflections_and_traditional_simplified_meet_in_search(
    store: MemoryStore, embedder: LocalUSE
) -> None:
    """The lexical half of search folds English inflections and 繁/简: a question with
    "painting" finds the memory that says "painted", one in 简体 the memory written in 繁體, each
    first and scoring well above what its cosine alone would give (the shared terms count)."""
    texts = [
        "The user painted a sunrise over the lake last summer.",
        "The user runs every morning before work.",
        "使用者正在準備多益考試，目標 850 分。",
        "使用者喜歡看韓劇學口語。",
    ]
    await store.writer.add_many(12, [NewMemory(t) for t in texts], now=NOW)
    for query, expected in (("any tips for my painting?", 0), ("准备考试好累", 2)):
        hits = (await store.searcher.search(12, query, top_k=4, min_score=0.0)).hits
        assert hits[0].memory.text == texts[expected]
        vecs = (await embedder.embed([texts[expected], query])).vectors
        cosine = float(np.dot(vecs[0], vecs[1]))
        dense_part = DEFAULT_DENSE_WEIGHT * min(1.0, max(0.0, cosine) / USE_SCALE.ceiling)
        assert hits[0].score > dense_part + 0.15, (query, hits[0].score, cosine)
