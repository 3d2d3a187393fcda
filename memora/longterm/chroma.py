"""The memory store's Chroma side: the client's lifecycle, its queries, and erasure.

All memories live in ONE collection ("memories", cosine space) with a ``user_id`` metadata
field; every call carries ``where={"user_id": ...}`` (decision 0102). Every blocking call leaves
the event loop through :func:`memora.blocking.run_blocking` and shares the client, except a
deletion's, which has it alone while it reopens it so that deleted words leave the files
(:mod:`memora.storage.file_erasure`). With a Chroma server (``url``) the server's settings hold,
and a version token per user tells replicas when another one wrote
(:mod:`memora.longterm.chroma_server`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiorwlock
import numpy as np

from memora.blocking import run_blocking
from memora.longterm.chroma_server import SharedVersions, close_http_client, http_client
from memora.longterm.memories import StoreError, to_metadata
from memora.longterm.snapshot import Entry
from memora.storage.file_erasure import (
    CHROMA_HNSW,
    ERASE_HNSW,
    erase_deleted_vectors,
    hnsw_elements,
    hnsw_indexes,
    scrub_hnsw,
    vacuum_chroma,
)

__all__ = ["COLLECTION", "ChromaBackend", "Records", "when_unlocked"]

COLLECTION = "memories"
R = TypeVar("R")
Records = tuple[Sequence[str], Sequence[Any], Sequence[Any], Any]  # ids, docs, metas, vectors


def when_unlocked(write: Callable[[], R], *, seconds: float = 10.0) -> R:
    """(blocking) A Chroma write, retried while SQLite answers "database is locked": a client
    Chroma has just closed in this process lets go of its file in the background (an erasure's
    reopen, the switch of an old store's settings)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return write()
        except Exception as exc:
            if "database is locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class ChromaBackend:
    """The collection of every user's memories, embedded (``path``) or on a server (``url``)."""

    def __init__(self, path: Path, embedder: str, dim: int, url: str = "") -> None:
        self.path = Path(path)
        self.url = url
        self.embedder = embedder
        self.dim = dim
        self.shared: SharedVersions | None = None
        self.client: Any = None
        self.collection: Any = None
        self._gate: aiorwlock.RWLock | None = None  # made in open(): it binds to the loop
        self._scrub_due = True  # Chroma may (re)create its index: see _scrub

    # -- lifecycle ---------------------------------------------------------------------------
    def open_sync(self, *, upgrade: bool = True) -> tuple[Any, Any]:
        import chromadb  # imported lazily: heavy, loaded when a store opens
        from chromadb.config import Settings  # lazily, with chromadb

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
                metadata={"embedder": self.embedder, "dim": self.dim},
                embedding_function=None,  # we always pass our own vectors: never download one
            )
            hnsw = (collection.configuration_json or {}).get("hnsw") or {}
            if upgrade and hnsw.get("sync_threshold") != CHROMA_HNSW["sync_threshold"]:
                # A store made by a Memora that persisted every write, or left by a process
                # that died during an erasure: switch it, then reopen (the running segment
                # keeps the settings it was opened with).
                when_unlocked(lambda: collection.modify(configuration={"hnsw": dict(CHROMA_HNSW)}))
                client.close()
                return self.open_sync(upgrade=False)
            meta = collection.metadata or {}
            if meta.get("embedder", self.embedder) != self.embedder or int(
                meta.get("dim", self.dim)
            ) != int(self.dim):
                raise StoreError(
                    f"the memories under {self.path} were embedded with {meta.get('embedder')}"
                    f" ({meta.get('dim')} dimensions), not {self.embedder}"
                    f" ({self.dim}): use that embedder or a new data directory"
                )
        except BaseException:
            client.close()
            raise
        return client, collection

    async def open(self) -> None:
        if self.client is not None:
            return
        self._gate = aiorwlock.RWLock()
        if not self.url:  # before Chroma loads the index: see _reopen
            await run_blocking(erase_deleted_vectors, self.path)
        self.client, self.collection = await run_blocking(self.open_sync)
        if self.url:
            self.shared = await run_blocking(SharedVersions, self.client)
        else:  # Chroma loads the collection's segments on the first call: at start, not in
            # the first learner's search
            await run_blocking(self.collection.count)
            await run_blocking(self._scrub)

    async def close(self) -> None:
        if self._gate is not None:
            async with self._gate.writer:  # an erasure in flight reopens the client: let it end
                self._gate = None
        client, self.client, self.collection = self.client, None, None
        self.shared = None
        if client is not None:
            await run_blocking(close_http_client if self.url else type(client).close, client)

    @property
    def col(self) -> Any:
        if self.collection is None:
            raise StoreError("the memory store is not open")
        return self.collection

    @property
    def is_open(self) -> bool:
        return self.collection is not None

    async def call(self, fn: Callable[..., R], /, *args: Any) -> R:
        """A blocking call on the client, which an erasure may not reopen meanwhile."""
        if self._gate is None:
            raise StoreError("the memory store is not open")
        async with self._gate.reader:
            return await run_blocking(fn, *args)

    # -- versions (a Chroma server shared by replicas) ----------------------------------------
    async def version(self, user_id: int) -> str:
        """The user's version token on a shared server ("" when embedded)."""
        if self.shared is None:
            return ""
        return await run_blocking(self.shared.current, user_id)

    async def changed(self, user_id: int, *, gone: bool = False) -> None:
        """After a write: on a shared server, tell the other replicas."""
        if self.shared is not None:
            await run_blocking(self.shared.forget if gone else self.shared.bump, user_id)

    # -- queries (blocking: run them through `call`) -------------------------------------------
    def records(self, user_id: int) -> Records:
        got = self.col.get(
            where={"user_id": user_id}, include=["documents", "metadatas", "embeddings"]
        )
        return got["ids"], got["documents"], got["metadatas"], got["embeddings"]

    def held(self, user_id: int, limit: int | None = None) -> int:
        """How many memories the user has (counted up to `limit`, if given)."""
        return len(self.col.get(where={"user_id": user_id}, limit=limit, include=[])["ids"])

    def any(self, where: dict[str, Any]) -> bool:
        return bool(self.col.get(where=where, limit=1, include=[])["ids"])

    def has(self, memory_id: str, where: dict[str, Any]) -> bool:
        return bool(self.col.get(ids=[memory_id], where=where, include=[])["ids"])

    def nearest(self, where: dict[str, Any], qvecs: Any, n: int) -> Records:
        """The memories nearest to each query vector by Chroma's own filtered search (`n` per
        vector), each once."""
        got = self.col.query(
            query_embeddings=qvecs,
            n_results=n,
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
        return list(found), docs_, metas_, list(vecs_)

    def upsert(self, entries: Sequence[Entry]) -> None:
        self.col.upsert(
            ids=[e.memory.id for e in entries],
            embeddings=np.stack([e.vector for e in entries]),
            documents=[e.memory.text for e in entries],
            metadatas=[to_metadata(e.memory, e.seq) for e in entries],
        )

    async def write(self, entries: Sequence[Entry]) -> None:
        """Upsert the entries, then scrub an index the write may have created (see _scrub)."""
        await self.call(self.upsert, entries)
        if self._scrub_due and not self.url and hnsw_indexes(self.path):
            async with self._writer():
                await run_blocking(self._scrub)

    # -- erasure -------------------------------------------------------------------------------
    async def erase(self, delete: Callable[[], R]) -> R:
        """Run a Chroma deletion so that its words leave the files by the time it returns.

        Embedded: alone on the client (calls in flight finish first, new ones wait), between a
        flush of Chroma's log and a vacuum (:meth:`_erasing`). On a server the server's own
        settings hold: the deletion alone."""
        if self.url:
            return await self.call(delete)
        async with self._writer():
            return await run_blocking(self._erasing, delete)

    def _writer(self) -> Any:
        if self._gate is None:
            raise StoreError("the memory store is not open")
        return self._gate.writer

    def _erasing(self, delete: Callable[[], R]) -> R:
        """(blocking) Chroma keeps each write in its log until its index persists (see
        memora.storage.file_erasure): reopened with a threshold of 1, the index persists what the
        log holds and Chroma purges it; the delete is persisted and purged at once, the file
        vacuumed; then the client is reopened with writes back at their threshold, the deleted
        vectors zeroed in between (:meth:`_reopen`), and the index files scrubbed
        (:meth:`_scrub`).
        When writes already persist at the erasure's threshold, the first reopen is skipped."""
        if CHROMA_HNSW != ERASE_HNSW:
            self._reopen(ERASE_HNSW)
        try:
            result = when_unlocked(delete)
            vacuum_chroma(self.path)
        finally:
            self._reopen(CHROMA_HNSW)
            # The next writer must not meet the file still held by the client just closed.
            when_unlocked(lambda: self.col.modify(configuration={"hnsw": dict(CHROMA_HNSW)}))
        self.col.count()  # the segment loads on the first call after a reopen
        self._scrub()  # the flush created the index anew if it had never persisted an element
        return result

    def _reopen(self, hnsw: dict[str, int]) -> None:
        """(blocking) Set the collection's HNSW settings and reopen the client, the only way
        they reach the running index. Between the two, with no index loaded, the vectors of
        deleted elements are zeroed in its files
        (memora.storage.file_erasure.erase_deleted_vectors): a loaded index would keep them in
        memory and write them again."""
        when_unlocked(lambda: self.col.modify(configuration={"hnsw": dict(hnsw)}))
        client, self.client, self.collection = self.client, None, None
        client.close()
        erase_deleted_vectors(self.path)
        self.client, self.collection = self.open_sync(upgrade=False)
        self._scrub_due = True

    def _scrub(self) -> None:
        """(blocking, alone on the client, its segment loaded) Zero the unused slots of Chroma's
        index files, which hnswlib writes from memory it never initialised when it creates the
        index (memora.storage.file_erasure.scrub_hnsw). Once an index holding elements is loaded
        and scrubbed, later writes cannot bring such bytes back: until then, every write checks."""
        if self.url:
            return
        scrub_hnsw(self.path)
        self._scrub_due = hnsw_elements(self.path) == 0
