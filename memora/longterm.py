"""Long-term memory: one Chroma collection, every read and write scoped to one user.

Layout. All memories live in ONE collection ("memories", cosine space) with a ``user_id``
metadata field; every Chroma call carries ``where={"user_id": ...}``. Measured on chromadb 1.5.9:
one collection of 10,000 memories with a filter is 23 MB and ~6 ms per query, against 371 MB for
per-user collections, and ``collection.delete(where={"user_id": ...})`` removes a user completely
in one call.

Scoring. Each user's memories (ids, texts, vectors) are cached in process (LRU over users) and
ranked exactly in numpy through :func:`_rank`, the one place where the final ranking happens:
``memora.ranking.hybrid_rank`` (dense cosine fused with BM25 coverage). A user has tens to a few
thousand memories, so the exact scan costs less than HNSW with a metadata filter and needs no
recall tuning. A write for a user holds that user's lock and leaves the cache as the write left
the data (write-through); a failed write drops it, and the next read reloads the user with one
filtered ``get``. The cache is per process: two processes writing for one user would each keep
their own view (the embedded default runs one).

Duplicates. A new memory is a duplicate of an existing one when the normalised texts are equal,
or when a lexical guard finds nothing new in it and the dense cosine clears a threshold (see
:func:`relation`): numbers, levels and dates, negation, exam names, skills and goals must be the
same, and in a script both texts share, the new text must not swap a content word for another
("travel" → "business") nor add one. When only the numbers differ ("level B1" → "level B2") the
new text supersedes the old one, which is kept in the memory's history.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from memora.blocking import run_blocking
from memora.dedupe import CANDIDATE_MIN, Relation, embedding_text, normalise_text, relation
from memora.embeddings import Embedder, Vectors
from memora.erase import CHROMA_HNSW, vacuum_chroma
from memora.lexical import BM25
from memora.ranking import DenseScale, dense_scale_for, hybrid_rank

log = logging.getLogger(__name__)

__all__ = [
    "AddResult",
    "Memory",
    "MemoryNotFound",
    "MemoryStore",
    "NewMemory",
    "Revision",
    "SearchHit",
    "SearchResult",
    "StoreError",
]

COLLECTION = "memories"
Source = Literal["extracted", "manual"]
AddAction = Literal["added", "duplicate", "superseded"]


MAX_TEXT_CHARS = 1000
_FINAL_PUNCT = " .。!！;；…"


class StoreError(Exception):
    """The store cannot be used as asked (not open, wrong embedder for the stored vectors)."""


class MemoryNotFound(KeyError):
    """No memory with that id belongs to that user."""


@dataclass(frozen=True)
class Revision:
    """A text a memory had before it was replaced, when, and why."""

    text: str
    replaced_at: str
    reason: str


@dataclass(frozen=True)
class Memory:
    """One long-term memory of one user."""

    id: str
    user_id: int
    text: str
    source: Source
    category: str
    created_at: str
    updated_at: str
    chat_id: int | None = None
    message_id: int | None = None
    history: tuple[Revision, ...] = ()


@dataclass(frozen=True)
class NewMemory:
    """A memory to add (see :meth:`MemoryStore.add_many`).

    `replaces` names a memory of the same user that this one updates or contradicts: it is then
    superseded (its text goes to its history) instead of a new memory being added.
    """

    text: str
    source: Source = "extracted"
    category: str = "other"
    chat_id: int | None = None
    message_id: int | None = None
    replaces: str | None = None


@dataclass(frozen=True)
class AddResult:
    """What `add` did: stored a new memory, found a duplicate, or superseded an older memory.

    `memory` is the stored memory (the existing one for a duplicate, the updated one for a
    supersede); `previous` is the superseded memory as it was before. In a batch the embedding
    tokens of the one embedding call are reported on the first result.
    """

    action: AddAction
    memory: Memory
    previous: Memory | None = None
    embedding_tokens: int = 0


@dataclass(frozen=True)
class SearchHit:
    memory: Memory
    score: float


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    embedding_tokens: int = 0


# --------------------------------------------------------------------------------------------


def _rank(
    query_vec: npt.NDArray[np.float32],
    doc_vecs: npt.NDArray[np.float32],
    query_text: str,
    doc_texts: Sequence[str],
    top_k: int,
    min_score: float,
    *,
    scale: DenseScale,
    index: BM25 | None = None,
) -> builtins.list[tuple[int, float]]:
    """(index, score) of the best documents, best first, score >= min_score.

    The score is `memora.ranking.hybrid_rank`'s fusion of the dense cosine (on the model's
    measured scale) and BM25 coverage of the query, in [0, 1].
    """
    hits = hybrid_rank(
        query_vec, doc_vecs, query_text, doc_texts, top_k, min_score, scale=scale, index=index
    )
    return [(h.index, h.score) for h in hits]


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


def _iso(now: datetime | None) -> str:
    when = now or datetime.now(UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="seconds")


_CANDIDATE_MIN = CANDIDATE_MIN


def _closest(
    text: str,
    vec: npt.NDArray[np.float32],
    entries: Sequence[_Entry],
    keys: Sequence[str],
    matrix: npt.NDArray[np.float32],
) -> tuple[int | None, int | None]:
    """(index of a duplicate, index of a memory to update) among the entries, closest first."""
    key = normalise_text(text)
    same = next((i for i, k in enumerate(keys) if k == key), None)
    if same is not None or not entries:
        return same, None
    cosines = matrix @ vec
    near = np.nonzero(cosines >= _CANDIDATE_MIN)[0]
    update: int | None = None
    for i in near[np.argsort(-cosines[near], kind="stable")]:
        verdict = relation(text, entries[i].memory.text, float(cosines[i]))
        if verdict is Relation.DUPLICATE:
            return int(i), None
        if verdict is Relation.UPDATE and update is None:
            update = int(i)
    return None, update


def _check_user(user_id: int) -> int:
    if isinstance(user_id, bool) or not isinstance(user_id, int):
        raise TypeError(f"user_id must be an int, not {type(user_id).__name__}")
    return user_id


def _clean_text(text: str) -> str:
    cleaned = " ".join(text.split())
    if not cleaned:
        raise ValueError("a memory needs some text")
    if len(cleaned) > MAX_TEXT_CHARS:
        raise ValueError(f"a memory is at most {MAX_TEXT_CHARS} characters")
    return cleaned


@dataclass(frozen=True)
class _Entry:
    memory: Memory
    seq: int
    vector: npt.NDArray[np.float32]


@dataclass(frozen=True)
class _UserData:
    entries: tuple[_Entry, ...]  # oldest first
    vectors: npt.NDArray[np.float32]  # (n, dim), rows as entries

    @property
    def texts(self) -> list[str]:
        return [e.memory.text for e in self.entries]

    @cached_property
    def bm25(self) -> BM25:
        """The lexical index over the texts: built by each write, or by the first search after
        a load."""
        return BM25.from_texts(self.texts)

    def find(self, memory_id: str) -> _Entry | None:
        return next((e for e in self.entries if e.memory.id == memory_id), None)

    def with_entry(self, entry: _Entry) -> _UserData:
        """The same data with one memory replaced by a new version (same id)."""
        i = next(i for i, e in enumerate(self.entries) if e.memory.id == entry.memory.id)
        vectors = self.vectors.copy()
        vectors[i] = entry.vector
        return _UserData((*self.entries[:i], entry, *self.entries[i + 1 :]), vectors)

    def without(self, memory_id: str) -> _UserData:
        keep = [i for i, e in enumerate(self.entries) if e.memory.id != memory_id]
        return _UserData(tuple(self.entries[i] for i in keep), self.vectors[keep])


def _metadata(memory: Memory, seq: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "user_id": memory.user_id,
        "source": memory.source,
        "category": memory.category,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
        "seq": seq,
        "history": json.dumps(
            [[r.text, r.replaced_at, r.reason] for r in memory.history], ensure_ascii=False
        ),
    }
    # Chroma metadata values cannot be None: an absent key means "no origin".
    if memory.chat_id is not None:
        meta["chat_id"] = memory.chat_id
    if memory.message_id is not None:
        meta["message_id"] = memory.message_id
    return meta


def _from_record(memory_id: str, document: str, meta: dict[str, Any]) -> tuple[Memory, int]:
    history = tuple(Revision(str(t), str(at), str(why)) for t, at, why in json.loads(
        str(meta.get("history") or "[]")
    ))  # fmt: skip
    source = str(meta.get("source", "extracted"))
    chat_id = meta.get("chat_id")
    message_id = meta.get("message_id")
    memory = Memory(
        id=memory_id,
        user_id=int(meta["user_id"]),
        text=document,
        source="manual" if source == "manual" else "extracted",
        category=str(meta.get("category", "other")),
        created_at=str(meta.get("created_at", "")),
        updated_at=str(meta.get("updated_at", meta.get("created_at", ""))),
        chat_id=int(chat_id) if chat_id is not None else None,
        message_id=int(message_id) if message_id is not None else None,
        history=history,
    )
    return memory, int(meta.get("seq", 0))


class MemoryStore:
    """Each user's long-term memories in one persistent Chroma collection.

    Every public method takes the user id first; there is no way to search or list without one.
    Writes for one user are serialised by a per-user asyncio lock; all Chroma calls leave the
    event loop through :func:`run_blocking`.
    """

    def __init__(self, path: Path, embedder: Embedder, *, max_cached_users: int = 256) -> None:
        self.path = Path(path)
        self.embedder = embedder
        self.max_cached_users = max_cached_users
        self._scale = dense_scale_for(embedder.name)
        self._client: Any = None
        self._collection: Any = None
        self._locks: dict[int, asyncio.Lock] = {}
        self._cache: OrderedDict[int, _UserData] = OrderedDict()
        self._generation: dict[int, int] = {}

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

        self.path.mkdir(parents=True, exist_ok=True)
        client: Any = chromadb.PersistentClient(
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
                # A store made before deletions purged Chroma's log: switch it, then reopen
                # (the running segment keeps the settings it was opened with).
                collection.modify(configuration={"hnsw": dict(CHROMA_HNSW)})
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
            self._client, self._collection = await run_blocking(self._open_sync)

    async def close(self) -> None:
        client, self._client, self._collection = self._client, None, None
        self._cache.clear()
        if client is not None:
            await run_blocking(client.close)

    @property
    def _col(self) -> Any:
        if self._collection is None:
            raise StoreError("the memory store is not open")
        return self._collection

    def _lock(self, user_id: int) -> asyncio.Lock:
        return self._locks.setdefault(user_id, asyncio.Lock())

    # -- cache -------------------------------------------------------------------------------
    def _invalidate(self, user_id: int) -> None:
        self._generation[user_id] = self._generation.get(user_id, 0) + 1
        self._cache.pop(user_id, None)

    def _load_sync(self, user_id: int) -> _UserData:
        got = self._col.get(
            where={"user_id": user_id}, include=["documents", "metadatas", "embeddings"]
        )
        ids: list[str] = list(got["ids"])
        if not ids:
            return _UserData((), np.zeros((0, self.embedder.dim), dtype=np.float32))
        vectors = np.asarray(got["embeddings"], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        vectors = vectors / norms
        rows = []
        for i, (memory_id, doc, meta) in enumerate(
            zip(ids, got["documents"], got["metadatas"], strict=True)
        ):
            memory, seq = _from_record(memory_id, str(doc or ""), dict(meta or {}))
            rows.append((seq, memory.created_at, memory.id, memory, i))
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        entries = tuple(_Entry(m, seq, vectors[i]) for seq, _, _, m, i in rows)
        order = [i for *_, i in rows]
        return _UserData(entries, np.ascontiguousarray(vectors[order]))

    async def _data(self, user_id: int) -> _UserData:
        cached = self._cache.get(user_id)
        if cached is not None:
            self._cache.move_to_end(user_id)
            return cached
        generation = self._generation.get(user_id, 0)
        data = await run_blocking(self._load_sync, user_id)
        # A write that finished while we were loading makes what we read stale: don't keep it.
        if self._generation.get(user_id, 0) == generation:
            self._keep(user_id, data)
        return data

    async def _embed(
        self, texts: list[str], kind: Literal["query", "passage"]
    ) -> tuple[Vectors, int]:
        if kind == "passage":
            texts = [embedding_text(t) for t in texts]
        emb = await self.embedder.embed(texts, kind=kind)
        return np.asarray(emb.vectors, dtype=np.float32), int(emb.tokens)

    def _upsert_sync(self, entries: Sequence[_Entry]) -> None:
        self._col.upsert(
            ids=[e.memory.id for e in entries],
            embeddings=np.stack([e.vector for e in entries]),
            documents=[e.memory.text for e in entries],
            metadatas=[_metadata(e.memory, e.seq) for e in entries],
        )

    def _keep(self, user_id: int, data: _UserData) -> None:
        if self._collection is None:
            return
        self._cache[user_id] = data
        self._cache.move_to_end(user_id)
        while len(self._cache) > self.max_cached_users:
            self._cache.popitem(last=False)

    async def _write(self, user_id: int, entries: Sequence[_Entry], after: _UserData) -> None:
        """Upsert the changed memories, then cache the user's data as it now is (write-through:
        the next search does not reload the user). Any failure drops the cache instead."""
        try:
            if entries:
                await run_blocking(self._upsert_sync, entries)
        finally:
            self._invalidate(user_id)  # also makes a load that raced with this write stale
        # Writes happen after the reply: build the lexical index now, not on the next search.
        await run_blocking(lambda: after.bm25)
        self._keep(user_id, after)

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
    ) -> builtins.list[AddResult]:
        """Store several memories with one embedding call and one Chroma write.

        An item whose `replaces` names one of the user's memories supersedes it. Any other item
        is compared with the user's memories (and the items before it, see :func:`relation`): a
        duplicate is not stored; the same fact with other numbers supersedes the older memory;
        anything else is added.
        """
        _check_user(user_id)
        if not items:
            return []
        texts = [_clean_text(it.text) for it in items]
        stamp = _iso(now)
        async with self._lock(user_id):
            data = await self._data(user_id)
            vectors, tokens = await self._embed(texts, "passage")
            entries: list[_Entry] = list(data.entries)
            matrix = data.vectors
            next_seq = max((e.seq for e in entries), default=0) + 1
            changed: dict[str, int] = {}  # memory id → index in entries
            keys = [normalise_text(e.memory.text) for e in entries]
            results: list[AddResult] = []
            for n, (item, text) in enumerate(zip(items, texts, strict=True)):
                vec = vectors[n]
                tok = tokens if n == 0 else 0
                target = (
                    next((i for i, e in enumerate(entries) if e.memory.id == item.replaces), None)
                    if item.replaces is not None
                    else None
                )
                explicit = target is not None
                if target is None:
                    dup, target = _closest(text, vec, entries, keys, matrix)
                    if dup is not None:
                        results.append(AddResult("duplicate", entries[dup].memory, None, tok))
                        continue
                elif normalise_text(text) == keys[target]:
                    results.append(AddResult("duplicate", entries[target].memory, None, tok))
                    continue
                if target is not None:
                    old = entries[target].memory
                    keep_category = not explicit and old.category != "other"
                    memory = replace(
                        old,
                        text=text,
                        source=item.source,
                        category=old.category if keep_category else item.category,
                        updated_at=stamp,
                        history=(*old.history, Revision(old.text, stamp, "updated")),
                        chat_id=item.chat_id if item.chat_id is not None else old.chat_id,
                        message_id=(
                            item.message_id if item.message_id is not None else old.message_id
                        ),
                    )
                    entries[target] = _Entry(memory, entries[target].seq, vec)
                    keys[target] = normalise_text(text)
                    matrix = matrix.copy()
                    matrix[target] = vec
                    changed[memory.id] = target
                    results.append(AddResult("superseded", memory, old, tok))
                    continue
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
                )
                entries.append(_Entry(memory, next_seq, vec))
                keys.append(normalise_text(text))
                next_seq += 1
                matrix = np.vstack([matrix, vec[None, :]])
                changed[memory.id] = len(entries) - 1
                results.append(AddResult("added", memory, None, tok))
            after = _UserData(tuple(entries), np.ascontiguousarray(matrix, dtype=np.float32))
            await self._write(user_id, [entries[i] for i in changed.values()], after)
        return results

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
        _check_user(user_id)
        text = _clean_text(new_text)
        stamp = _iso(now)
        async with self._lock(user_id):
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
            vectors, _ = await self._embed([text], "passage")
            memory = replace(
                old,
                text=text,
                category=category or old.category,
                updated_at=stamp,
                history=(*old.history, Revision(old.text, stamp, reason)),
                chat_id=chat_id if chat_id is not None else old.chat_id,
                message_id=message_id if message_id is not None else old.message_id,
            )
            new_entry = _Entry(memory, entry.seq, vectors[0])
            await self._write(user_id, [new_entry], data.with_entry(new_entry))
            return memory

    async def revert(
        self, user_id: int, memory_id: str, *, now: datetime | None = None
    ) -> Memory | None:
        """Undo the last change: the last text in the history comes back.

        The text being replaced goes to the history (reason "reverted"), so nothing is lost and
        a second revert undoes the first. None if there is no such memory or nothing to undo.
        """
        _check_user(user_id)
        stamp = _iso(now)
        async with self._lock(user_id):
            data = await self._data(user_id)
            entry = data.find(memory_id)
            if entry is None or not entry.memory.history:
                return None
            old = entry.memory
            previous = old.history[-1]
            vectors, _ = await self._embed([previous.text], "passage")
            memory = replace(
                old,
                text=previous.text,
                updated_at=stamp,
                history=(*old.history[:-1], Revision(old.text, stamp, "reverted")),
            )
            new_entry = _Entry(memory, entry.seq, vectors[0])
            await self._write(user_id, [new_entry], data.with_entry(new_entry))
            return memory

    async def delete(self, user_id: int, memory_id: str) -> bool:
        """Delete one of the user's memories; False if the user has no memory with that id."""
        _check_user(user_id)
        where = {"user_id": user_id}

        def _delete() -> bool:
            found = self._col.get(ids=[memory_id], where=where, include=[])
            if not found["ids"]:
                return False
            self._col.delete(ids=[memory_id], where=where)
            return True

        async with self._lock(user_id):
            cached = self._cache.get(user_id)  # current: every write of this user holds the lock
            try:
                deleted = await run_blocking(_delete)
            finally:
                self._invalidate(user_id)
            if cached is not None:
                self._keep(user_id, cached.without(memory_id))
            if deleted:
                await run_blocking(vacuum_chroma, self.path)
            return deleted

    async def delete_user(self, user_id: int) -> int:
        """Delete every memory of the user (one filtered delete); returns how many there were."""
        _check_user(user_id)
        where = {"user_id": user_id}

        def _delete_all() -> int:
            n = len(self._col.get(where=where, include=[])["ids"])
            self._col.delete(where=where)
            vacuum_chroma(self.path)  # the words must be gone from the file, not just unlinked
            return n

        async with self._lock(user_id):
            try:
                return await run_blocking(_delete_all)
            finally:
                self._invalidate(user_id)

    # -- reads -------------------------------------------------------------------------------
    async def list(self, user_id: int) -> list[Memory]:
        """The user's memories, oldest first (a stable numbering for /memories and /forget n)."""
        _check_user(user_id)
        return [e.memory for e in (await self._data(user_id)).entries]

    async def get(self, user_id: int, memory_id: str) -> Memory | None:
        _check_user(user_id)
        entry = (await self._data(user_id)).find(memory_id)
        return entry.memory if entry else None

    async def count(self, user_id: int) -> int:
        _check_user(user_id)
        cached = self._cache.get(user_id)
        if cached is not None:
            return len(cached.entries)
        where = {"user_id": user_id}
        got = await run_blocking(lambda: self._col.get(where=where, include=[]))
        return len(got["ids"])

    async def search(
        self,
        user_id: int,
        query: str,
        *,
        top_k: int,
        min_score: float,
        extra_context: str | None = None,
    ) -> SearchResult:
        """The user's memories most relevant to the query, best first, score >= min_score.

        With `extra_context` (the previous turn), the query is also ranked together with that
        context and each memory keeps its better score, so "那第二個適合我嗎？" still finds what
        the last turn was about.
        """
        _check_user(user_id)
        query = " ".join(query.split())
        if not query or top_k <= 0:
            return SearchResult([], 0)
        data = await self._data(user_id)
        if not data.entries:
            return SearchResult([], 0)
        variants = [query]
        context = " ".join((extra_context or "").split())
        if context:
            variants.append(f"{context}\n{query}")
        qvecs, tokens = await self._embed(variants, "query")
        best: dict[int, float] = {}
        texts = data.texts
        for qtext, qvec in zip(variants, qvecs, strict=True):
            ranked = _rank(
                qvec,
                data.vectors,
                qtext,
                texts,
                top_k,
                min_score,
                scale=self._scale,
                index=data.bm25,
            )
            for i, score in ranked:
                best[i] = max(score, best.get(i, score))
        ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
        hits = [SearchHit(data.entries[i].memory, score) for i, score in ranked]
        return SearchResult(hits, tokens)

    async def similar(self, user_id: int, text: str, k: int = 5) -> builtins.list[Memory]:
        """The user's k memories closest to a text, best first, with no threshold: the memories
        a new fact may repeat or update (context for the extractor)."""
        _check_user(user_id)
        text = " ".join(text.split())
        data = await self._data(user_id)
        if not text or not data.entries or k <= 0:
            return []
        qvecs, _ = await self._embed([text], "query")
        ranked = _rank(
            qvecs[0],
            data.vectors,
            text,
            data.texts,
            k,
            float("-inf"),
            scale=self._scale,
            index=data.bm25,
        )
        return [data.entries[i].memory for i, _ in ranked]
