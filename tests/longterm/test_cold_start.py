"""A user who is not in the cache is answered from Chroma's filtered nearest neighbours while
the whole user loads in the background (memora.longterm.search.COLD_CANDIDATES), unless the user
is small enough to load first (WAIT_FOR_LOAD): then the first search ranks every memory."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from memora.longterm import MemoryStore, NewMemory
from memora.longterm import search as search_module
from memora.longterm.embeddings import LocalUSE
from memora.longterm.snapshot import UserData

USER, OTHER = 41, 42
FACTS = [
    "The user is preparing for IELTS and wants band 7.",
    "使用者住在台北，在銀行上班。",
    "The user's English level is B1.",
    "用户喜欢看美剧学英文。",
    "The user has a daughter who plays the piano.",
    "The user wants to practise job interviews in English.",
    "使用者常搞混現在完成式和過去式。",
    "The user goes hiking in the mountains every weekend.",
]
QUERIES = ["我下個月要考雅思", "what is my level?", "piano lessons for kids", "weekend plans"]


class HeldLoad(MemoryStore):
    """The store with its background load held until the test lets it go."""

    release: threading.Event

    def _load_sync(self, user_id: int) -> UserData:
        assert self.release.wait(60), "the test never released the load"
        return super()._load_sync(user_id)


async def filled(path: Path, embedder: LocalUSE) -> None:
    async with MemoryStore(path, embedder) as store:
        await store.writer.add_many(
            USER, [NewMemory(t, chat_id=1 + i % 2) for i, t in enumerate(FACTS)]
        )
        await store.writer.add_many(OTHER, [NewMemory(t) for t in FACTS[:3]])


async def hits(store: MemoryStore, query: str, **kw: int) -> list[tuple[str, float]]:
    found = await store.searcher.search(USER, query, top_k=3, min_score=0.0, **kw)
    return [(h.memory.id, h.score) for h in found.hits]


async def test_first_search_after_a_restart_does_not_wait_for_the_load_and_ranks_the_same(
    tmp_path: Path, embedder: LocalUSE, monkeypatch: pytest.MonkeyPatch
) -> None:
    await filled(tmp_path, embedder)
    monkeypatch.setattr(search_module, "WAIT_FOR_LOAD", 0)  # every user answered from Chroma
    async with MemoryStore(tmp_path, embedder) as warm:
        await warm.memories(USER)
        want = {q: await hits(warm, q) for q in QUERIES}
        want_chat = await hits(warm, QUERIES[0], origin_chat=2)
    cold = HeldLoad(tmp_path, embedder)
    cold.release = threading.Event()
    await cold.open()
    try:
        for q in QUERIES:  # all answered while the load is held: fewer memories than candidates
            assert await asyncio.wait_for(hits(cold, q), 30) == want[q]
        assert await hits(cold, QUERIES[0], origin_chat=2) == want_chat
        assert cold._cache.get(USER) is None
        cold.release.set()
        assert len(await cold.memories(USER)) == len(FACTS)  # joins the load in flight
        loaded = cold._cache.get(USER)
        assert loaded is not None
        # what a search needs was built by the load, off the event loop, not by the next search
        assert {"bm25", "weight_kinds", "texts"} <= loaded.__dict__.keys()
        for q in QUERIES:
            assert await hits(cold, q) == want[q]
    finally:
        cold.release.set()
        await cold.close()


async def test_a_large_user_is_first_ranked_among_its_nearest_memories_only(
    tmp_path: Path, embedder: LocalUSE, monkeypatch: pytest.MonkeyPatch
) -> None:
    await filled(tmp_path, embedder)
    monkeypatch.setattr(search_module, "COLD_CANDIDATES", 2)
    monkeypatch.setattr(search_module, "WAIT_FOR_LOAD", len(FACTS) - 1)  # one memory too many
    cold = HeldLoad(tmp_path, embedder)
    cold.release = threading.Event()
    await cold.open()
    try:
        found = await cold.searcher.search(USER, QUERIES[0], top_k=5, min_score=0.0)
        assert cold._cache.get(USER) is None  # answered before anything was loaded
        assert 1 <= len(found.hits) <= 2  # two candidates for the one query vector
        assert all(h.memory.user_id == USER for h in found.hits)
        assert "IELTS" in found.hits[0].memory.text
        with_context = (
            await cold.searcher.search(  # a follow-up: its context is a second query vector
                USER,
                "and piano lessons for them?",
                top_k=5,
                min_score=0.0,
                extra_context="we talked about my family",
            )
        )
        assert 1 <= len(with_context.hits) <= 4  # two per query vector, the union ranked
        assert all(h.memory.user_id == USER for h in with_context.hits)
        assert (await cold.searcher.search(99, QUERIES[0], top_k=3, min_score=0.0)).hits == []
    finally:
        cold.release.set()
        await cold.close()
    async with MemoryStore(tmp_path, embedder) as store:  # a later search ranks them all
        await store.memories(USER)
        found = await store.searcher.search(USER, QUERIES[0], top_k=5, min_score=0.0)
        assert len(found.hits) == 5


class FailingLoad(MemoryStore):
    """The store whose loads fail (Chroma's read of the whole user breaks) until told not to."""

    failing = True

    def _load_sync(self, user_id: int) -> UserData:
        if self.failing:
            raise RuntimeError("the load broke")
        return super()._load_sync(user_id)


async def test_a_small_users_first_search_waits_for_the_load_and_ranks_every_memory(
    tmp_path: Path, embedder: LocalUSE, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user with no more memories than WAIT_FOR_LOAD is loaded before the first search
    answers: the hits are the warm search's even where Chroma's nearest neighbours would miss
    them (one candidate per query vector here), and the user is cached by that search."""
    await filled(tmp_path, embedder)
    async with MemoryStore(tmp_path, embedder) as warm:
        await warm.memories(USER)
        want = {q: await hits(warm, q) for q in QUERIES}
        want_chat = await hits(warm, QUERIES[0], origin_chat=2)
    monkeypatch.setattr(search_module, "COLD_CANDIDATES", 1)
    monkeypatch.setattr(search_module, "WAIT_FOR_LOAD", len(FACTS))
    for q in QUERIES:
        async with MemoryStore(tmp_path, embedder) as cold:  # each query a first search
            assert await hits(cold, q) == want[q]
            loaded = cold._cache.get(USER)
            assert loaded is not None and len(loaded.entries) == len(FACTS)
    async with MemoryStore(tmp_path, embedder) as cold:  # a group's first search: its view
        assert await hits(cold, QUERIES[0], origin_chat=2) == want_chat
        assert await hits(cold, QUERIES[0], origin_chat=3) == []  # nothing said in that group
        assert (await cold.searcher.search(99, QUERIES[0], top_k=3, min_score=0.0)).hits == []
    # a load that fails leaves the search to Chroma's nearest neighbours, and is logged
    broken = FailingLoad(tmp_path, embedder)
    await broken.open()
    try:
        found = await broken.searcher.search(USER, QUERIES[0], top_k=3, min_score=0.0)
        assert [h.memory.id for h in found.hits] == [want[QUERIES[0]][0][0]]  # one candidate
        assert broken._cache.get(USER) is None
        broken.failing = False
        assert await hits(broken, QUERIES[0]) == want[QUERIES[0]]  # the next search loads
    finally:
        await broken.close()
