"""Deleted means gone from the disk: after /forgetme or /forget answers, no file under data_dir
holds the learner's words (Chroma's log, free pages, the SQLite WAL included).

The real `memora chat` process runs on a real data dir against the fake OpenAI server; the
test greps the bytes of every file while the process is still running.
"""

from __future__ import annotations

import asyncio
import ctypes
import platform
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import memora.longterm.chroma as backend_module
import memora.longterm.search as search_module
from memora.longterm.memories import NewMemory
from memora.longterm.memory_store import COLLECTION, MemoryStore
from memora.storage.file_erasure import (
    CHROMA_FILE,
    CHROMA_HNSW,
    ERASE_HNSW,
    HNSW_HEADER,
    erase_deleted_vectors,
    hnsw_indexes,
    scrub_hnsw,
)
from tests.support.disk import files_holding
from tests.support.fake_openai import FakeOpenAI, FakeRequest, default_responder
from tests.support.terminal import ChatProcess, memora_env

pytestmark = pytest.mark.slow

MARKER = "Zorblaxquintet"
# Written only into the memory's search terms and situations (Chroma metadata), never said.
INDEX_MARKER = "Quuxvellumtide"


def _extracting(req: FakeRequest) -> object:
    """The extractor keeps the cat's name, with search terms and situations that hold a word of
    their own (INDEX_MARKER); everything else answers as usual."""
    if req.kind == "structured" and MARKER in req.last_user_message:
        text = f"The user's cat is called {MARKER}."
        memory = {
            "text": text,
            "category": "personal",
            "replaces": None,
            "terms": ["cat", "貓", f"{INDEX_MARKER} food"],
            "situations": [f"{INDEX_MARKER} vet visits", "看獸醫"],
        }
        return {"memories": [memory]}
    return default_responder(req)


@pytest.fixture
def extracting(openai_server: FakeOpenAI) -> FakeOpenAI:
    """The test's fake OpenAI server, with the extractor above."""
    openai_server.responder = _extracting  # type: ignore[assignment]
    return openai_server


@pytest.fixture
def remembering(extracting: FakeOpenAI, tmp_path: Path) -> Iterator[tuple[ChatProcess, Path]]:
    """A running `memora chat` on its data dir that remembers two things of the learner: a
    preference saved with /remember (memory 1) and the cat's name, extracted (memory 2)."""
    data = tmp_path / "data"
    p = ChatProcess(memora_env(extracting, data))
    try:
        p.send("/remember I prefer short explanations with examples")
        p.wait_for("Saved: I prefer short explanations")
        p.send(f"My cat is called {MARKER} and I study English every night.")
        p.wait_for(f"Echo: My cat is called {MARKER}")
        p.send("memories")  # settles the after-reply extraction first
        p.wait_for(f"cat is called {MARKER}")
        yield p, data
    finally:
        p.kill9()


def test_forgetme_leaves_no_byte_of_the_learner_on_disk(
    remembering: tuple[ChatProcess, Path],
) -> None:
    p, data = remembering
    assert files_holding(data, MARKER), "the test must see the marker before deleting"
    assert files_holding(data, INDEX_MARKER), "and the words it was indexed by"
    p.send("/forgetme")
    p.wait_for("Delete everything I stored about you?")
    assert files_holding(data, MARKER), "asked first: nothing is deleted yet"
    p.send("yes")
    p.wait_for("Deleted everything I stored about you")
    assert files_holding(data, MARKER) == []  # the process is still running
    assert files_holding(data, INDEX_MARKER) == []
    p.send("memories")
    p.wait_for("I don't remember anything about you yet")
    p.kill9()
    assert files_holding(data, MARKER) == []


