"""Long-term memory: one Chroma collection, every read and write scoped to one user.

Layout. All memories live in ONE collection ("memories", cosine space) with a ``user_id``
metadata field; every Chroma call carries ``where={"user_id": ...}``. Measured on chromadb 1.5.9:
one collection of 10,000 memories with a filter is 23 MB and ~6 ms per query, against 371 MB for
per-user collections, and ``collection.delete(where={"user_id": ...})`` removes a user completely
in one call.

Scoring. Each user's memories are held in process (:mod:`memora.longterm.cache`) and ranked
exactly in numpy by ``memora.longterm.ranking.hybrid_rank`` (dense cosine fused with BM25
coverage), the one place where the final ranking happens. A user who is not in the cache yet is
loaded first when small (WAIT_FOR_LOAD), else answered from Chroma's filtered nearest neighbours
while the whole user loads in the background (COLD_CANDIDATES), so the first search after a
restart does not wait for every vector of a large user.

Duplicates. A new memory is a duplicate of an existing one when the normalised texts are equal,
or when a lexical guard finds nothing new in it and the dense cosine clears a threshold (see
:func:`memora.longterm.dedupe.relation`). When only the numbers differ ("level B1" → "level B2")
the new text supersedes the old one, which is kept in the memory's history. Only the memories
the guard could let through are compared (:class:`memora.longterm.dedupe.DedupeIndex`, kept
with the cached user like the lexical index), so a write does not compare with all of a user's
memories.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import aiorwlock
import numpy as np
import numpy.typing as npt

from memora.blocking import run_blocking
from memora.clock import utcnow
from memora.erase import (
    CHROMA_HNSW,
    ERASE_HNSW,
    erase_deleted_vectors,
    hnsw_elements,
    hnsw_indexes,
    scrub_hnsw,
    vacuum_chroma,
)
from memora.longterm.cache import Entry, UserCache, UserData, UserLocks
from memora.longterm.dedupe import (
    Relation,
    candidate_cosines,
    embedding_text,
    may_replace,
    normalise_text,
    relation,
    relation_floor,
)
from memora.longterm.embeddings import Embedder, Vectors
from memora.longterm.matrix import Matrix
from memora.longterm.profile import DedupeThresholds, profile_for
from memora.longterm.ranking import (
    Hit,
    Scores,
    context_can_matter,
    follow_up_rank,
    hybrid_scores,
    rank_scores,
    weights_for_query,
)
from memora.longterm.records import (
    MAX_SITUATIONS,
    AddResult,
    Memory,
    MemoryNotFound,
    NewMemory,
    SearchHit,
    SearchResult,
    SearchWords,
    Source,
    StoreError,
    check_user,
    clean_terms,
    clean_text,
    from_record,
    indexed,
    indexed_text,
    revised,
    to_metadata,
)
from memora.longterm.shared import SharedVersions, close_http_client, http_client

log = logging.getLogger(__name__)

__all__ = ["COLLECTION", "MemoryStore"]

COLLECTION = "memories"
RECENT_QUERIES = 256  # query vectors kept in memory (see MemoryStore._embed_queries)

# A search for a user who is not in the cache (after a restart, an eviction, or another
# replica's write) does not wait for all of the user's memories to load: it ranks the ones that
# Chroma's own filtered nearest-neighbour search returns, this many per query vector, while the
# whole user loads in the background for the next search. A user with no more memories than
# this gets exactly the ranking of a warm search (every memory is a candidate); a larger user
# gets the hybrid ranking of its dense nearest neighbours (a memory that shares the message's
# words but not its meaning can be missed by that one search). benchmarks/retrieval_overhead.py
# prints how often the first search's hits equal the warm search's.
COLD_CANDIDATES = 100

# ... unless the user is small enough to load before answering: then the first search waits
# for the load and ranks every memory, exactly as a warm search does. A cost bound, not a
# quality weight: loading and ranking 500 memories took 54 ms median (p95 59 ms) here, 1,000
# took 111-116 ms (p95 205-217 ms) and 2,000 took 223 ms (p95 290 ms)
# (benchmarks/retrieval_overhead.py, "load the whole user, then rank"), against the 200 ms the
# first search may take (issue 12).
WAIT_FOR_LOAD = 500

R = TypeVar("R")


def _when_unlocked(write: Callable[[], R], *, seconds: float = 10.0) -> R:
    """(blocking) A Chroma write, retried while SQLite answers "database is locked".

    A client that Chroma has just closed in this process lets go of its file in the
    background, and Chroma's SQLite does not wait for it: on the busy 2-core machine a write
    right after a close and reopen failed so twice in about a dozen tries. Only a reopen (an
    erasure, the switch of an old store's settings) needs this."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return write()
        except Exception as exc:
            if "database is locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


@functools.cache
def _blas() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """Numpy's BLAS on one thread for one user's matrix-vector products (10,000 × 512 at most).

    OpenBLAS otherwise splits them over every core and spins while it waits: on the shared
    2-core machine the ranking of 10,000 memories took 24 ms (8 ms of CPU) that way and 2.5 ms
    on one thread. Scoped, not process-wide: other code keeps its own settings."""
    return cast(contextlib.AbstractContextManager[Any], _blas().limit(limits=1, user_api="blas"))


class _Batch:
    """The user's memories while one `add_many` decides item by item (later items see earlier
    ones), and which entries changed. Each step derives the next snapshot incrementally
    (:meth:`UserData.appended`, :meth:`UserData.replaced`): no step copies or re-reads all of
    the user's memories."""

    def __init__(self, data: UserData, thresholds: DedupeThresholds | None) -> None:
        self.data = data
        self.thresholds = thresholds
        self.next_seq = data.next_seq
        self.changed: dict[str, int] = {}  # memory id → index in entries

    @property
    def entries(self) -> tuple[Entry, ...]:
        return self.data.entries

    @property
    def matrix(self) -> Matrix:
        return self.data.matrix

    def index_of(self, memory_id: str | None) -> int | None:
        return None if memory_id is None else self.data.position(memory_id)

    def key(self, i: int) -> str:
        return normalise_text(self.entries[i].memory.text)

    def closest(self, text: str, vec: npt.NDArray[np.float32]) -> tuple[int | None, int | None]:
        """(index of a duplicate, index of a memory to update), closest first."""
        same = self.data.keys.get(normalise_text(text))
        t = self.thresholds
        if same is not None or not self.entries or t is None:
            return same, None
        candidates = self.data.dedupe.candidates(text)  # the others are DISTINCT at any cosine
        if not len(candidates):
            return None, None
        floor = relation_floor(text, t)
        cosines = candidate_cosines(self.matrix, candidates, vec, floor, t)
        near = np.flatnonzero(cosines >= floor)
        update: int | None = None
        for j in near[np.argsort(-cosines[near], kind="stable")]:
            i = int(candidates[j])
            verdict = relation(text, self.entries[i].memory.text, float(cosines[j]), t)
            if verdict is Relation.DUPLICATE:
                return i, None
            if verdict is Relation.UPDATE and update is None:
                update = i
        return None, update

    def put(self, i: int, memory: Memory, vec: npt.NDArray[np.float32]) -> None:
        """Replace entry i by a new version of its memory."""
        self.data = self.data.replaced(i, Entry(memory, self.entries[i].seq, vec))
        self.changed[memory.id] = i

    def append(self, memory: Memory, vec: npt.NDArray[np.float32]) -> None:
        self.data = self.data.appended(Entry(memory, self.next_seq, vec))
        self.next_seq += 1
        self.changed[memory.id] = len(self.entries) - 1

    def written(self) -> list[Entry]:
        return [self.entries[i] for i in self.changed.values()]


class MemoryStore:
    """Each user's long-term memories in one persistent Chroma collection.

    Every public method takes the user id first; there is no way to search or list without one.
    Writes for one user are serialised by a per-user asyncio lock; all Chroma calls leave the
    event loop through :func:`run_blocking`, sharing the client (:meth:`_chroma`) except a
    deletion's, which has it alone while it reopens it (:meth:`_erase`).
    """

    def __init__(
        self, path: Path, embedder: Embedder, *, max_cached_users: int = 256, url: str = ""
    ) -> None:
        self.path = Path(path)
        self.url = url  # a Chroma server shared by replicas (memora.longterm.shared); "" = embedded
        self.embedder = embedder
        self._shared: SharedVersions | None = None
        self._loaded_at: dict[int, str] = {}  # user → the version its cached memories are
        self.profile = profile_for(embedder.name)  # its calibrated numbers, if any
        self._client: Any = None
        self._collection: Any = None
        self._locks = UserLocks()
        self._cache = UserCache(max_cached_users)
        # user → ((version, generation) it loads under, the load); see _load
        self._loads: dict[int, tuple[tuple[str, int], asyncio.Task[UserData]]] = {}
        self._queries: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()  # _embed_queries
        self._gate: aiorwlock.RWLock | None = None  # made in open(): it binds to the event loop
        self._scrub_due = True  # Chroma may (re)create its index: see _scrub

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    async def create(cls, path: Path, embedder: Embedder) -> MemoryStore:
        store = cls(path, embedder)
        await store.open()
        return store

    async def __aenter__(self) -> MemoryStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _open_sync(self, *, upgrade: bool = True) -> tuple[Any, Any]:
        import chromadb
        from chromadb.config import Settings

        if self.url:
            client: Any = http_client(self.url)
            upgrade = False  # the server's own settings; nothing of ours to upgrade
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            client = chromadb.PersistentClient(
                path=str(self.path), settings=Settings(anonymized_telemetry=False)
            )
        try:
            collection = client.get_or_create_collection(
                COLLECTION,
                configuration={"hnsw": {"space": "cosine", **CHROMA_HNSW}},
                metadata={"embedder": self.embedder.name, "dim": self.embedder.dim},
                embedding_function=None,  # we always pass our own vectors: never download one
            )
            hnsw = (collection.configuration_json or {}).get("hnsw") or {}
            if upgrade and hnsw.get("sync_threshold") != CHROMA_HNSW["sync_threshold"]:
                # A store made by a Memora that persisted every write, or left by a process
                # that died during an erasure: switch it, then reopen (the running segment
                # keeps the settings it was opened with).
                _when_unlocked(lambda: collection.modify(configuration={"hnsw": dict(CHROMA_HNSW)}))
                client.close()
                return self._open_sync(upgrade=False)
            meta = collection.metadata or {}
            if meta.get("embedder", self.embedder.name) != self.embedder.name or int(
                meta.get("dim", self.embedder.dim)
            ) != int(self.embedder.dim):
                raise StoreError(
                    f"the memories under {self.path} were embedded with {meta.get('embedder')}"
                    f" ({meta.get('dim')} dimensions), not {self.embedder.name}"
                    f" ({self.embedder.dim}): use that embedder or a new data directory"
                )
        except BaseException:
            client.close()
            raise
        return client, collection

    async def open(self) -> None:
        if self._client is None:
            self._gate = aiorwlock.RWLock()
            if not self.url:  # before Chroma loads the index: see _reopen
                await run_blocking(erase_deleted_vectors, self.path)
            self._client, self._collection = await run_blocking(self._open_sync)
            if self.url:
                self._shared = await run_blocking(SharedVersions, self._client)
            else:  # Chroma loads the collection's segments on the first call: at start, not
                # in the first learner's search (benchmarks/retrieval_overhead.py, "open")
                await run_blocking(self._collection.count)
                await run_blocking(self._scrub)

    async def close(self) -> None:
        loads = [task for _, task in self._loads.values()]
        self._loads.clear()
        await asyncio.gather(*loads, return_exceptions=True)  # they read through the client
        if self._gate is not None:
            async with self._gate.writer:  # an erasure in flight reopens the client: let it end
                self._gate = None
        client, self._client, self._collection = self._client, None, None
        self._shared = None
        self._loaded_at.clear()
        self._cache.clear()
        self._queries.clear()
        if client is not None:
            if self.url:
                await run_blocking(close_http_client, client)
            else:
                await run_blocking(client.close)

    @property
    def _col(self) -> Any:
        if self._collection is None:
            raise StoreError("the memory store is not open")
        return self._collection

    @property
    def _lock(self) -> aiorwlock.RWLock:
        if self._gate is None:
            raise StoreError("the memory store is not open")
        return self._gate

    async def _chroma(self, fn: Callable[..., R], /, *args: Any) -> R:
        """A blocking call on the Chroma client, which an erasure may not reopen meanwhile."""
        async with self._lock.reader:
            return await run_blocking(fn, *args)

    async def _erase(self, delete: Callable[[], R]) -> R:
        """Run a Chroma deletion so that its words leave the files by the time it returns.

        Embedded: alone on the client (calls in flight finish first, new ones wait), between a
        flush of Chroma's log and a vacuum (:meth:`_erasing`). On a server the server's own
        settings hold: the deletion alone."""
        if self.url:
            return await self._chroma(delete)
        async with self._lock.writer:
            return await run_blocking(self._erasing, delete)

    def _erasing(self, delete: Callable[[], R]) -> R:
        """(blocking) Chroma keeps each write in its log until its index persists (see
        memora.erase): reopened with a threshold of 1, the index persists what the log holds
        and Chroma purges it; the delete is persisted and purged at once, the file vacuumed;
        then the client is reopened with writes back at their threshold, the deleted vectors
        zeroed in between (:meth:`_reopen`), and the index files scrubbed (:meth:`_scrub`).
        When writes already persist at the erasure's threshold, nothing waits in the log: the
        first reopen is skipped."""
        if CHROMA_HNSW != ERASE_HNSW:
            self._reopen(ERASE_HNSW)
        try:
            result = _when_unlocked(delete)
            vacuum_chroma(self.path)
        finally:
            self._reopen(CHROMA_HNSW)
            # The next writer must not meet the file still held by the client just closed.
            _when_unlocked(lambda: self._col.modify(configuration={"hnsw": dict(CHROMA_HNSW)}))
        self._col.count()  # the segment loads on the first call after a reopen
        self._scrub()  # the flush created the index anew if it had never persisted an element
        return result

    def _reopen(self, hnsw: dict[str, int]) -> None:
        """(blocking) Set the collection's HNSW settings and reopen the client, the only way
        they reach the running index (Chroma loads a segment's settings when it opens it).
        Between the two, with no index loaded, the vectors of deleted elements are zeroed in
        its files (memora.erase.erase_deleted_vectors): hnswlib keeps them in their slots; a
        loaded index would keep them in memory and write them again whenever it persisted one
        of those elements."""
        _when_unlocked(lambda: self._col.modify(configuration={"hnsw": dict(hnsw)}))
        client, self._client, self._collection = self._client, None, None
        client.close()
        erase_deleted_vectors(self.path)
        self._client, self._collection = self._open_sync(upgrade=False)
        self._scrub_due = True

    def _scrub(self) -> None:
        """(blocking, alone on the client, its segment loaded) Zero the unused slots of Chroma's
        index files: hnswlib writes them from memory it never initialised when it creates the
        index, at a collection's first write or when a client loads an index that never
        persisted an element (memora.erase.scrub_hnsw). Once an index holding elements is
        loaded and scrubbed, later writes cannot bring such bytes back: until then, every
        write checks (:meth:`_scrub_created`)."""
        if self.url:
            return
        scrub_hnsw(self.path)
        self._scrub_due = hnsw_elements(self.path) == 0

    async def _scrub_created(self) -> None:
        """After a write: scrub an index that the write may have created."""
        if self._scrub_due and not self.url and hnsw_indexes(self.path):
            async with self._lock.writer:
                await run_blocking(self._scrub)

    # -- cache -------------------------------------------------------------------------------
    def _load_sync(self, user_id: int) -> UserData:
        got = self._col.get(
            where={"user_id": user_id}, include=["documents", "metadatas", "embeddings"]
        )
        data = self._user_data(
            got["ids"], got["documents"], got["metadatas"], got["embeddings"], room=True
        )
        # Indexed here, off the event loop, not by the next search or write (the dense weights
        # too: the first warm search built them on the loop, benchmarks/retrieval_overhead.py).
        data.bm25, data.keys, data.dedupe, data.weight_kinds  # noqa: B018
        return data

    def _user_data(
        self,
        ids: Sequence[str],
        docs: Sequence[Any],
        metas: Sequence[Any],
        embeddings: Any,
        *,
        room: bool = False,
    ) -> UserData:
        """Chroma records as a user's snapshot: oldest first, vectors normalised; with `room`,
        spare rows behind the matrix for the writes to append to (UserData.with_room)."""
        if not ids:
            return UserData((), np.zeros((0, self.embedder.dim), dtype=np.float32))
        vectors = np.asarray(embeddings, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        vectors = vectors / norms
        rows = []
        for i, (memory_id, doc, meta) in enumerate(zip(ids, docs, metas, strict=True)):
            memory, seq = from_record(memory_id, str(doc or ""), dict(meta or {}))
            rows.append((seq, memory.created_at, memory.id, memory, i))
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        # One matrix in the user's order; each entry's vector is a view of its row (a view of
        # the unordered array would keep that one alive too: the vectors held twice).
        ordered = np.ascontiguousarray(vectors[[i for *_, i in rows]])
        entries = tuple(Entry(m, seq, ordered[j]) for j, (seq, _, _, m, _) in enumerate(rows))
        if room:
            return UserData.with_room(entries, ordered)
        return UserData(entries, ordered)

    async def _version(self, user_id: int) -> str:
        if self._shared is None:
            return ""
        # Another replica may have written: one cheap check.
        return await run_blocking(self._shared.current, user_id)

    def _cached(self, user_id: int, version: str) -> UserData | None:
        cached = self._cache.get(user_id)
        if cached is not None and self._loaded_at.get(user_id, "") == version:
            return cached
        return None

    async def _data(self, user_id: int) -> UserData:
        version = await self._version(user_id)
        cached = self._cached(user_id, version)
        if cached is not None:
            return cached
        return await asyncio.shield(self._load(user_id, version))

    def _load(self, user_id: int, version: str) -> asyncio.Task[UserData]:
        """The load of the user's memories into the cache: one at a time per user and state
        (a cold search starts it and answers without waiting; later reads join it)."""
        state = (version, self._cache.generation(user_id))
        running = self._loads.get(user_id)
        if running is not None and running[0] == state:
            return running[1]
        task = asyncio.ensure_future(self._load_now(user_id, *state))
        self._loads[user_id] = (state, task)
        task.add_done_callback(functools.partial(self._loaded, user_id))
        return task

    async def _load_now(self, user_id: int, version: str, generation: int) -> UserData:
        data = await self._chroma(self._load_sync, user_id)
        # A write that finished while we were loading makes what we read stale: don't keep it.
        self._keep(user_id, data, generation=generation)
        if self._cache.get(user_id) is data:
            self._loaded_at[user_id] = version
        return data

    def _loaded(self, user_id: int, task: asyncio.Task[UserData]) -> None:
        running = self._loads.get(user_id)
        if running is not None and running[1] is task:
            del self._loads[user_id]
        if not task.cancelled() and task.exception() is not None:  # retrieved: no warning
            log.warning("loading a user's memories failed: %r", task.exception())

    async def _changed(self, user_id: int, *, gone: bool = False) -> None:
        """After a write: on a shared server, tell the other replicas (see longterm.shared)."""
        if self._shared is not None:
            await run_blocking(self._shared.forget if gone else self._shared.bump, user_id)

    def _keep(self, user_id: int, data: UserData, *, generation: int | None = None) -> None:
        if self._collection is not None:  # a closed store caches nothing
            self._cache.keep(user_id, data, generation=generation)

    async def _embed(
        self, texts: list[str], kind: Literal["query", "passage"]
    ) -> tuple[Vectors, int]:
        if kind == "query":
            return await self._embed_queries(texts)
        emb = await self.embedder.embed([embedding_text(t) for t in texts], kind=kind)
        return np.asarray(emb.vectors, dtype=np.float32), int(emb.tokens)

    async def _embed_queries(self, texts: list[str]) -> tuple[Vectors, int]:
        """Query vectors, the recent ones from memory: a turn's extraction looks up the very
        message its reply searched with a moment before, and embedding it again cost a quarter
        of a turn's embedding work. Tokens count only what was embedded now."""
        known = {t: self._queries[t] for t in texts if t in self._queries}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        tokens = 0
        if missing:
            emb = await self.embedder.embed(missing, kind="query")
            known.update(zip(missing, np.asarray(emb.vectors, dtype=np.float32), strict=True))
            tokens = int(emb.tokens)
        for text in texts:
            self._queries[text] = known[text]
            self._queries.move_to_end(text)
        while len(self._queries) > RECENT_QUERIES:
            self._queries.popitem(last=False)
        return np.stack([known[t] for t in texts]), tokens

    def _upsert_sync(self, entries: Sequence[Entry]) -> None:
        self._col.upsert(
            ids=[e.memory.id for e in entries],
            embeddings=np.stack([e.vector for e in entries]),
            documents=[e.memory.text for e in entries],
            metadatas=[to_metadata(e.memory, e.seq) for e in entries],
        )

    async def _write(self, user_id: int, entries: Sequence[Entry], after: UserData) -> None:
        """Upsert the changed memories, then cache the user's data as it now is (write-through:
        the next search does not reload the user). Any failure drops the cache instead."""
        try:
            if entries:
                await self._chroma(self._upsert_sync, entries)
                await self._scrub_created()
                await self._changed(user_id)
        finally:
            self._cache.invalidate(user_id)  # also makes a load that raced with this write stale
        if self._shared is not None:
            return  # another replica may have written too: the next read loads the server's
        if "bm25" not in after.__dict__:  # else carried by the write: nothing to build
            # Writes happen after the reply: build the lexical index now, not on the next search.
            await run_blocking(lambda: after.bm25)
        self._keep(user_id, after)

    async def _rewrite(self, user_id: int, data: UserData, entry: Entry, memory: Memory) -> None:
        """Store a new version of one memory (a new text, so a new vector)."""
        vectors, _ = await self._embed([indexed(memory)], "passage")
        new_entry = Entry(memory, entry.seq, vectors[0])
        await self._write(user_id, [new_entry], data.with_entry(new_entry))

    # -- writes ------------------------------------------------------------------------------
    async def add(
        self,
        user_id: int,
        text: str,
        *,
        source: Source,
        category: str = "other",
        chat_id: int | None = None,
        message_id: int | None = None,
        now: datetime | None = None,
    ) -> AddResult:
        """Store one memory unless the user already has it (see :meth:`add_many`)."""
        item = NewMemory(text, source, category, chat_id, message_id)
        return (await self.add_many(user_id, [item], now=now))[0]

    async def add_many(
        self, user_id: int, items: Sequence[NewMemory], *, now: datetime | None = None
    ) -> list[AddResult]:
        """Store several memories with one embedding call and one Chroma write.

        An item whose `replaces` names one of the user's memories supersedes it. Any other item
        is compared with the user's memories (and the items before it, see
        :func:`~memora.longterm.dedupe.relation`): a duplicate is not stored; the same fact
        with other numbers supersedes the older memory; anything else is added.
        """
        check_user(user_id)
        if not items:
            return []
        texts = [clean_text(it.text) for it in items]
        stamp = utcnow(now)
        async with self._locks.hold(user_id):
            data = await self._data(user_id)
            if not {"keys", "dedupe"} <= data.__dict__.keys():  # built by the load, then
                await run_blocking(lambda: (data.keys, data.dedupe))  # carried by each write
            batch = _Batch(data, self.profile.dedupe)
            words = [
                indexed_text(t, it.terms, it.situations) for t, it in zip(texts, items, strict=True)
            ]
            vectors, tokens = await self._embed(words, "passage")
            with one_blas_thread():
                results = [
                    self._add_one(
                        user_id, batch, item, text, vectors[n], stamp, tokens if n == 0 else 0
                    )
                    for n, (item, text) in enumerate(zip(items, texts, strict=True))
                ]
            await self._write(user_id, batch.written(), batch.data)
        return results

    @staticmethod
    def _add_one(
        user_id: int,
        batch: _Batch,
        item: NewMemory,
        text: str,
        vec: npt.NDArray[np.float32],
        stamp: str,
        tokens: int,
    ) -> AddResult:
        """Decide one item of a batch against the memories so far, and apply it to the batch."""
        target = batch.index_of(item.replaces)
        if target is not None:
            cosine = float(batch.matrix.row(target) @ vec)
            old_text = batch.entries[target].memory.text
            if not may_replace(text, old_text, cosine, batch.thresholds):
                log.info("ignored a `replaces` that points at an unrelated memory")
                target = None  # decided like any new item: added, or a duplicate
        explicit = target is not None
        if target is None:
            dup, target = batch.closest(text, vec)
            if dup is not None:
                return AddResult("duplicate", batch.entries[dup].memory, None, tokens)
        elif normalise_text(text) == batch.key(target):
            return AddResult("duplicate", batch.entries[target].memory, None, tokens)
        if target is not None:
            old = batch.entries[target].memory
            keep_category = not explicit and old.category != "other"
            memory = revised(
                old,
                text,
                stamp,
                "updated",
                source=item.source,
                category=old.category if keep_category else item.category,
                chat_id=item.chat_id if item.chat_id is not None else old.chat_id,
                message_id=item.message_id if item.message_id is not None else old.message_id,
                terms=item.terms,
                situations=item.situations,
            )
            batch.put(target, memory, vec)
            return AddResult("superseded", memory, old, tokens)
        memory = Memory(
            id=str(uuid.uuid4()),
            user_id=user_id,
            text=text,
            source=item.source,
            category=item.category,
            created_at=stamp,
            updated_at=stamp,
            chat_id=item.chat_id,
            message_id=item.message_id,
            terms=item.terms,
            situations=item.situations,
        )
        batch.append(memory, vec)
        return AddResult("added", memory, None, tokens)

    async def supersede(
        self,
        user_id: int,
        memory_id: str,
        new_text: str,
        *,
        reason: str = "updated",
        category: str | None = None,
        chat_id: int | None = None,
        message_id: int | None = None,
        now: datetime | None = None,
    ) -> Memory:
        """Replace a memory's text, keeping the old text in its history. Raises MemoryNotFound."""
        check_user(user_id)
        text = clean_text(new_text)
        stamp = utcnow(now)
        async with self._locks.hold(user_id):
            data = await self._data(user_id)
            entry = data.find(memory_id)
            if entry is None:
                raise MemoryNotFound(memory_id)
            old = entry.memory
            if normalise_text(text) == normalise_text(old.text) and category in (
                None,
                old.category,
            ):
                return old
            memory = revised(
                old,
                text,
                stamp,
                reason,
                category=category or old.category,
                chat_id=chat_id if chat_id is not None else old.chat_id,
                message_id=message_id if message_id is not None else old.message_id,
                terms=(),  # the old terms and situations described the old text
                situations=(),
            )
            await self._rewrite(user_id, data, entry, memory)
            return memory

    async def revert(
        self, user_id: int, memory_id: str, *, now: datetime | None = None
    ) -> Memory | None:
        """Undo the last change: the last text in the history comes back.

        The text being replaced goes to the history (reason "reverted"), so nothing is lost and
        a second revert undoes the first. None if there is no such memory or nothing to undo.
        """
        check_user(user_id)
        stamp = utcnow(now)
        async with self._locks.hold(user_id):
            data = await self._data(user_id)
            entry = data.find(memory_id)
            if entry is None or not entry.memory.history:
                return None
            old = entry.memory
            memory = revised(
                old,
                old.history[-1].text,
                stamp,
                "reverted",
                history=old.history[:-1],
                terms=(),
                situations=(),
            )
            await self._rewrite(user_id, data, entry, memory)
            return memory

    async def add_terms(
        self, user_id: int, terms: Mapping[str, tuple[str, SearchWords]]
    ) -> tuple[list[Memory], int]:
        """Give memories that lack search terms or situations those written for them (the
        extraction call's backfill: a /remember fact, a memory older than terms or situations,
        or one whose update dropped its old ones). `terms` maps a memory id to (the text they
        were written for, the words). Each of the two is filled only where the memory has none
        (terms it has stay). Skipped: a memory of another user or gone, one whose text changed
        since (the words described the old text), one that has both already, words that fill
        nothing. The updated memories are re-indexed like any write (one embedding call, one
        upsert); their text and `updated_at` stay. Returns them and the embedding tokens
        spent."""
        check_user(user_id)
        async with self._locks.hold(user_id):
            data = await self._data(user_id)
            todo: list[tuple[Entry, Memory]] = []
            for memory_id, (text, words) in terms.items():
                entry = data.find(memory_id)
                if entry is None or entry.memory.text != text:
                    continue
                old = entry.memory
                filled = replace(
                    old,
                    terms=old.terms or clean_terms(words.terms),
                    situations=old.situations or clean_terms(words.situations, MAX_SITUATIONS),
                )
                if filled != old:
                    todo.append((entry, filled))
            if not todo:
                return [], 0
            texts = [indexed(m) for _, m in todo]
            vectors, tokens = await self._embed(texts, "passage")
            written = [Entry(m, e.seq, v) for (e, m), v in zip(todo, vectors, strict=True)]
            after = data
            for new in written:
                after = after.with_entry(new)
            await self._write(user_id, written, after)
        return [m for _, m in todo], tokens

    async def delete(self, user_id: int, memory_id: str) -> bool:
        """Delete one of the user's memories; False if the user has no memory with that id."""
        check_user(user_id)
        where = {"user_id": user_id}

        def _found() -> bool:
            return bool(self._col.get(ids=[memory_id], where=where, include=[])["ids"])

        async with self._locks.hold(user_id):  # no other write of this user meanwhile
            if not await self._chroma(_found):
                return False
            cached = self._cache.get(user_id)  # current: every write of this user holds the lock
            try:
                await self._erase(lambda: self._col.delete(ids=[memory_id], where=where))
                await self._changed(user_id)
            finally:
                self._cache.invalidate(user_id)
            if cached is not None and self._shared is None:
                # Off the event loop: the indexes shift every later memory's position (about
                # 50 ms for 10,000 memories at a load of 4).
                self._keep(user_id, await run_blocking(cached.without, memory_id))
            return True

    async def delete_user(self, user_id: int) -> int:
        """Delete every memory of the user (one filtered delete); returns how many there were."""
        check_user(user_id)
        where = {"user_id": user_id}

        def _delete_all() -> int:
            n = len(self._col.get(where=where, include=[])["ids"])
            self._col.delete(where=where)
            return n

        async with self._locks.hold(user_id):
            try:
                n = await self._erase(_delete_all)
                await self._changed(user_id, gone=True)
                return n
            finally:
                self._cache.invalidate(user_id)
                self._queries.clear()  # recent messages (the keys) are not kept past /forgetme

    # -- reads -------------------------------------------------------------------------------
    async def memories(self, user_id: int, *, origin_chat: int | None = None) -> list[Memory]:
        """The user's memories, oldest first (a stable numbering for /memories and /forget n);
        with `origin_chat`, only those that came from that chat."""
        check_user(user_id)
        data = await self._data(user_id)
        if origin_chat is not None:
            data = data.from_chat(origin_chat)
        return [e.memory for e in data.entries]

    async def get(self, user_id: int, memory_id: str) -> Memory | None:
        check_user(user_id)
        entry = (await self._data(user_id)).find(memory_id)
        return entry.memory if entry else None

    async def count(self, user_id: int) -> int:
        check_user(user_id)
        cached = self._cache.get(user_id) if self._shared is None else None
        if cached is not None:
            return len(cached.entries)
        return await self._chroma(self._held_sync, user_id)

    async def search(
        self,
        user_id: int,
        query: str,
        *,
        top_k: int,
        min_score: float,
        extra_context: str | None = None,
        origin_chat: int | None = None,
        floor: float | None = None,
    ) -> SearchResult:
        """The user's memories most relevant to the query, best first, score >= min_score.

        With `extra_context` (the learner's previous message), the message is also ranked
        together with that context, for a follow-up ("那如果他們要去火車站呢"): what the message
        finds by itself at `floor` (default `min_score`; give the no-result threshold when
        `min_score` is lower) comes first, then what only the context finds
        (ranking.follow_up_rank), so a change of topic keeps its own memories first. With
        `origin_chat`, only memories that came from that chat are candidates (a group's replies
        use what the member said in that group).
        """
        check_user(user_id)
        query = " ".join(query.split())
        if not query or top_k <= 0:
            return SearchResult([], 0)
        version = await self._version(user_id)
        data = self._cached(user_id, version)
        where = self._where(user_id, origin_chat)
        if data is None:  # not in the cache
            anything, data = await self._uncached(user_id, version, where)
            if not anything:
                return SearchResult([], 0)
        if data is not None:
            data = data.from_chat(origin_chat) if origin_chat is not None else data
            if not data.entries:
                return SearchResult([], 0)
        context = " ".join((extra_context or "").split())
        joined = f"{context}\n{query}" if context else ""
        # A follow-up's context is embedded with the message in one call when the search is
        # cold (Chroma's candidates come from both vectors), each call is a round trip to a
        # service, or the user has fewer memories than top_k (then it always can matter);
        # else only if the message's own hits leave room for it (context_can_matter).
        later = (
            bool(joined)
            and data is not None
            and len(data.entries) >= top_k
            and getattr(self.embedder, "local", False)
        )
        variants = [query] if not joined or later else [query, joined]
        qvecs, tokens = await self._embed(variants, "query")
        if data is None:  # answer from Chroma, then load the user for the next search
            data = await self._candidates(self._loads.get(user_id), where, qvecs, origin_chat)
            self._load(user_id, version)
        if not joined:
            found = self._rank(data, query, qvecs[0], top_k, min_score)
        else:
            edge = min_score if floor is None else floor
            with one_blas_thread():
                message = self._scores(data, query, qvecs[0])
            if not context_can_matter(message, edge, top_k):
                together = message  # the context cannot change the hits (follow_up_rank)
            else:
                if later:
                    more, spent = await self._embed([joined], "query")
                    context_vec, tokens = more[0], tokens + spent
                else:
                    context_vec = qvecs[1]
                with one_blas_thread():
                    together = self._scores(data, joined, context_vec)
            found = follow_up_rank(message, together, edge, top_k, min_score)
        hits = [SearchHit(data.entries[h.index].memory, h.score) for h in found]
        return SearchResult(hits, tokens)

    @staticmethod
    def _where(user_id: int, origin_chat: int | None) -> dict[str, Any]:
        if origin_chat is None:
            return {"user_id": user_id}
        return {"$and": [{"user_id": user_id}, {"chat_id": origin_chat}]}

    async def _uncached(
        self, user_id: int, version: str, where: dict[str, Any]
    ) -> tuple[bool, UserData | None]:
        """For a search of a user who is not in the cache: whether Chroma holds anything it
        could find (in `where`), and the whole user when it is small enough to load first
        (WAIT_FOR_LOAD; None: rank Chroma's nearest neighbours while the load runs on)."""
        held = await self._chroma(self._held_sync, user_id, WAIT_FOR_LOAD + 1)
        if 0 < held <= WAIT_FOR_LOAD:
            with contextlib.suppress(Exception):  # a failed load is logged (_loaded)
                # shielded: a search given up on leaves the load to the next read
                return True, await asyncio.shield(self._load(user_id, version))
        if not held or ("$and" in where and not await self._chroma(self._any_sync, where)):
            self._load(user_id, version)  # in the background, for the next read
            return False, None
        return True, None

    def _held_sync(self, user_id: int, limit: int | None = None) -> int:
        """How many memories the user has (counted up to `limit`, if given)."""
        got = self._col.get(where={"user_id": user_id}, limit=limit, include=[])
        return len(got["ids"])

    async def _candidates(
        self,
        running: tuple[tuple[str, int], asyncio.Task[UserData]] | None,
        where: dict[str, Any],
        qvecs: Vectors,
        origin_chat: int | None,
    ) -> UserData:
        """What a search ranks when the user was not cached: all of the user's memories if a
        load has just finished, else Chroma's nearest neighbours. (The load starts after this
        search's own Chroma query: both at once made the first search wait for the load.)"""
        loading = running[1] if running is not None else None
        if loading is not None and loading.done() and not loading.cancelled():
            if loading.exception() is None:
                data = loading.result()
                return data.from_chat(origin_chat) if origin_chat is not None else data
        return await self._chroma(self._nearest_sync, where, qvecs)

    def _any_sync(self, where: dict[str, Any]) -> bool:
        return bool(self._col.get(where=where, limit=1, include=[])["ids"])

    def _nearest_sync(self, where: dict[str, Any], qvecs: Vectors) -> UserData:
        """The user's memories nearest to each query vector by Chroma's own filtered search
        (COLD_CANDIDATES per vector) as a snapshot, for the hybrid ranking to order."""
        got = self._col.query(
            query_embeddings=qvecs,
            n_results=COLD_CANDIDATES,
            where=where,
            include=["documents", "metadatas", "embeddings"],
        )
        found: dict[str, tuple[Any, Any, Any]] = {}
        for ids, docs, metas, vecs in zip(
            got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
        ):
            for record in zip(ids, docs, metas, vecs, strict=True):
                found.setdefault(record[0], record[1:])
        docs_, metas_, vecs_ = zip(*found.values(), strict=True) if found else ((), (), ())
        return self._user_data(list(found), docs_, metas_, list(vecs_))

    async def similar(self, user_id: int, text: str, k: int = 5) -> list[Memory]:
        """The user's k memories closest to a text, best first, with no threshold: the memories
        a new fact may repeat or update (context for the extractor)."""
        check_user(user_id)
        text = " ".join(text.split())
        data = await self._data(user_id)
        if not text or not data.entries or k <= 0:
            return []
        qvecs, _ = await self._embed([text], "query")
        hits = self._rank(data, text, qvecs[0], k, float("-inf"))
        return [data.entries[h.index].memory for h in hits]

    def _scores(self, data: UserData, query: str, qvec: npt.NDArray[np.float32]) -> Scores:
        """Every candidate's fused score for one query (the caller holds one BLAS thread)."""
        return hybrid_scores(
            qvec,
            data.matrix,
            query,
            data.texts,
            dense_weight=weights_for_query(data.weight_kinds, query, self.profile),
            scale=self.profile.scale,
            lexical_gate=self.profile.lexical_gate,
            index=data.bm25,
        )

    def _rank(
        self,
        data: UserData,
        query: str,
        qvec: npt.NDArray[np.float32],
        top_k: int,
        min_score: float,
    ) -> list[Hit]:
        """The user's memories ranked for one query (the one ranking: ``hybrid_rank``'s)."""
        with one_blas_thread():
            return rank_scores(self._scores(data, query, qvec), top_k, min_score)
