"""Time in long-term memory: which facts are over, which are pinned, what a question about the
past brings back, and how a memory's dates are shown.

A memory is *over* after its ``until`` day (the learner's own date, e.g. the last day of a trip);
a superseded text lives in the memory's history with the day it stopped. Neither is deleted:
both stay out of the reply's context unless the learner asks about the past
(:func:`asks_about_past`, a pattern check of the message: no model call), and stay in
/memories. Pinned memories always go first (:func:`pins_first`).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from datetime import date

from memora.longterm.memories import Memory

__all__ = [
    "MAX_PAST_LINES",
    "asks_about_past",
    "day",
    "ended",
    "last_day",
    "newest_ended",
    "past_notes",
    "pins_first",
]

# Memories whose past a question about it adds to the context (newest first): a bounded cost.
MAX_PAST_LINES = 8

# A question about how things were: "before", "used to", "previous", "last year", "以前", "之前",
# "原本"... Words, not a model: it runs on every message.
_PAST = re.compile(
    r"\b(before|used to|previous(ly)?|formerly|originally|in the past|"
    r"last (year|month|week|time|trip)|back then|was (my|i)|were my|did i)\b"
    r"|以前|之前|原本|原來|原来|過去|过去|從前|从前|先前|當初|当初|曾經|曾经|上次|去年|"
    r"本來|本来|那時|那时",
    re.IGNORECASE,
)


def asks_about_past(message: str) -> bool:
    """Whether the message asks about how things were (then superseded and ended facts, with
    their dates, join the context)."""
    return _PAST.search(message) is not None


def last_day(value: str) -> date | None:
    """The last day a learner's date covers: 2026-03-20 itself, the last day of 2026-03, the
    last day of 2026; None for anything else."""
    text = value.strip()
    try:
        if len(text) == 4:
            return date(int(text), 12, 31)
        if len(text) == 7:
            year, month = int(text[:4]), int(text[5:7])
            return date(year, month, calendar.monthrange(year, month)[1])
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


def ended(memory: Memory, today: date) -> bool:
    """Whether the fact is over: its `until` day is before `today` (the learner's)."""
    if memory.until is None:
        return False
    last = last_day(memory.until)
    return last is not None and last < today


def day(stamp: str | None) -> str:
    """A stored timestamp or learner's date as YYYY-MM-DD (or as much of it as there is)."""
    return (stamp or "")[:10]


def pins_first(memories: Sequence[Memory]) -> list[Memory]:
    """The pinned memories, newest pin first."""
    pinned = [m for m in memories if m.pinned_at]
    return sorted(pinned, key=lambda m: m.pinned_at or "", reverse=True)


def newest_ended(memories: Sequence[Memory], today: date) -> Memory | None:
    """The fact that ended most recently and that the tutor has not asked about yet."""
    over = [m for m in memories if ended(m, today) and m.asked_at is None]
    return max(over, key=lambda m: last_day(m.until or "") or date.min, default=None)


def past_notes(
    memories: Sequence[Memory], today: date, origin_chat: int | None = None
) -> dict[str, str]:
    """What was true before, for a question about the past, by memory id (newest first, at
    most MAX_PAST_LINES memories): each superseded text with the day it stopped, and the fact
    itself when it is over, e.g. "(until 2026-02-20, no longer true) The user's level is B1".
    With `origin_chat` (a group), only earlier texts said in that chat."""
    dated: list[tuple[str, str, str]] = []  # (day, memory id, note)
    for memory in memories:
        for revision in memory.history:
            elsewhere = origin_chat is not None and revision.chat_id != origin_chat
            if revision.reason != "reverted" and not elsewhere:
                when = day(revision.replaced_at)
                dated.append((when, memory.id, f"(until {when}, no longer true) {revision.text}"))
        if ended(memory, today):
            when = day(memory.until)
            dated.append((when, memory.id, f"(until {when}, no longer true) {memory.text}"))
    dated.sort(key=lambda item: item[0], reverse=True)
    notes: dict[str, list[str]] = {}
    for _when, memory_id, note in dated:
        if memory_id in notes or len(notes) < MAX_PAST_LINES:
            notes.setdefault(memory_id, []).append(note)
    return {memory_id: "; ".join(parts) for memory_id, parts in notes.items()}
