"""Writing an extraction's accepted memories and backfilled terms to the user's store."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import datetime

from memora.extraction.schema import EXISTING_ID, ExtractionOutcome, listed_number
from memora.longterm.memories import (
    MAX_SITUATIONS,
    AddResult,
    Memory,
    NewMemory,
    clean_terms,
)
from memora.longterm.memory_store import MemoryStore
from memora.longterm.timeline import last_day

_DATE = re.compile(r"\d{4}(-\d{2}(-\d{2})?)?")


def learner_date(value: str | None) -> str | None:
    """A date the model wrote (YYYY-MM-DD, YYYY-MM or YYYY), or None for anything else."""
    text = (value or "").strip()
    return text if _DATE.fullmatch(text) and last_day(text) is not None else None


log = logging.getLogger(__name__)


async def apply(
    store: MemoryStore,
    user_id: int,
    outcome: ExtractionOutcome,
    existing: Sequence[Memory],
    *,
    chat_id: int | None,
    message_id: int | None,
    now: datetime | None = None,
    within: int | None = None,
) -> list[AddResult]:
    """Store the accepted memories in one batch; `existing` is the list shown to the model.

    A valid `replaces` (an id m1, m2… of the list shown, not used twice) supersedes that memory;
    otherwise (another list's id, a bare number: logged), or if that memory is gone meanwhile,
    the item is added and the store drops duplicates. With `within` (a group's id), only that
    group's memories are matched (MemoryWriter.add_many).
    """
    items: list[NewMemory] = []
    used: set[int] = set()
    shown = len(existing) if outcome.listed is None else min(outcome.listed, len(existing))
    for memory in outcome.memories:
        target: str | None = None
        n = listed_number(memory.replaces, EXISTING_ID, shown)
        if memory.replaces is not None and n is None:
            log.warning("ignored replaces=%r: the call listed m1-m%d", memory.replaces, shown)
        if n is not None and n not in used:
            used.add(n)
            target = existing[n - 1].id
        items.append(
            NewMemory(
                text=memory.text,
                source="extracted",
                category=memory.category,
                chat_id=chat_id,
                message_id=message_id,
                replaces=target,
                terms=clean_terms(memory.terms),
                situations=clean_terms(memory.situations, MAX_SITUATIONS),
                since=learner_date(memory.since),
                until=learner_date(memory.until),
            )
        )
    if not items:
        return []
    return await store.writer.add_many(user_id, items, now=now, within=within)


async def apply_terms(
    store: MemoryStore, user_id: int, outcome: ExtractionOutcome, needs_terms: Sequence[Memory]
) -> tuple[list[Memory], int]:
    """Store the backfilled terms; `needs_terms` is the list shown to the call (the same user's
    memories, so a number can only ever reach one of them). Returns the memories that got
    terms and the embedding tokens (see :meth:`MemoryWriter.add_terms` for what is skipped)."""
    updates = {
        needs_terms[n - 1].id: (needs_terms[n - 1].text, words)
        for n, words in outcome.terms_for.items()
    }
    if not updates:
        return [], 0
    return await store.writer.add_terms(user_id, updates)
