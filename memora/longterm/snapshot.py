"""One user's memories in process as a snapshot: the entries, their vectors as one matrix, and
what ranking and the write policy derive from them (the BM25 index, the duplicate keys and index,
the dense-weight kinds, the per-chat views).

A user has tens to a few thousand memories, so search ranks them exactly in numpy from a
snapshot instead of asking Chroma's HNSW index with a metadata filter. A snapshot never changes
once made: a write makes the next one, carrying over what this one derived. Which users'
snapshots are held, and how they are loaded and kept current: :mod:`memora.longterm.user_cache`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from memora.longterm.dedupe import DedupeIndex, normalise_text
from memora.longterm.lexical import BM25, tokenize
from memora.longterm.matrix import Matrix
from memora.longterm.memories import Memory, indexed
from memora.longterm.ranking import weight_kinds

__all__ = ["Entry", "UserData", "indexed_terms", "weight_kind"]


@dataclass(frozen=True)
class Entry:
    """One memory with its order among the user's memories and its (normalised) vector."""

    memory: Memory
    seq: int
    vector: npt.NDArray[np.float32]


class UserData:
    """One user's memories, oldest first, and their vectors as one matrix (rows as entries).

    A snapshot: never changed once made. A write makes the next snapshot with :meth:`appended`,
    :meth:`replaced` or :meth:`without`, which carry over what this one has already derived
    (texts, the BM25 index, the duplicate keys, the per-chat views of :meth:`from_chat`)
    updated for the one memory that changed, and share the matrix's unchanged chunks
    (memora.longterm.matrix), so a write's cost does not grow with the user's memories.
    """

    def __init__(self, entries: tuple[Entry, ...], vectors: Matrix | npt.ArrayLike) -> None:
        self.entries = entries
        self.matrix = vectors if isinstance(vectors, Matrix) else Matrix.of(vectors)
        if len(self.matrix) != len(entries):
            raise ValueError(f"{len(entries)} entries but {len(self.matrix)} vectors")

    @classmethod
    def with_room(cls, entries: tuple[Entry, ...], vectors: npt.NDArray[np.float32]) -> UserData:
        """What the load makes: the matrix copied into its chunks, with spare rows behind the
        last one so that the first writes after the load append a row each, and the entries'
        vectors views of the matrix's rows (the user's vectors held once). An eighth more
        rows (at least 16) at most: most cached users are read, not written, and untouched
        spare rows still count against a process's memory."""
        matrix = Matrix.with_room(vectors, len(entries) // 8)
        entries = tuple(Entry(e.memory, e.seq, matrix.row(j)) for j, e in enumerate(entries))
        return cls(entries, matrix)

    @property
    def vectors(self) -> npt.NDArray[np.float32]:
        """The vectors as one contiguous (n, dim) array: a copy past one chunk (tests and
        benchmarks; searches and writes use :attr:`matrix`)."""
        return self.matrix.array()

    @cached_property
    def texts(self) -> list[str]:
        return [e.memory.text for e in self.entries]

    @cached_property
    def bm25(self) -> BM25:
        """The lexical index over the texts: carried by each write, or built by the first
        search after a load."""
        return BM25([indexed_terms(e) for e in self.entries])

    @cached_property
    def dedupe(self) -> DedupeIndex:
        """Which memories a new one must be compared with (memora.longterm.dedupe): carried
        by each write, or built with the lexical index by the load."""
        return DedupeIndex(self.texts)

    @property
    def next_seq(self) -> int:
        """The order number of the next memory (entries are in order: the last is highest)."""
        return self.entries[-1].seq + 1 if self.entries else 1

    @cached_property
    def keys(self) -> dict[str, int]:
        """Normalised text → the first memory with it (exact duplicates are found by lookup).

        Built with :attr:`_shared_keys`, which a write needs to carry the keys over."""
        out: dict[str, int] = {}
        shared: dict[str, tuple[int, ...]] = {}
        for i, e in enumerate(self.entries):
            key = normalise_text(e.memory.text)
            first = out.setdefault(key, i)
            if first != i:
                shared[key] = (*shared.get(key, (first,)), i)
        self.__dict__["_shared_keys"] = shared
        return out

    @property
    def _shared_keys(self) -> dict[str, tuple[int, ...]]:
        """The keys more than one memory holds → all of those memories, ascending (few: an
        exact duplicate is not added): with them a write that changes the text of a key's first
        memory finds the next one without a pass over every memory. Set with :attr:`keys`."""
        self.keys  # noqa: B018 - builds both
        shared: dict[str, tuple[int, ...]] = self.__dict__["_shared_keys"]
        return shared

    @cached_property
    def weight_kinds(self) -> npt.NDArray[np.intp]:
        """Per memory (rows), which dense weight of the embedder's profile it gets for a
        mostly-Han message and for a mostly-Latin one (memora.longterm.ranking.weight_kinds);
        carried by each write like the BM25 index."""
        return np.array([weight_kind(e) for e in self.entries], dtype=np.intp).reshape(-1, 2)

    def find(self, memory_id: str) -> Entry | None:
        return next((e for e in self.entries if e.memory.id == memory_id), None)

    def position(self, memory_id: str) -> int | None:
        return next((i for i, e in enumerate(self.entries) if e.memory.id == memory_id), None)

    def _has(self, name: str) -> bool:
        return name in self.__dict__  # a cached_property already computed

    @property
    def _chats(self) -> dict[int, UserData]:
        """chat id → the view :meth:`from_chat` made (each with its own derived data)."""
        chats: dict[int, UserData] = self.__dict__.setdefault("_chat_views", {})
        return chats

    def _carried_chats(self, new: UserData, changed: dict[int | None, UserData | None]) -> None:
        """Give `new` this snapshot's chat views, the changed chats' updated (None: dropped,
        made again when asked)."""
        if not self._has("_chat_views"):
            return
        views = {c: v for c, v in self._chats.items() if c not in changed}
        views.update({c: v for c, v in changed.items() if c is not None and v is not None})
        new.__dict__["_chat_views"] = views

    def appended(self, entry: Entry) -> UserData:
        """The same data with one more memory at the end."""
        n = len(self.entries)
        new = UserData((*self.entries, entry), self.matrix.appended(entry.vector))
        if self._has("texts"):
            new.__dict__["texts"] = [*self.texts, entry.memory.text]
        if self._has("bm25"):
            new.__dict__["bm25"] = self.bm25.appended(indexed_terms(entry))
        if self._has("dedupe"):
            new.__dict__["dedupe"] = self.dedupe.appended(entry.memory.text)
        if self._has("keys"):
            keys, shared = dict(self.keys), self._shared_keys
            key = normalise_text(entry.memory.text)
            first = keys.setdefault(key, n)
            if first != n:
                shared = dict(shared)
                shared[key] = (*shared.get(key, (first,)), n)
            new.__dict__["keys"], new.__dict__["_shared_keys"] = keys, shared
        if self._has("weight_kinds"):
            row = np.array([weight_kind(entry)], dtype=np.intp)
            new.__dict__["weight_kinds"] = np.vstack([self.weight_kinds, row])
        chat = entry.memory.chat_id
        view = self._chats.get(chat) if chat is not None and self._has("_chat_views") else None
        self._carried_chats(new, {chat: view.appended(entry) if view is not None else None})
        return new

    def replaced(self, i: int, entry: Entry) -> UserData:
        """The same data with memory i replaced by a new version of it (new text and vector)."""
        # A search may still hold this snapshot's matrix: the new one copies row i's chunk.
        matrix = self.matrix.replaced(i, entry.vector)
        new = UserData((*self.entries[:i], entry, *self.entries[i + 1 :]), matrix)
        if self._has("texts"):
            texts = list(self.texts)
            texts[i] = entry.memory.text
            new.__dict__["texts"] = texts
        if self._has("bm25"):
            new.__dict__["bm25"] = self.bm25.replaced(i, indexed_terms(entry))
        if self._has("dedupe"):
            new.__dict__["dedupe"] = self.dedupe.replaced(
                i, self.entries[i].memory.text, entry.memory.text
            )
        if self._has("weight_kinds"):
            weights = self.weight_kinds.copy()
            weights[i] = weight_kind(entry)
            new.__dict__["weight_kinds"] = weights
        if self._has("keys"):
            new.__dict__["keys"], new.__dict__["_shared_keys"] = self._rekeyed(i, entry)
        old_chat, chat = self.entries[i].memory.chat_id, entry.memory.chat_id
        if old_chat == chat:
            view = self._chats.get(chat) if chat is not None and self._has("_chat_views") else None
            self._carried_chats(new, {chat: view.with_entry(entry) if view is not None else None})
        else:  # the memory moved to another chat: both views are made again when asked
            self._carried_chats(new, {old_chat: None, chat: None})
        return new

    def _rekeyed(self, i: int, entry: Entry) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
        """The keys (and shared keys) once memory i has `entry`'s text. A memory that held its
        old text first hands the key to the next memory with that text, if any (the shared
        keys say which): no pass over every memory (that pass was 5-7 ms at 10,000)."""
        old_key = normalise_text(self.entries[i].memory.text)
        new_key = normalise_text(entry.memory.text)
        if old_key == new_key:
            return self.keys, self._shared_keys
        keys, shared = dict(self.keys), dict(self._shared_keys)
        rest = tuple(h for h in shared.get(old_key, (i,)) if h != i)
        shared.pop(old_key, None)
        if not rest:
            del keys[old_key]
        else:
            keys[old_key] = rest[0]
            if len(rest) > 1:
                shared[old_key] = rest
        if new_key not in keys:
            keys[new_key] = i
        else:
            holders = tuple(sorted((*shared.get(new_key, (keys[new_key],)), i)))
            keys[new_key], shared[new_key] = holders[0], holders
        return keys, shared

    def with_entry(self, entry: Entry) -> UserData:
        """The same data with one memory replaced by a new version (same id)."""
        i = self.position(entry.memory.id)
        if i is None:
            raise KeyError(entry.memory.id)
        return self.replaced(i, entry)

    def from_chat(self, chat_id: int) -> UserData:
        """Only the memories that came from one chat (a group keeps to what was said there).

        Made once per snapshot and chat and kept with the snapshot, so a group's searches do
        not rebuild its lexical index each time; later snapshots carry the view, updated for
        the one memory that changed."""
        view = self._chats.get(chat_id)
        if view is None:
            keep = [i for i, e in enumerate(self.entries) if e.memory.chat_id == chat_id]
            view = UserData(tuple(self.entries[i] for i in keep), self.matrix.take(keep))
            self._chats[chat_id] = view
        return view

    def without(self, memory_id: str) -> UserData:
        i = self.position(memory_id)
        if i is None:
            return self
        new = UserData((*self.entries[:i], *self.entries[i + 1 :]), self.matrix.removed(i))
        if self._has("bm25"):
            new.__dict__["bm25"] = self.bm25.removed(i)
        if self._has("dedupe"):
            new.__dict__["dedupe"] = self.dedupe.removed(i)
        if self._has("weight_kinds"):
            new.__dict__["weight_kinds"] = np.delete(self.weight_kinds, i, axis=0)
        chat = self.entries[i].memory.chat_id
        view = self._chats.get(chat) if chat is not None and self._has("_chat_views") else None
        self._carried_chats(new, {chat: view.without(memory_id) if view is not None else None})
        return new


def weight_kind(entry: Entry) -> tuple[int, int]:
    """One memory's dense-weight kinds for a mostly-Han and a mostly-Latin message."""
    return weight_kinds(entry.memory.text, bool(entry.memory.terms))


def indexed_terms(entry: Entry) -> list[str]:
    """What the lexical index holds for one memory: its text, search terms and situations."""
    return tokenize(indexed(entry.memory))