def test_forget_one_memory_removes_its_words_from_every_file(
    remembering: tuple[ChatProcess, Path],
) -> None:
    p, data = remembering
    p.send("/reset")  # the conversation that said it goes; the memory stays until /forget
    p.wait_for("Fresh start")
    assert files_holding(data, MARKER), "the memory (and its extraction log) hold it"
    assert files_holding(data, INDEX_MARKER), "its terms and situations too"
    p.send("/forget 2")
    p.wait_for("Forgotten for good: memory 2.")
    assert files_holding(data, MARKER) == []
    assert files_holding(data, INDEX_MARKER) == []
    p.send("memories")
    p.wait_for("1. I prefer short explanations")


async def test_a_store_that_persisted_every_write_is_switched_to_chromas_default(
    tmp_path: Path, embedder: Any
) -> None:
    """A data dir whose collection persists every write (an older Memora, or a process killed
    during an erasure) gets Chroma's default threshold on open, and a delete still leaves
    nothing in its files."""
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "chroma"
    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    old = client.get_or_create_collection(
        COLLECTION,
        configuration={"hnsw": {"space": "cosine", **ERASE_HNSW}},
        metadata={"embedder": embedder.name, "dim": embedder.dim},
        embedding_function=None,
    )
    assert old.configuration_json["hnsw"]["sync_threshold"] == 1
    client.close()
    store = await MemoryStore.create(path, embedder)
    try:
        assert _threshold(store) == CHROMA_HNSW["sync_threshold"] == 1000
        await store.writer.add(7, NewMemory(f"The user's cat is called {MARKER}.", "manual"))
        await store.writer.add(8, NewMemory("The user lives in Taichung.", "manual"))
        assert files_holding(path, MARKER)
        assert await store.delete_user(7) == 1
        assert files_holding(path, MARKER) == []
        assert [m.text for m in await store.memories(8)] == ["The user lives in Taichung."]
        assert _threshold(store) == 1000
    finally:
        await store.close()


def _threshold(store: MemoryStore) -> int:
    return int(store._col.configuration_json["hnsw"]["sync_threshold"])


def _log_rows(path: Path) -> int:
    con = sqlite3.connect(path / CHROMA_FILE)
    try:
        return int(con.execute("SELECT COUNT(*) FROM embeddings_queue").fetchone()[0])
    finally:
        con.close()


async def test_forget_flushes_chromas_log_while_other_learners_search(
    tmp_path: Path, embedder: Any
) -> None:
    """Writes stay in Chroma's log (cheap writes); deleting one memory flushes the log and
    leaves none of its words, while other learners' searches in flight still answer; every
    other memory survives the reopen and a restart."""
    path = tmp_path / "chroma"
    store = await MemoryStore.create(path, embedder)
    try:
        for topic in ("trains", "hotels", "cooking"):
            await store.writer.add(8, NewMemory(f"The user wants words about {topic}.", "manual"))
        cat = await store.writer.add(7, NewMemory(f"The user's cat is called {MARKER}.", "manual"))
        await store.writer.add(7, NewMemory("The user lives in Taichung.", "manual"))
        assert _log_rows(path) >= 5, "the writes wait in Chroma's log"
        assert files_holding(path, MARKER)
        store._cache.clear()  # the searches below read through Chroma while it is reopened
        searches = [
            store.searcher.search(8, f"words about {q}", top_k=3, min_score=0.0)
            for q in ("trains", "hotels", "cooking")
        ]
        deleted, *found = await asyncio.gather(store.delete(7, cat.memory.id), *searches)
        assert deleted is True
        assert [r.hits[0].memory.text for r in found] == [
            "The user wants words about trains.",
            "The user wants words about hotels.",
            "The user wants words about cooking.",
        ]
        assert files_holding(path, MARKER) == []
        assert _log_rows(path) <= 1  # only the delete, which carries no document
        assert _threshold(store) == 1000
        assert await store.delete(7, cat.memory.id) is False
        await store.writer.add(7, NewMemory("The user studies every night.", "manual"))
    finally:
        await store.close()
    async with MemoryStore(path, embedder) as again:  # a restart replays what the log holds
        assert sorted(m.text for m in await again.memories(7)) == [
            "The user lives in Taichung.",
            "The user studies every night.",
        ]
        assert len(await again.memories(8)) == 3


