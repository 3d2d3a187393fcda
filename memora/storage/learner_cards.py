"""The learner's spaced-review cards and their reviews as stored (tables learner_cards and
learner_reviews): which are due, what each is made of (the word or the mistake it asks about),
a grade written only over the state it was computed from. The scheduling (FSRS) is
memora.learner.review's; a card's state is kept as its JSON."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiosqlite

from memora.storage.connection import Connection
from memora.storage.learner_schema import as_datetime, iso

_CARD = (
    "SELECT c.id, c.user_id, c.kind, c.fsrs, c.due, c.reps, "
    "COALESCE(w.term, m.original), COALESCE(w.meaning, m.corrected), "
    "COALESCE(w.example, m.reason) FROM learner_cards c "
    "LEFT JOIN learner_words w ON c.kind='word' AND w.id=c.ref_id "
    "LEFT JOIN learner_mistakes m ON c.kind='mistake' AND m.id=c.ref_id "
)


@dataclass(frozen=True)
class CardRow:
    """A card as stored, with what it is made of: a word's term, meaning and example, or a
    mistake's wrong sentence, correction and reason (`kind` says which)."""

    id: int
    user_id: int
    kind: str  # "word" | "mistake"
    state: str  # FSRS's JSON
    due: datetime
    reps: int
    first: str  # the term, or the wrong sentence
    second: str  # the meaning, or the correction
    third: str  # the example, or the reason


def _row(row: Any) -> CardRow:
    return CardRow(
        int(row[0]),
        int(row[1]),
        row[2],
        row[3],
        as_datetime(row[4]),
        int(row[5]),
        row[6] or "",
        row[7] or "",
        row[8] or "",
    )


async def insert_card(
    db: aiosqlite.Connection,
    user_id: int,
    kind: str,
    ref_id: int,
    card: tuple[str, datetime],
    now: datetime,
) -> None:
    """A new card (`card`: its FSRS state and due time) for a word or a mistake, inside the
    caller's transaction."""
    state, due = card
    await db.execute(
        "INSERT INTO learner_cards(user_id, kind, ref_id, fsrs, due, created_at) "
        "VALUES (?,?,?,?,?,?)",
        (user_id, kind, ref_id, state, iso(due), iso(now)),
    )


class CardQueries:
    """Reads and writes of learner_cards and learner_reviews; every query names its user."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def due(self, user_id: int, now: datetime, limit: int) -> list[CardRow]:
        rows = await self.connection.rows(
            _CARD + "WHERE c.user_id=? AND c.due<=? ORDER BY c.due, c.id LIMIT ?",
            (user_id, iso(now), limit),
        )
        return [_row(r) for r in rows]

    async def due_count(self, user_id: int, now: datetime) -> int:
        row = await self.connection.row(
            "SELECT COUNT(*) FROM learner_cards WHERE user_id=? AND due<=?",
            (user_id, iso(now)),
        )
        return int(row[0]) if row else 0

    async def next_due(self, user_id: int) -> datetime | None:
        row = await self.connection.row(
            "SELECT MIN(due) FROM learner_cards WHERE user_id=?", (user_id,)
        )
        return as_datetime(row[0]) if row and row[0] else None

    async def get(self, card_id: int) -> CardRow | None:
        """The card with this id, whoever's it is (the caller checks)."""
        row = await self.connection.row(_CARD + "WHERE c.id=?", (card_id,))
        return None if row is None else _row(row)

    async def of_user(self, user_id: int, *, newest_first: bool = False) -> list[CardRow]:
        order = "DESC" if newest_first else "ASC"
        rows = await self.connection.rows(
            _CARD + f"WHERE c.user_id=? ORDER BY c.id {order}", (user_id,)
        )
        return [_row(r) for r in rows]

    async def save_review(
        self,
        card_id: int,
        user_id: int,
        reps: int,
        after: tuple[str, datetime],
        rating: int,
        now: datetime,
    ) -> None:
        """The card's state after a review (`after`: FSRS's state and the next due time), written
        only over the state it was computed from (`reps` reviews), with the review, in one
        transaction."""
        state, due = after
        async with self.connection.transaction() as db:
            await db.execute(
                "UPDATE learner_cards SET fsrs=?, due=?, reps=reps+1 "
                "WHERE id=? AND user_id=? AND reps=?",
                (state, iso(due), card_id, user_id, reps),
            )
            await db.execute(
                "INSERT INTO learner_reviews(user_id, card_id, rating, at) VALUES (?,?,?,?)",
                (user_id, card_id, rating, iso(now)),
            )

    async def reviews(self, user_id: int) -> list[dict[str, Any]]:
        """The user's reviews, oldest first (for the export)."""
        rows = await self.connection.rows(
            "SELECT card_id, rating, at FROM learner_reviews WHERE user_id=? ORDER BY id",
            (user_id,),
        )
        return [dict(r) for r in rows]
