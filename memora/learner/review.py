"""Spaced review scheduled by FSRS (the `fsrs` package, the algorithm Anki uses).

A card's whole FSRS state is kept as the package's own JSON (``Card.to_json``) beside a ``due``
column the store can index; nothing here computes an interval itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from fsrs import Card, Rating, Scheduler

from memora.i18n import _, ngettext

GRADES: dict[str, Rating] = {
    "again": Rating.Again,
    "hard": Rating.Hard,
    "good": Rating.Good,
    "easy": Rating.Easy,
}
GRADE_ALIASES = {"1": "again", "2": "hard", "3": "good", "4": "easy"}

_SCHEDULER = Scheduler()


def utc(now: datetime) -> datetime:
    """fsrs insists on datetimes in UTC."""
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def parse_grade(word: str) -> str | None:
    """'Good', 'g', '3' → 'good'; None if it is not a grade."""
    key = word.strip().lower()
    key = GRADE_ALIASES.get(key, key)
    if key in GRADES:
        return key
    matches = [g for g in GRADES if g.startswith(key)] if key else []
    return matches[0] if len(matches) == 1 else None


@dataclass(frozen=True)
class Scheduled:
    """A card's FSRS state after creation or a review."""

    state: str  # Card.to_json()
    due: datetime


def new_card(now: datetime) -> Scheduled:
    card = Card(card_id=0, due=utc(now))
    return Scheduled(card.to_json(), card.due)


def review(state: str, grade: str, now: datetime) -> Scheduled:
    card, _log = _SCHEDULER.review_card(Card.from_json(state), GRADES[grade], utc(now))
    return Scheduled(card.to_json(), card.due)


def retrievability(state: str, now: datetime) -> float:
    """The predicted probability of recalling the card now (0 for a card never reviewed)."""
    return float(_SCHEDULER.get_card_retrievability(Card.from_json(state), utc(now)))


def until(due: datetime, now: datetime) -> str:
    """'in 3 days', 'in 10 minutes', 'now'."""
    seconds = (utc(due) - utc(now)).total_seconds()
    if seconds <= 0:
        return _("now")
    if seconds >= 86400:
        n = round(seconds / 86400)
        return ngettext("in {n} day", "in {n} days", n).format(n=n)
    if seconds >= 3600:
        n = round(seconds / 3600)
        return ngettext("in {n} hour", "in {n} hours", n).format(n=n)
    if seconds >= 60:
        n = round(seconds / 60)
        return ngettext("in {n} minute", "in {n} minutes", n).format(n=n)
    return _("in under a minute")