M_PERTURB = -6  # glibc's mallopt option (malloc.h)


@pytest.fixture
def perturbed_malloc() -> Iterator[bytes]:
    """glibc fills every block malloc hands out with one known byte (M_PERTURB; the smallest
    blocks, kept in its per-thread cache, aside): bytes a library writes to disk without
    initialising them become a run of that byte, where otherwise they are whatever this
    process freed there (a deleted memory's words, in about one run in six of this file)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("M_PERTURB is glibc's")
    libc = ctypes.CDLL(None)
    assert libc.mallopt(M_PERTURB, 0x2A) == 1
    try:
        yield bytes([0x2A ^ 0xFF]) * 64
    finally:
        libc.mallopt(M_PERTURB, 0)


def _holding_bytes(root: Path, run: bytes) -> list[str]:
    return [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*"))
        if p.is_file() and run in p.read_bytes()
    ]


@pytest.mark.parametrize("threshold", [1, 1000])
async def test_chromas_index_files_hold_no_uninitialised_memory(
    tmp_path: Path,
    embedder: Any,
    perturbed_malloc: bytes,
    threshold: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hnswlib writes its whole element array, unused slots included, when it creates an index
    (a collection's first write; the flush of an erasure when the writes had waited in
    Chroma's log); the array comes from malloc, uninitialised. The store zeroes those slots
    after each creation, at either write layout."""
    monkeypatch.setattr(backend_module, "CHROMA_HNSW", {"sync_threshold": threshold})
    path = tmp_path / "chroma"
    store = await MemoryStore.create(path, embedder)
    try:
        await store.writer.add(8, NewMemory("The user lives in Taichung.", "manual"))
        assert hnsw_indexes(path), "the first write creates Chroma's index"
        assert _holding_bytes(path, perturbed_malloc) == []
        cat = await store.writer.add(7, NewMemory(f"The user's cat is called {MARKER}.", "manual"))
        await store.writer.add(7, NewMemory("The user studies every night.", "manual"))
        assert await store.delete(7, cat.memory.id) is True
        assert files_holding(path, MARKER) == []
        assert _holding_bytes(path, perturbed_malloc) == []
    finally:
        await store.close()
    async with MemoryStore(path, embedder) as again:
        assert [m.text for m in await again.memories(7)] == ["The user studies every night."]
        assert _holding_bytes(path, perturbed_malloc) == []


def files_holding_vector(
    root: Path, vector: npt.NDArray[np.float32], *, width: int = 64
) -> list[str]:
    """Every file under root holding a run of `width` consecutive float32 values of the vector
    (any such run: a piece of it is enough) at any byte offset, to float32 rounding (hnswlib
    stores it normalised; the vectors here are unit length already)."""
    vector = np.asarray(vector, dtype=np.float32)
    hits = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if any(_holds_run(data, vector[at : at + width]) for at in range(0, len(vector), width)):
            hits.append(str(path.relative_to(root)))
    return hits


def _holds_run(data: bytes, run: npt.NDArray[np.float32]) -> bool:
    for offset in range(4):
        count = (len(data) - offset) // 4
        if count < len(run):
            continue
        values = np.frombuffer(data, dtype=np.float32, count=count, offset=offset)
        with np.errstate(invalid="ignore", over="ignore"):
            starts = np.flatnonzero(np.isclose(values[: len(values) - len(run) + 1], run[0]))
            for i in starts:
                if np.allclose(values[i : i + len(run)], run, rtol=1e-5, atol=1e-7):
                    return True
    return False


def _vectors(store: MemoryStore, ids: list[str]) -> list[npt.NDArray[np.float32]]:
    got = store._col.get(ids=ids, include=["embeddings"])
    by_id = dict(zip(got["ids"], got["embeddings"], strict=True))
    return [np.asarray(by_id[i], dtype=np.float32) for i in ids]


