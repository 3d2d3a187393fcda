"""The memory store's write policy: what a new memory does to the user's memories.

A new memory is compared with the user's memories (and the items before it in one batch): the
same normalised text is a duplicate; with the embedder's calibrated thresholds, a text the
lexical guard finds nothing new in is a duplicate when the cosine clears a threshold, and the
same fact with other numbers ("level B1" → "level B2") supersedes the old memory, which keeps
the old text in its history (:func:`memora.longterm.dedupe.relation`). Only the memories the
guard could let through are compared (:class:`memora.longterm.dedupe.DedupeIndex`). An
extraction item's ``replaces`` is believed only when :func:`~memora.longterm.dedupe.may_replace`
says the two are about the same thing. A write holds the user's lock (:class:`UserLocks`)
and leaves the user's cache as the write left the data.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime

import numpy as np
import numpy.typing as npt

from memora.blocking import run_blocking
from memora.clock import utcnow
from memora.longterm.calibration import DedupeThresholds
from memora.longterm.dedupe import (
    Relation,
    candidate_cosines,
    may_replace,
    normalise_text,
    relation,
    relation_floor,
)
from memora.longterm.embeddings import StoreEmbeddings
from memora.longterm.matrix import Matrix
from memora.longterm.memories import (
    MAX_SITUATIONS,
    AddResult,
    Memory,
    MemoryNotFound,
    NewMemory,
    SearchWords,
    check_user,
    clean_terms,
    clean_text,
    indexed,
    indexed_text,
    revised,
)
from memora.longterm.search import one_blas_thread
from memora.longterm.snapshot import Entry, UserData
from memora.longterm.user_cache import CachedUsers

log = logging.getLogger(__name__)

__all__ = ["MemoryWriter", "UserLocks"]


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


class _Batch:
    """The user's memories while one `add_many` decides item by item (later items see earlier
    ones), and which entries changed. Each step derives the next snapshot incrementally
    (:meth:`UserData.appended`, :meth:`UserData.replaced`): no step copies or re-reads all of
    the user's memories."""

    def __init__(
        self, data: UserData, thresholds: DedupeThresholds | None, within: int | None = None
    ) -> None:
        self.data = data
        self.thresholds = thresholds
        self.within = within  # only this chat's memories may be matched (None: all)
        self.next_seq = data.next_seq
        self.changed: dict[str, int] = {}  # memory id → index in entries

    @property
    def entries(self) -> tuple[Entry, ...]:
        return self.data.entries

    @property
    def matrix(self) -> Matrix:
        return self.data.matrix

    def index_of(self, memory_id: str | None) -> int | None:
        i = None if memory_id is None else self.data.position(memory_id)
        return i if i is not None and self.matchable(i) else None

    def matchable(self, i: int) -> bool:
        """Whether entry i may be matched (a duplicate, updated, replaced) by this batch."""
        return self.within is None or self.entries[i].memory.chat_id == self.within

    def key(self, i: int) -> str:
        return normalise_text(self.entries[i].memory.text)

    def closest(self, text: str, vec: npt.NDArray[np.float32]) -> tuple[int | None, int | None]:
        """(index of a duplicate, index of a memory to update), closest first."""
        same = self.data.keys.get(normalise_text(text))
        if same is not None and not self.matchable(same):
            same = None
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
            if not self.matchable(i):
                continue
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


