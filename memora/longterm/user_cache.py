"""Which users' snapshots are held in process, and keeping them current with Chroma.

:class:`UserCache` holds the most recently used users' snapshots (:mod:`memora.longterm.snapshot`)
with a write generation per user. :class:`CachedUsers` finds a user there or loads it from
Chroma: one load at a time per user, which a cold search may start without waiting for. A write
is write-through: the cache holds the user as the write left it, and any failure drops the user
so the next read reloads it; a generation counter tells a load that raced with a write that
what it read is stale. The cache is per process: on a Chroma server shared by replicas a user's
cached memories are used only under the version token they were loaded under
(:mod:`memora.longterm.chroma_server`), and a write drops the user instead of writing through.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from memora.blocking import run_blocking
from memora.longterm.chroma import ChromaBackend, Records
from memora.longterm.memories import from_record
from memora.longterm.snapshot import Entry, UserData

log = logging.getLogger(__name__)

__all__ = ["CachedUsers", "UserCache", "load_user", "snapshot"]


def snapshot(records: Records, dim: int, *, room: bool = False) -> UserData:
    """Chroma records as a user's snapshot: oldest first, vectors normalised; with `room`, spare
    rows behind the matrix for the writes to append to (UserData.with_room)."""
    ids, docs, metas, embeddings = records
    if not ids:
        return UserData((), np.zeros((0, dim), dtype=np.float32))
    vectors = np.asarray(embeddings, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    vectors = vectors / norms
    rows = []
    for i, (memory_id, doc, meta) in enumerate(zip(ids, docs, metas, strict=True)):
        memory, seq = from_record(memory_id, str(doc or ""), dict(meta or {}))
        rows.append((seq, memory.created_at, memory.id, memory, i))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    # One matrix in the user's order; each entry's vector is a view of its row (a view of the
    # unordered array would keep that one alive too: the vectors held twice).
    ordered = np.ascontiguousarray(vectors[[i for *_, i in rows]])
    entries = tuple(Entry(m, seq, ordered[j]) for j, (seq, _, _, m, _) in enumerate(rows))
    return UserData.with_room(entries, ordered) if room else UserData(entries, ordered)


def load_user(backend: ChromaBackend, user_id: int) -> UserData:
    """(blocking) All of a user's memories, indexed here, off the event loop, not by the next
    search or write."""
    data = snapshot(backend.records(user_id), backend.dim, room=True)
    data.bm25, data.keys, data.dedupe, data.weight_kinds  # noqa: B018
    return data


class UserCache:
    """The most recently used users' data (LRU), with a write generation per user."""

    def __init__(self, max_users: int) -> None:
        self.max_users = max_users
        self._data: OrderedDict[int, UserData] = OrderedDict()
        self._generation: dict[int, int] = {}

    def get(self, user_id: int) -> UserData | None:
        data = self._data.get(user_id)
        if data is not None:
            self._data.move_to_end(user_id)
        return data

    def generation(self, user_id: int) -> int:
        """Changes with every write of the user: compare before and after a load."""
        return self._generation.get(user_id, 0)

    def invalidate(self, user_id: int) -> None:
        """Drop the user and make any load in flight for it stale."""
        self._generation[user_id] = self._generation.get(user_id, 0) + 1
        self._data.pop(user_id, None)

    def keep(self, user_id: int, data: UserData, *, generation: int | None = None) -> None:
        """Hold the user's data, unless it was loaded before a write (`generation` is stale)."""
        if generation is not None and generation != self.generation(user_id):
            return
        self._data[user_id] = data
        self._data.move_to_end(user_id)
        while len(self._data) > self.max_users:
            self._data.popitem(last=False)

    def clear(self) -> None:
        self._data.clear()


class CachedUsers:
    """Users' memories in process, loaded from and written through to the backend."""

    def __init__(
        self, backend: ChromaBackend, max_users: int, read: Callable[[int], UserData]
    ) -> None:
        self.backend = backend
        self._read = read  # (blocking) a user's memories from the backend: load_user
        self.cache = UserCache(max_users)
        self._loaded_at: dict[int, str] = {}  # user → the version its cached memories are
        # user → ((version, generation) it loads under, the load); see load
        self.loads: dict[int, tuple[tuple[str, int], asyncio.Task[UserData]]] = {}

    async def close(self) -> None:
        loads = [task for _, task in self.loads.values()]
        self.loads.clear()
        await asyncio.gather(*loads, return_exceptions=True)  # they read through the client
        self._loaded_at.clear()
        self.cache.clear()

    def cached(self, user_id: int, version: str) -> UserData | None:
        data = self.cache.get(user_id)
        if data is not None and self._loaded_at.get(user_id, "") == version:
            return data
        return None

    async def data(self, user_id: int) -> UserData:
        """The user's memories, from the cache or loaded now."""
        version = await self.backend.version(user_id)
        cached = self.cached(user_id, version)
        if cached is not None:
            return cached
        return await asyncio.shield(self.load(user_id, version))

    def load(self, user_id: int, version: str) -> asyncio.Task[UserData]:
        """The load of the user's memories into the cache: one at a time per user and state
        (a cold search starts it and answers without waiting; later reads join it)."""
        state = (version, self.cache.generation(user_id))
        running = self.loads.get(user_id)
        if running is not None and running[0] == state:
            return running[1]
        task = asyncio.ensure_future(self._load_now(user_id, *state))
        self.loads[user_id] = (state, task)
        task.add_done_callback(functools.partial(self._loaded, user_id))
        return task

    async def _load_now(self, user_id: int, version: str, generation: int) -> UserData:
        data = await self.backend.call(self._read, user_id)
        # A write that finished while we were loading makes what we read stale: don't keep it.
        self.keep(user_id, data, generation=generation)
        if self.cache.get(user_id) is data:
            self._loaded_at[user_id] = version
        return data

    def _loaded(self, user_id: int, task: asyncio.Task[UserData]) -> None:
        running = self.loads.get(user_id)
        if running is not None and running[1] is task:
            del self.loads[user_id]
        if not task.cancelled() and task.exception() is not None:  # retrieved: no warning
            log.warning("loading a user's memories failed: %r", task.exception())

    def keep(self, user_id: int, data: UserData, *, generation: int | None = None) -> None:
        if self.backend.is_open:  # a closed store caches nothing
            self.cache.keep(user_id, data, generation=generation)

    async def write(self, user_id: int, entries: Sequence[Entry], after: UserData) -> None:
        """Upsert the changed memories, then cache the user's data as it now is (write-through:
        the next search does not reload the user). Any failure drops the cache instead."""
        try:
            if entries:
                await self.backend.write(entries)
                await self.backend.changed(user_id)
        finally:
            self.cache.invalidate(user_id)  # also makes a load that raced with this one stale
        if self.backend.shared is not None:
            return  # another replica may have written too: the next read loads the server's
        if "bm25" not in after.__dict__:  # else carried by the write: nothing to build
            # Writes happen after the reply: build the lexical index now, not on the next search.
            await run_blocking(lambda: after.bm25)
        self.keep(user_id, after)
