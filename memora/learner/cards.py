"""Spaced-review cards as the learner meets them: the question and answer each shows, which are
due, grading one (FSRS, memora.learner.review), and the checks that make a tap safe (whose card,
still there, not graded twice). Stored by memora.storage.learner_cards."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memora.errors import AlreadyGraded, CardGone, NotYourCard
from memora.learner import review
from memora.storage.learner_cards import CardQueries, CardRow


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


def shown(row: CardRow) -> ReviewCard:
    """The card as the learner sees it."""
    a, b, c = row.first, row.second, row.third
    if row.kind == "word":
        front = f"What does “{a}” mean?"
        back = f"{a} — {b}" + (f"\nExample: {c}" if c else "")
    else:
        front = f"Fix this sentence:\n“{a}”"
        back = f"✔ {b}" + (f"\nWhy: {c}" if c else "")
    return ReviewCard(row.id, row.user_id, row.kind, row.state, row.due, row.reps, front, back)


class Cards:
    """Review cards: due, shown, graded."""

    def __init__(self, rows: CardQueries) -> None:
        self.rows = rows

    async def due_cards(self, user_id: int, now: datetime, limit: int = 50) -> list[ReviewCard]:
        return [shown(r) for r in await self.rows.due(user_id, now, limit)]

    async def due_count(self, user_id: int, now: datetime) -> int:
        return await self.rows.due_count(user_id, now)

    async def next_due(self, user_id: int) -> datetime | None:
        return await self.rows.next_due(user_id)

    async def card(self, user_id: int, card_id: int) -> ReviewCard:
        """The user's card, or CardGone / NotYourCard."""
        row = await self.rows.get(card_id)
        if row is None:
            raise CardGone(card_id)
        if row.user_id != user_id:
            raise NotYourCard(card_id)
        return shown(row)

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
        await self.rows.save_review(
            card_id, user_id, card.reps, (after.state, after.due), int(review.GRADES[grade]), now
        )
        return Graded(card, grade, after.due)

    async def cards(self, user_id: int) -> list[ReviewCard]:
        return [shown(r) for r in await self.rows.of_user(user_id)]

    async def card_parts(self, user_id: int) -> list[tuple[ReviewCard, str, str, str]]:
        """Every card of the user, newest first, with what it is made of: (card, term or wrong
        sentence, meaning or correction, example or reason)."""
        rows = await self.rows.of_user(user_id, newest_first=True)
        return [(shown(r), r.first, r.second, r.third) for r in rows]