class MemoryWriter:
    """Adds, supersedes, reverts and fills in one user's memories at a time (the user's lock)."""

    def __init__(
        self,
        users: CachedUsers,
        embeddings: StoreEmbeddings,
        locks: UserLocks,
        thresholds: DedupeThresholds | None,
    ) -> None:
        self.users = users
        self.embeddings = embeddings
        self.locks = locks
        self.thresholds = thresholds  # None: only the same normalised text is a duplicate

    async def _rewrite(self, user_id: int, data: UserData, entry: Entry, memory: Memory) -> None:
        """Store a new version of one memory (a new text, so a new vector)."""
        vectors, _ = await self.embeddings.passages([indexed(memory)])
        new_entry = Entry(memory, entry.seq, vectors[0])
        await self.users.write(user_id, [new_entry], data.with_entry(new_entry))

    async def add(
        self,
        user_id: int,
        item: NewMemory,
        *,
        now: datetime | None = None,
        within: int | None = None,
    ) -> AddResult:
        """Store one memory unless the user already has it (see :meth:`add_many`)."""
        return (await self.add_many(user_id, [item], now=now, within=within))[0]

    async def add_many(
        self,
        user_id: int,
        items: Sequence[NewMemory],
        *,
        now: datetime | None = None,
        within: int | None = None,
    ) -> list[AddResult]:
        """Store several memories with one embedding call and one Chroma write.

        An item whose `replaces` names one of the user's memories supersedes it. Any other item
        is compared with the user's memories (and the items before it, see
        :func:`~memora.longterm.dedupe.relation`): a duplicate is not stored; the same fact
        with other numbers supersedes the older memory; anything else is added. With `within`
        (a group's id), only that chat's memories are compared and replaced: a write in a group
        never takes over a memory from elsewhere (a private one).
        """
        check_user(user_id)
        if not items:
            return []
        texts = [clean_text(it.text) for it in items]
        stamp = utcnow(now)
        async with self.locks.hold(user_id):
            data = await self.users.data(user_id)
            if not {"keys", "dedupe"} <= data.__dict__.keys():  # built by the load, then
                await run_blocking(lambda: (data.keys, data.dedupe))  # carried by each write
            batch = _Batch(data, self.thresholds, within)
            words = [
                indexed_text(t, it.terms, it.situations) for t, it in zip(texts, items, strict=True)
            ]
            vectors, tokens = await self.embeddings.passages(words)
            with one_blas_thread():
                results = [
                    self._add_one(
                        user_id, batch, item, text, vectors[n], stamp, tokens if n == 0 else 0
                    )
                    for n, (item, text) in enumerate(zip(items, texts, strict=True))
                ]
            await self.users.write(user_id, batch.written(), batch.data)
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
                since=item.since,
                until=item.until,
                asked_at=None,  # a new fact: an ended one is asked about again
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
            since=item.since,
            until=item.until,
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
        async with self.locks.hold(user_id):
            data = await self.users.data(user_id)
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
        async with self.locks.hold(user_id):
            data = await self.users.data(user_id)
            entry = data.find(memory_id)
            if entry is None or not entry.memory.history:
                return None
            old = entry.memory
            back = old.history[-1]
            memory = revised(
                old,
                back.text,
                stamp,
                "reverted",
                history=old.history[:-1],
                terms=(),
                situations=(),
                # the text goes back where it came from (a private one never stays in a group)
                chat_id=back.chat_id if back.chat_id is not None else old.chat_id,
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
        async with self.locks.hold(user_id):
            data = await self.users.data(user_id)
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
            vectors, tokens = await self.embeddings.passages(texts)
            written = [Entry(m, e.seq, v) for (e, m), v in zip(todo, vectors, strict=True)]
            after = data
            for new in written:
                after = after.with_entry(new)
            await self.users.write(user_id, written, after)
        return [m for _, m in todo], tokens

    async def mark(self, user_id: int, memory_id: str, **fields: str | None) -> Memory | None:
        """Set time fields of one memory that do not change what it says (``pinned_at``,
        ``asked_at``): its text, vector and ``updated_at`` stay. None if there is no such
        memory."""
        check_user(user_id)
        async with self.locks.hold(user_id):
            data = await self.users.data(user_id)
            entry = data.find(memory_id)
            if entry is None:
                return None
            memory = replace(entry.memory, **fields)  # type: ignore[arg-type]
            if memory != entry.memory:
                new_entry = Entry(memory, entry.seq, entry.vector)
                await self.users.write(user_id, [new_entry], data.with_entry(new_entry))
            return memory