@pytest.mark.parametrize("threshold", [1, 1000])
async def test_a_deleted_memorys_vector_leaves_every_file(
    tmp_path: Path, embedder: Any, threshold: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hnswlib keeps a deleted element's slot, its vector included, marked deleted; Chroma's log
    (chroma.sqlite3) holds each write's vector until the index persists it. After /forget and
    /forgetme no file holds any piece of a deleted memory's embedding, also after later writes
    reuse or relink the deleted slots and another erasure persists them, and after a restart;
    Chroma's own nearest-neighbour search (a search for an uncached learner) still answers."""
    monkeypatch.setattr(backend_module, "CHROMA_HNSW", {"sync_threshold": threshold})
    monkeypatch.setattr(search_module, "WAIT_FOR_LOAD", 0)  # an uncached learner asks Chroma
    path = tmp_path / "chroma"
    store = await MemoryStore.create(path, embedder)
    try:
        for topic in ("trains", "hotels", "cooking", "museums"):
            await store.writer.add(8, NewMemory(f"The user wants words about {topic}.", "manual"))
        cat = await store.writer.add(7, NewMemory(f"The user's cat is called {MARKER}.", "manual"))
        job = await store.writer.add(
            7, NewMemory("The user works as a nurse in Kaohsiung.", "manual")
        )
        night = await store.writer.add(7, NewMemory("The user studies every night.", "manual"))
        ids = [cat.memory.id, job.memory.id, night.memory.id]
        deleted = _vectors(store, ids)
        kept = _vectors(store, [m.id for m in await store.memories(8)])
        assert all(files_holding_vector(path, v) for v in deleted + kept), "the test sees them"
        assert await store.delete(7, cat.memory.id) is True
        assert files_holding_vector(path, deleted[0]) == []
        assert files_holding_vector(path, deleted[1]), "an other memory's vector stays"
        assert await store.delete_user(7) == 2
        assert [files_holding_vector(path, v) for v in deleted] == [[], [], []]
        # A write takes one deleted slot and relinks its neighbours, the other deleted slots
        # among them: at a threshold of 1 it persists them at once.
        await store.writer.add(8, NewMemory("The user wants words about banks.", "manual"))
        assert [files_holding_vector(path, v) for v in deleted] == [[], [], []]
        hotels = await store.writer.add(
            8, NewMemory("The user wants words about hotels at night.", "manual")
        )
        assert await store.delete(8, hotels.memory.id) is True  # persists every dirty slot
        assert [files_holding_vector(path, v) for v in deleted] == [[], [], []]
        assert all(files_holding_vector(path, v) for v in kept)
        store._cache.clear()  # the next search asks Chroma's index (_nearest_sync)
        found = await store.searcher.search(8, "words about museums", top_k=1, min_score=0.0)
        assert [h.memory.text for h in found.hits] == ["The user wants words about museums."]
    finally:
        await store.close()
    async with MemoryStore(path, embedder) as again:
        assert await again.memories(7) == []
        assert len(await again.memories(8)) == 5
        assert [files_holding_vector(path, v) for v in deleted] == [[], [], []]


def test_scrubbing_refuses_an_index_layout_it_does_not_know(tmp_path: Path) -> None:
    """A header of another hnswlib version: nothing is zeroed on a guess, the erasure fails."""
    index = tmp_path / "segment"
    index.mkdir()
    (index / HNSW_HEADER).write_bytes(bytes([2, 0, 0, 0]) + bytes(48))
    (index / "data_level0.bin").write_bytes(b"x" * 100)
    for scrub in (scrub_hnsw, erase_deleted_vectors):
        with pytest.raises(RuntimeError, match="unknown hnswlib index layout"):
            scrub(tmp_path)
    assert (index / "data_level0.bin").read_bytes() == b"x" * 100
