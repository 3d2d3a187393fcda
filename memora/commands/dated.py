"""How /memories and /search show a memory's dates (memora.longterm.timeline)."""

from __future__ import annotations

from datetime import date

from memora.i18n import _
from memora.longterm import Memory
from memora.longterm.timeline import day, ended


def dates_label(memory: Memory, today: date) -> str:
    """'📌 learned 2026-03-01 · since 2025 · until 2026-03-20 (past)' in the caller's language:
    when it was learned, when it became true and stops, and whether it is over or pinned."""
    parts = [_("learned {date}").format(date=day(memory.created_at))]
    if memory.since:
        parts.append(_("since {date}").format(date=memory.since))
    if memory.until:
        parts.append(_("until {date}").format(date=memory.until))
    if ended(memory, today):
        parts.append(_("past"))
    return ("📌 " if memory.pinned_at else "") + " · ".join(parts)
