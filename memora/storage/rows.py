"""The rows the short-term store reads and writes, as values: messages, chats, turns and what
they cost, the extraction log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from memora.clock import utcnow
from memora.types import ChatMessage


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    role: str
    content: str
    user_id: int | None
    user_name: str
    created_at: str


@dataclass(frozen=True)
class ChatRow:
    chat_id: int
    kind: str
    title: str
    summary: str
    summarized_count: int
    last_context: list[ChatMessage]
    last_summary_error: str


@dataclass(frozen=True)
class TurnUsage:
    counted_input: int = 0
    actual_input: int = 0
    output_tokens: int = 0
    summary_tokens: int = 0
    extraction_tokens: int = 0
    embedding_tokens: int = 0
    memories_used: int = 0
    transcription_tokens: int = 0  # a voice message's transcription (token-billed models)
    transcription_seconds: int = 0  # … or its audio length (duration-billed models)
    # Of each call kind's tokens above: the input the provider served from its prompt cache,
    # and the output the model spent reasoning (both already counted in the totals)
    reply_cached: int = 0
    reply_reasoning: int = 0
    summary_cached: int = 0
    summary_reasoning: int = 0
    extraction_cached: int = 0
    extraction_reasoning: int = 0

    @property
    def total(self) -> int:
        return (
            self.actual_input
            + self.output_tokens
            + self.summary_tokens
            + self.extraction_tokens
            + self.embedding_tokens
            + self.transcription_tokens
        )


@dataclass(frozen=True)
class ModeRow:
    """The lesson mode a chat is in (placement, a role-play scene, practice; memora.modes reads
    `state`): whose it is, how far it got, and when it started (which also names this run of it:
    work for an earlier run never writes over a later one)."""

    chat_id: int
    user_id: int
    kind: str
    step: int
    state: dict[str, Any]
    started_at: str
    updated_at: str = field(default_factory=utcnow)


@dataclass(frozen=True)
class NewTurn:
    """Everything one answered turn writes, in one transaction."""

    chat_id: int
    user_id: int | None
    user_name: str
    user_text: str
    reply_text: str
    context: list[ChatMessage]
    usage: TurnUsage
    external_id: int | None = None
    update_id: int | None = None  # the platform update it answers: answered once, ever
    at: str = field(default_factory=utcnow)
    mode: ModeRow | None = None  # the chat's lesson mode as this turn left it (None: unchanged)


@dataclass(frozen=True)
class ExtractionLog:
    user_id: int
    chat_id: int | None
    at: str
    status: str
    raw: str
    detail: str
    tokens: int


USAGE_COLS = tuple(f.name for f in fields(TurnUsage))  # the turns table's usage columns
ADD_USAGE = f"UPDATE turns SET {', '.join(f'{c} = {c} + ?' for c in USAGE_COLS)} WHERE id=?"


def usage_values(usage: TurnUsage) -> tuple[int, ...]:
    return tuple(getattr(usage, c) for c in USAGE_COLS)


class SharedChatLock(Protocol):
    async def release(self) -> None: ...


@dataclass(frozen=True)
class Erased:
    """What was deleted since a turn began, as far as that turn is concerned: whether its
    speaker asked to be forgotten, which other members of its chat did (their lines and the
    summary must not be stored again), and which of the speaker's memories were forgotten (the
    context's memory block may quote them)."""

    speaker: bool = False
    members: frozenset[int] = frozenset()
    memories: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return self.speaker or bool(self.members) or bool(self.memories)


class ForgottenMeanwhile(Exception):
    """The turn's speaker was forgotten while the turn ran: nothing of it is stored."""


Scrub = Callable[[Erased], list[ChatMessage]]
"""A turn's context without what was deleted while the turn ran."""
