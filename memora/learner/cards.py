"""Spaced-review cards as stored: which are due, grading one (FSRS, memora.learner.review), and the
checks that make a tap safe (whose card, still there, not graded twice)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiosqlite

from memora.errors import AlreadyGraded, CardGone, NotYourCard
from memora.learner import review
from memora.learner.tables import LearnerTables, as_datetime


@dataclass(frozen=True)
class ReviewCard:
    """A card with what it shows: a word to recall, or a wrong sentence to fix."""

    id: int
    user_id: int
    kind: str  # "word" | "mistake"
    state: str
    due: datetime
    reps: int
    front: str
    back: str


@dataclass(frozen=True)
class Graded:
    card: ReviewCard
    grade: str
    due: datetime


async def insert_card(
    db: aiosqlite.Connection, user_id: int, kind: str, ref_id: int, now: datetime
) -> None:
    new = review.new_card(now)
    await db.execute(
        "INSERT INTO learner_cards(user_id, kind, ref_id, fsrs, due, created_at) "
        "VALUES (?,?,?,?,?,?)",
        (user_id, kind, ref_id, new.state, review.iso(new.due), review.iso(now)),
    )


class CardStore(LearnerTables):
    """Review cards: due, shown, graded."""

    _CARD_SQL = (
        "SELECT c.id, c.user_id, c.kind, c.fsrs, c.due, c.reps, "
        "COALESCE(w.term, m.original), COALESCE(w.meaning, m.corrected), "
        "COALESCE(w.example, m.reason) FROM learner_cards c "
        "LEFT JOIN learner_words w ON c.kind='word' AND w.id=c.ref_id "
        "LEFT JOIN learner_mistakes m ON c.kind='mistake' AND m.id=c.ref_id "
    )

    @staticmethod
    def _card(row: Any) -> ReviewCard:
        kind, a, b, c = row[2], row[6] or "", row[7] or "", row[8] or ""
        if kind == "word":
            front = f"What does “{a}” mean?"
            back = f"{a} — {b}" + (f"\nExample: {c}" if c else "")
        else:
            front = f"Fix this sentence:\n“{a}”"
            back = f"✔ {b}" + (f"\nWhy: {c}" if c else "")
        return ReviewCard(
            int(row[0]), int(row[1]), kind, row[3], as_datetime(row[4]), int(row[5]), front, back
        )

    async def due_cards(self, user_id: int, now: datetime, limit: int = 50) -> list[ReviewCard]:
        rows = await self._rows(
            self._CARD_SQL + "WHERE c.user_id=? AND c.due<=? ORDER BY c.due, c.id LIMIT ?",
            (user_id, review.iso(now), limit),
        )
        return [self._card(r) for r in rows]

    async def due_count(self, user_id: int, now: datetime) -> int:
        row = await self._one(
            "SELECT COUNT(*) FROM learner_cards WHERE user_id=? AND due<=?",
            (user_id, review.iso(now)),
        )
        return int(row[0]) if row else 0

    async def next_due(self, user_id: int) -> datetime | None:
        row = await self._one("SELECT MIN(due) FROM learner_cards WHERE user_id=?", (user_id,))
        return as_datetime(row[0]) if row and row[0] else None

    async def card(self, user_id: int, card_id: int) -> ReviewCard:
        """The user's card, or CardGone / NotYourCard."""
        row = await self._one(self._CARD_SQL + "WHERE c.id=?", (card_id,))
        if row is None:
            raise CardGone(card_id)
        card = self._card(row)
        if card.user_id != user_id:
            raise NotYourCard(card_id)
        return card

    async def grade(
        self, user_id: int, card_id: int, grade: str, now: datetime, *, reps: int | None = None
    ) -> Graded:
        """Grade the user's card with FSRS and store its new state, in one transaction.

        `reps` is how many reviews the card had when it was shown: a different count means it
        was graded meanwhile (AlreadyGraded), so a second tap never grades it twice."""
        card = await self.card(user_id, card_id)
        if reps is not None and card.reps != reps:
            raise AlreadyGraded(card_id)
        after = review.review(card.state, grade, now)
        await self._tx(
            [
                (
                    "UPDATE learner_cards SET fsrs=?, due=?, reps=reps+1 "
                    "WHERE id=? AND user_id=? AND reps=?",
                    (after.state, review.iso(after.due), card_id, user_id, card.reps),
                ),
                (
                    "INSERT INTO learner_reviews(user_id, card_id, rating, at) VALUES (?,?,?,?)",
                    (user_id, card_id, int(review.GRADES[grade]), review.iso(now)),
                ),
            ]
        )
        return Graded(card, grade, after.due)

    async def cards(self, user_id: int) -> list[ReviewCard]:
        rows = await self._rows(self._CARD_SQL + "WHERE c.user_id=? ORDER BY c.id", (user_id,))
        return [self._card(r) for r in rows]

    async def card_parts(self, user_id: int) -> list[tuple[ReviewCard, str, str, str]]:
        """Every card of the user, newest first, with what it is made of: (card, term or wrong
        sentence, meaning or correction, example or reason)."""
        rows = await self._rows(self._CARD_SQL + "WHERE c.user_id=? ORDER BY c.id DESC", (user_id,))
        return [(self._card(r), r[6] or "", r[7] or "", r[8] or "") for r in rows]
