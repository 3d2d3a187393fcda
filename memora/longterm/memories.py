"""What a long-term memory is, and how it is stored as a Chroma record.

A memory is one short statement about one user. Its earlier texts are kept in ``history``
(see :func:`revised`), so an update or an undo never loses what the learner said before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from memora.errors import MemoryNotFound, StoreError

__all__ = [
    "MAX_MEMORY_CHARS",
    "MAX_SITUATIONS",
    "MAX_TERMS",
    "MAX_TERM_CHARS",
    "TIME_KEYS",
    "AddAction",
    "AddResult",
    "Memory",
    "MemoryNotFound",
    "NewMemory",
    "Revision",
    "SearchHit",
    "SearchResult",
    "SearchWords",
    "Source",
    "StoreError",
    "check_user",
    "clean_terms",
    "clean_text",
    "from_record",
    "indexed",
    "indexed_text",
    "revised",
    "to_metadata",
]

Source = Literal["extracted", "manual"]
AddAction = Literal["added", "duplicate", "superseded"]

# The one length limit of a memory, whoever writes it (/remember, extraction, the store): a memory
# is a short statement about the learner, not a pasted text.
MAX_MEMORY_CHARS = 500

# A memory's time fields, each stored as its own metadata key when set.
TIME_KEYS = ("since", "until", "pinned_at", "asked_at")

# Search terms the extraction call writes with a memory (index-time expansion): a few
# short words or phrases, in English and in the learner's language, so a message in the other
# language shares words with the memory. More or longer ones are cut: they are an index, not text.
MAX_TERMS = 12
# Its situations (extraction.SITUATIONS_DESCRIPTION): 2-4 everyday requests where the fact matters
# though they never name it, each in both languages.
MAX_SITUATIONS = 8
MAX_TERM_CHARS = 40


@dataclass(frozen=True)
class Revision:
    """A text a memory had before it was replaced, when, why, and the chat it came from then
    (None: not known, a revision stored before origins were kept)."""

    text: str
    replaced_at: str
    reason: str
    chat_id: int | None = None


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
    # Search terms indexed with the text (lexically and in its vector); not shown by /memories.
    # They belong to this text: a new text (update, undo) comes with its own terms or none.
    terms: tuple[str, ...] = ()
    # Situations, indexed with the terms (same rules): requests where the fact matters.
    situations: tuple[str, ...] = ()
    # Time (memora.longterm.timeline): when it became true and when it stops or stopped, as the
    # learner said (YYYY-MM-DD, or YYYY-MM); None: not said. `created_at` is when it was learned.
    since: str | None = None
    until: str | None = None
    pinned_at: str | None = None  # /pin: always in the reply's context; None: not pinned
    asked_at: str | None = None  # when the tutor was told to ask how an ended fact went


@dataclass(frozen=True)
class SearchWords:
    """What the extraction call writes to index a memory by: its terms and its situations."""

    terms: tuple[str, ...] = ()
    situations: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.terms or self.situations)


@dataclass(frozen=True)
class NewMemory:
    """A memory to add (see :meth:`memora.longterm.writes.MemoryWriter.add_many`).

    `replaces` names a memory of the same user that this one updates or contradicts: it is then
    superseded (its text goes to its history) instead of a new memory being added.
    """

    text: str
    source: Source = "extracted"
    category: str = "other"
    chat_id: int | None = None
    message_id: int | None = None
    replaces: str | None = None
    terms: tuple[str, ...] = ()
    situations: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None


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


def revised(
    old: Memory,
    text: str,
    stamp: str,
    reason: str,
    *,
    history: tuple[Revision, ...] | None = None,
    **changes: Any,
) -> Memory:
    """`old` with a new text, the old text kept as the last revision of `history` (by default
    its own history). Every text change goes through here: update, supersede and undo."""
    kept = old.history if history is None else history
    return replace(
        old,
        text=text,
        updated_at=stamp,
        history=(*kept, Revision(old.text, stamp, reason, old.chat_id)),
        **changes,
    )


def check_user(user_id: int) -> int:
    """The user id, or TypeError: a memory always names its user with an int."""
    if isinstance(user_id, bool) or not isinstance(user_id, int):
        raise TypeError(f"user_id must be an int, not {type(user_id).__name__}")
    return user_id


def clean_text(text: str) -> str:
    """The text with its whitespace collapsed, or ValueError if empty or too long."""
    cleaned = " ".join(text.split())
    if not cleaned:
        raise ValueError("a memory needs some text")
    if len(cleaned) > MAX_MEMORY_CHARS:
        raise ValueError(f"a memory is at most {MAX_MEMORY_CHARS} characters")
    return cleaned


def clean_terms(terms: Sequence[str], limit: int = MAX_TERMS) -> tuple[str, ...]:
    """At most `limit` distinct terms (case-insensitively), whitespace collapsed, each at most
    MAX_TERM_CHARS characters; empty ones dropped. Situations are cleaned the same way, with
    `limit` MAX_SITUATIONS."""
    out: list[str] = []
    seen: set[str] = set()
    for term in terms:
        cleaned = " ".join(str(term).split())[:MAX_TERM_CHARS].strip()
        key = cleaned.casefold()
        if cleaned and key not in seen:
            seen.add(key)
            out.append(cleaned)
        if len(out) == limit:
            break
    return tuple(out)


def indexed_text(text: str, terms: Sequence[str] = (), situations: Sequence[str] = ()) -> str:
    """What is indexed for a memory, lexically and as a vector: its text, then its search terms
    and situations in parentheses."""
    words = [*terms, *situations]
    return f"{text} ({' '.join(words)})" if words else text


def indexed(memory: Memory) -> str:
    """:func:`indexed_text` of a stored memory."""
    return indexed_text(memory.text, memory.terms, memory.situations)


def to_metadata(memory: Memory, seq: int) -> dict[str, Any]:
    """The Chroma metadata of a memory (`seq` orders a user's memories, oldest first)."""
    meta: dict[str, Any] = {
        "user_id": memory.user_id,
        "source": memory.source,
        "category": memory.category,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
        "seq": seq,
        "history": json.dumps(
            [[r.text, r.replaced_at, r.reason, r.chat_id] for r in memory.history],
            ensure_ascii=False,
        ),
    }
    if memory.terms:  # absent: no terms (a manual memory, or one stored before terms existed)
        meta["terms"] = json.dumps(list(memory.terms), ensure_ascii=False)
    if memory.situations:  # absent: none (stored before situations existed, or not written)
        meta["situations"] = json.dumps(list(memory.situations), ensure_ascii=False)
    for key in TIME_KEYS:  # absent: not said, not pinned, not asked
        value = getattr(memory, key)
        if value is not None:
            meta[key] = value
    # Chroma metadata values cannot be None: an absent key means "no origin".
    if memory.chat_id is not None:
        meta["chat_id"] = memory.chat_id
    if memory.message_id is not None:
        meta["message_id"] = memory.message_id
    return meta


def _optional(meta: dict[str, Any], key: str) -> str | None:
    value = meta.get(key)
    return None if value is None else str(value)


def _origin(rest: list[Any]) -> int | None:
    """A revision's chat, from its stored list (absent or null in revisions kept before)."""
    return int(rest[0]) if rest and rest[0] is not None else None


def from_record(memory_id: str, document: str, meta: dict[str, Any]) -> tuple[Memory, int]:
    """The memory and its `seq` from one Chroma record."""
    history = tuple(
        Revision(str(t), str(at), str(why), _origin(origin))
        for t, at, why, *origin in json.loads(str(meta.get("history") or "[]"))
    )
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
        terms=clean_terms(json.loads(str(meta.get("terms") or "[]"))),
        situations=clean_terms(json.loads(str(meta.get("situations") or "[]")), MAX_SITUATIONS),
        since=_optional(meta, "since"),
        until=_optional(meta, "until"),
        pinned_at=_optional(meta, "pinned_at"),
        asked_at=_optional(meta, "asked_at"),
    )
    return memory, int(meta.get("seq", 0))
