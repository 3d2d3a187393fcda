"""Each user's memories held in process: the per-user vector cache and the per-user locks.

A user has tens to a few thousand memories, so search ranks them exactly in numpy from this
cache instead of asking Chroma's HNSW index with a metadata filter. The cache is write-through:
a write for a user holds that user's lock and leaves the cache as the write left the data; a
failed write drops the user, and the next read reloads it. A generation counter per user tells
a load that raced with a write that what it read is stale. The cache is per process: two
processes writing for one user would each keep their own view (the embedded default runs one).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from memora.longterm.lexical import BM25
from memora.longterm.records import Memory, indexed_text

__all__ = ["Entry", "UserCache", "UserData", "UserLocks"]


@dataclass(frozen=True)
class Entry:
    """One memory with its order among the user's memories and its (normalised) vector."""

    memory: Memory
    seq: int
    vector: npt.NDArray[np.float32]


@dataclass(frozen=True)
class UserData:
    """One user's memories, oldest first, and their vectors as one matrix (rows as entries)."""

    entries: tuple[Entry, ...]
    vectors: npt.NDArray[np.float32]  # (n, dim)

    @property
    def texts(self) -> list[str]:
        return [e.memory.text for e in self.entries]

    @cached_property
    def bm25(self) -> BM25:
        """The lexical index over the texts: built by each write, or by the first search after
        a load."""
        return BM25.from_texts([indexed_text(e.memory.text, e.memory.terms) for e in self.entries])

    def find(self, memory_id: str) -> Entry | None:
        return next((e for e in self.entries if e.memory.id == memory_id), None)

    def with_entry(self, entry: Entry) -> UserData:
        """The same data with one memory replaced by a new version (same id)."""
        i = next(i for i, e in enumerate(self.entries) if e.memory.id == entry.memory.id)
        vectors = self.vectors.copy()
        vectors[i] = entry.vector
        return UserData((*self.entries[:i], entry, *self.entries[i + 1 :]), vectors)

    def from_chat(self, chat_id: int) -> UserData:
        """Only the memories that came from one chat (a group keeps to what was said there)."""
        keep = [i for i, e in enumerate(self.entries) if e.memory.chat_id == chat_id]
        return UserData(tuple(self.entries[i] for i in keep), self.vectors[keep])

    def without(self, memory_id: str) -> UserData:
        keep = [i for i, e in enumerate(self.entries) if e.memory.id != memory_id]
        return UserData(tuple(self.entries[i] for i in keep), self.vectors[keep])


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


class UserLocks:
    """One asyncio lock per user, held only while someone holds or waits for it.

    A plain dict of locks grows by one lock per user ever seen; here a user's lock is dropped
    when its last holder leaves, so the dict holds only the users being written right now.
    """

    def __init__(self) -> None:
        self._locks: dict[int, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, user_id: int) -> AsyncIterator[None]:
        lock, users = self._locks.get(user_id, (asyncio.Lock(), 0))
        self._locks[user_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[user_id]
            if users <= 1:
                del self._locks[user_id]
            else:
                self._locks[user_id] = (lock, users - 1)
