"""Long-term memory: every read and write scoped to one user.

:class:`MemoryStore` is the one entry point; it composes the parts, one job each: the Chroma
backend and erasure (:mod:`~memora.longterm.chroma`), the per-user cache of snapshots
(:mod:`~memora.longterm.user_cache`), the write policy (:mod:`~memora.longterm.writes`) and the
ranked reads (:mod:`~memora.longterm.search`), with the embedder's calibrated numbers
(:mod:`~memora.longterm.calibration`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memora.blocking import run_blocking
from memora.longterm.calibration import profile_for
from memora.longterm.chroma import COLLECTION, ChromaBackend
from memora.longterm.embeddings import Embedder, StoreEmbeddings
from memora.longterm.memories import (
    Memory,
    check_user,
)
from memora.longterm.search import MemorySearch
from memora.longterm.snapshot import UserData
from memora.longterm.user_cache import CachedUsers, UserCache, load_user
from memora.longterm.writes import MemoryWriter, UserLocks

__all__ = ["COLLECTION", "MemoryStore"]


class MemoryStore:
    """Each user's long-term memories in one persistent Chroma collection.

    Every public method takes the user id first; there is no way to search or list without one.
    Callers reach the parts by name: ``writer`` adds, supersedes, reverts, fills in terms and
    marks (:class:`~memora.longterm.writes.MemoryWriter`, serialised per user by an asyncio
    lock); ``searcher`` ranks (:class:`~memora.longterm.search.MemorySearch`: ``search``,
    ``similar``). The front opens and closes them, lists, counts and deletes.
    """

    def __init__(
        self, path: Path, embedder: Embedder, *, max_cached_users: int = 256, url: str = ""
    ) -> None:
        self.path = Path(path)
        # a Chroma server shared by replicas (memora.longterm.chroma_server); "" = embedded
        self.url = url
        self.embedder = embedder
        self.profile = profile_for(embedder.name)  # its calibrated numbers, if any
        self.backend = ChromaBackend(self.path, embedder.name, embedder.dim, url)
        self.users = CachedUsers(self.backend, max_cached_users, self._load_sync)
        self.embeddings = StoreEmbeddings(embedder)
        self._locks = UserLocks()
        self.writer = MemoryWriter(self.users, self.embeddings, self._locks, self.profile.dedupe)
        self.searcher = MemorySearch(self.backend, self.users, self.embeddings, self.profile)

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

    async def open(self) -> None:
        await self.backend.open()

    async def close(self) -> None:
        await self.users.close()
        await self.backend.close()
        self.users.cache.clear()
        self.embeddings.recent.clear()

    # -- what tests and benchmarks reach into --------------------------------------------------
    @property
    def _cache(self) -> UserCache:
        return self.users.cache

    @property
    def _col(self) -> Any:
        return self.backend.col

    async def _data(self, user_id: int) -> UserData:
        return await self.users.data(user_id)

    def _load_sync(self, user_id: int) -> UserData:
        """(blocking) All of the user's memories from Chroma, indexed."""
        return load_user(self.backend, user_id)

    # -- deletes (the other writes are the writer's) ------------------------------------------
    async def delete(self, user_id: int, memory_id: str) -> bool:
        """Delete one of the user's memories; False if the user has no memory with that id."""
        check_user(user_id)
        where = {"user_id": user_id}
        backend, cache = self.backend, self.users.cache
        async with self._locks.hold(user_id):  # no other write of this user meanwhile
            if not await backend.call(backend.has, memory_id, where):
                return False
            cached = cache.get(user_id)  # current: every write of this user holds the lock
            try:
                await backend.erase(lambda: backend.col.delete(ids=[memory_id], where=where))
                await backend.changed(user_id)
            finally:
                cache.invalidate(user_id)
            if cached is not None and backend.shared is None:
                # Off the event loop: the indexes shift every later memory's position (about
                # 50 ms for 10,000 memories at a load of 4).
                self.users.keep(user_id, await run_blocking(cached.without, memory_id))
            return True

    async def delete_user(self, user_id: int) -> int:
        """Delete every memory of the user (one filtered delete); returns how many there were."""
        check_user(user_id)
        where = {"user_id": user_id}
        backend = self.backend

        def _delete_all() -> int:
            n = len(backend.col.get(where=where, include=[])["ids"])
            backend.col.delete(where=where)
            return n

        async with self._locks.hold(user_id):
            try:
                n = await backend.erase(_delete_all)
                await backend.changed(user_id, gone=True)
                return n
            finally:
                self.users.cache.invalidate(user_id)
                self.embeddings.recent.clear()  # recent messages are not kept past /forgetme

    # -- reads -------------------------------------------------------------------------------
    async def memories(self, user_id: int, *, origin_chat: int | None = None) -> list[Memory]:
        """The user's memories, oldest first (a stable numbering for /memories and /forget n);
        with `origin_chat`, only those that came from that chat."""
        check_user(user_id)
        data = await self.users.data(user_id)
        if origin_chat is not None:
            data = data.from_chat(origin_chat)
        return [e.memory for e in data.entries]

    async def get(self, user_id: int, memory_id: str) -> Memory | None:
        check_user(user_id)
        entry = (await self.users.data(user_id)).find(memory_id)
        return entry.memory if entry else None

    async def count(self, user_id: int) -> int:
        check_user(user_id)
        cached = self.users.cache.get(user_id) if self.backend.shared is None else None
        if cached is not None:
            return len(cached.entries)
        return await self.backend.call(self.backend.held, user_id)
