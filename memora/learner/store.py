"""The learner model in SQLite: profile (with history), mistakes, vocabulary, review cards, days.

Every method names its user, and every query filters on it: there is no call that reads or
writes learner data without saying whose. The tables live in the same SQLite file as the
conversations (same migrations, same WAL, same /forgetme transaction).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import aiosqlite

from memora.errors import AlreadyGraded as AlreadyGraded  # re-exported, like the two below
from memora.errors import CardGone as CardGone
from memora.errors import NotYourCard as NotYourCard
from memora.learner import review
from memora.learner.model import ExtractedMistake, ExtractedWord
from memora.learner.profile import (
    RECURRING_DAYS,
    RECURRING_MIN,
    Difficulty,
    FieldValue,
    Profile,
)
from memora.learner.screen import vocab_key
from memora.storage import Database

Statement = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True)
class Change:
    """One profile change, as kept in its history."""

    id: int
    field: str
    old_value: str | None
    new_value: str | None
    source: str
    at: str
    undone_at: str | None


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


async def _insert_card(
    db: aiosqlite.Connection, user_id: int, kind: str, ref_id: int, now: datetime
) -> None:
    new = review.new_card(now)
    await db.execute(
        "INSERT INTO learner_cards(user_id, kind, ref_id, fsrs, due, created_at) "
        "VALUES (?,?,?,?,?,?)",
        (user_id, kind, ref_id, new.state, review.iso(new.due), review.iso(now)),
    )


def _dt(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


class LearnerStore:
    """Learner data on the shared :class:`Database` connection."""

    def __init__(self, db: Database) -> None:
        self.database = db

    # -- plumbing --------------------------------------------------------------------------------
    async def _rows(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return await self.database.rows(sql, params)

    async def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        return await self.database.row(sql, params)

    async def _tx(self, statements: Sequence[Statement]) -> None:
        async with self.database.transaction() as db:
            for sql, params in statements:
                await db.execute(sql, params)

    # -- profile ---------------------------------------------------------------------------------
    async def profile(self, user_id: int, now: datetime) -> Profile:
        rows = await self._rows(
            "SELECT field, value, source, updated_at FROM learner_profile WHERE user_id=?",
            (user_id,),
        )
        fields = {r[0]: FieldValue(r[1], r[2], r[3]) for r in rows}
        return Profile(user_id, fields, tuple(await self.difficulties(user_id, now)))

    async def difficulties(self, user_id: int, now: datetime) -> list[Difficulty]:
        since = review.iso(now - timedelta(days=RECURRING_DAYS))
        rows = await self._rows(
            "SELECT category, COUNT(*) AS n FROM learner_mistakes WHERE user_id=? AND at>=? "
            "GROUP BY category HAVING COUNT(*)>=? ORDER BY n DESC, category",
            (user_id, since, RECURRING_MIN),
        )
        return [Difficulty(r[0], int(r[1])) for r in rows]

    async def set_field(
        self,
        user_id: int,
        field: str,
        value: str | None,
        *,
        source: str,
        now: datetime,
        chat_id: int | None = None,
        message_id: int | None = None,
    ) -> bool:
        """Set (or with None clear) one field, keeping the change in history; False if unchanged.

        `value` must already be clean (:func:`memora.learner.profile.clean_value`)."""
        at = review.iso(now)
        old = await self._one(
            "SELECT value, source, updated_at FROM learner_profile WHERE user_id=? AND field=?",
            (user_id, field),
        )
        old_value = old[0] if old else None
        if old_value == value:
            return False
        write: Statement
        if value is None:
            write = ("DELETE FROM learner_profile WHERE user_id=? AND field=?", (user_id, field))
        else:
            write = (
                "INSERT INTO learner_profile(user_id, field, value, source, chat_id, message_id, "
                "updated_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT(user_id, field) DO UPDATE SET "
                "value=excluded.value, source=excluded.source, chat_id=excluded.chat_id, "
                "message_id=excluded.message_id, updated_at=excluded.updated_at",
                (user_id, field, value, source, chat_id, message_id, at),
            )
        await self._tx(
            [
                write,
                (
                    "INSERT INTO learner_profile_history(user_id, field, old_value, old_source, "
                    "old_updated_at, new_value, source, at) VALUES (?,?,?,?,?,?,?,?)",
                    (
                        user_id,
                        field,
                        old_value,
                        old[1] if old else None,
                        old[2] if old else None,
                        value,
                        source,
                        at,
                    ),
                ),
            ]
        )
        return True

    async def history(self, user_id: int, field: str | None = None) -> list[Change]:
        sql = (
            "SELECT id, field, old_value, new_value, source, at, undone_at "
            "FROM learner_profile_history WHERE user_id=?"
        )
        params: tuple[Any, ...] = (user_id,)
        if field is not None:
            sql += " AND field=?"
            params = (user_id, field)
        return [Change(*r) for r in await self._rows(sql + " ORDER BY id", params)]

    async def undo(self, user_id: int, now: datetime) -> Change | None:
        """Undo the user's latest change not yet undone: the field gets its old value back."""
        row = await self._one(
            "SELECT id, field, old_value, new_value, source, at, undone_at, old_source, "
            "old_updated_at FROM learner_profile_history WHERE user_id=? AND undone_at IS NULL "
            "ORDER BY id DESC LIMIT 1",
            (user_id,),
        )
        if row is None:
            return None
        change = Change(*row[:7])
        restore: Statement
        if change.old_value is None:
            restore = (
                "DELETE FROM learner_profile WHERE user_id=? AND field=?",
                (user_id, change.field),
            )
        else:
            restore = (
                "INSERT INTO learner_profile(user_id, field, value, source, updated_at) "
                "VALUES (?,?,?,?,?) ON CONFLICT(user_id, field) DO UPDATE SET "
                "value=excluded.value, source=excluded.source, updated_at=excluded.updated_at",
                (
                    user_id,
                    change.field,
                    change.old_value,
                    row[7] or "undo",
                    row[8] or review.iso(now),
                ),
            )
        await self._tx(
            [
                restore,
                (
                    "UPDATE learner_profile_history SET undone_at=? WHERE id=? AND user_id=?",
                    (review.iso(now), change.id, user_id),
                ),
            ]
        )
        return change

    # -- mistakes and vocabulary -----------------------------------------------------------------
    async def add_mistakes(
        self,
        user_id: int,
        mistakes: Sequence[ExtractedMistake],
        *,
        now: datetime,
        chat_id: int | None = None,
        message_id: int | None = None,
    ) -> int:
        """Log mistakes (each with a review card); the same wrong sentence is logged once."""
        added = 0
        for m in mistakes:
            dup = await self._one(
                "SELECT 1 FROM learner_mistakes WHERE user_id=? AND lower(original)=lower(?) "
                "AND lower(corrected)=lower(?)",
                (user_id, m.original, m.corrected),
            )
            if dup:
                continue
            async with self.database.transaction() as db:
                cur = await db.execute(
                    "INSERT INTO learner_mistakes(user_id, chat_id, message_id, original, "
                    "corrected, category, reason, at) VALUES (?,?,?,?,?,?,?,?)",
                    (
                        user_id,
                        chat_id,
                        message_id,
                        m.original,
                        m.corrected,
                        m.category,
                        m.reason,
                        review.iso(now),
                    ),
                )
                await _insert_card(db, user_id, "mistake", int(cur.lastrowid or 0), now)
            added += 1
        return added

    async def add_words(
        self,
        user_id: int,
        words: Sequence[ExtractedWord],
        *,
        now: datetime,
        chat_id: int | None = None,
        message_id: int | None = None,
    ) -> int:
        """Add words (each with a review card); a word already known in any inflection is kept
        as it was."""
        added = 0
        for w in words:
            async with self.database.transaction() as db:
                cur = await db.execute(
                    "INSERT OR IGNORE INTO learner_words(user_id, key, term, meaning, example, "
                    "chat_id, message_id, at) VALUES (?,?,?,?,?,?,?,?)",
                    (
                        user_id,
                        vocab_key(w.term),
                        " ".join(w.term.split()),
                        " ".join(w.meaning.split()),
                        " ".join(w.example.split()),
                        chat_id,
                        message_id,
                        review.iso(now),
                    ),
                )
                if cur.rowcount:
                    await _insert_card(db, user_id, "word", int(cur.lastrowid or 0), now)
                    added += 1
        return added

    async def mistakes(self, user_id: int, limit: int = 1000) -> list[dict[str, Any]]:
        rows = await self._rows(
            "SELECT id, original, corrected, category, reason, at, chat_id, message_id "
            "FROM learner_mistakes WHERE user_id=? ORDER BY id DESC LIMIT ?",
            (user_id, limit),
        )
        return [dict(r) for r in rows]

    async def words(self, user_id: int, limit: int = 1000) -> list[dict[str, Any]]:
        rows = await self._rows(
            "SELECT id, term, meaning, example, at, chat_id, message_id "
            "FROM learner_words WHERE user_id=? ORDER BY id DESC LIMIT ?",
            (user_id, limit),
        )
        return [dict(r) for r in rows]

    async def delete_entry(self, user_id: int, kind: str, ref_id: int) -> bool:
        """Delete one of the user's mistakes ("mistake") or words ("word") with its review card
        and that card's reviews, in one transaction; False if the user has no such entry."""
        table = {"mistake": "learner_mistakes", "word": "learner_words"}[kind]
        async with self.database.transaction() as db:
            cur = await db.execute(
                f"DELETE FROM {table} WHERE id=? AND user_id=?", (ref_id, user_id)
            )
            if not cur.rowcount:
                return False
            await db.execute(
                "DELETE FROM learner_reviews WHERE user_id=? AND card_id IN "
                "(SELECT id FROM learner_cards WHERE kind=? AND ref_id=? AND user_id=?)",
                (user_id, kind, ref_id, user_id),
            )
            await db.execute(
                "DELETE FROM learner_cards WHERE kind=? AND ref_id=? AND user_id=?",
                (kind, ref_id, user_id),
            )
        await self.database.checkpoint()  # deleted means gone from the files (memora/erase.py)
        return True

    # -- activity --------------------------------------------------------------------------------
    async def note_day(
        self, user_id: int, day: str, *, messages: int = 0, reviews: int = 0
    ) -> None:
        """Count a message or a review on the learner's local calendar day."""
        await self.database._write(
            "INSERT INTO learner_days(user_id, day, messages, reviews) VALUES (?,?,?,?) "
            "ON CONFLICT(user_id, day) DO UPDATE SET "
            "messages=learner_days.messages+excluded.messages, "
            "reviews=learner_days.reviews+excluded.reviews",
            (user_id, day, messages, reviews),
        )

    async def days(self, user_id: int) -> list[tuple[str, int, int]]:
        rows = await self._rows(
            "SELECT day, messages, reviews FROM learner_days WHERE user_id=? ORDER BY day",
            (user_id,),
        )
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    # -- review cards ----------------------------------------------------------------------------
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
            int(row[0]), int(row[1]), kind, row[3], _dt(row[4]), int(row[5]), front, back
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
        return _dt(row[0]) if row and row[0] else None

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

    # -- progress data ---------------------------------------------------------------------------
    async def mistake_dates(self, user_id: int) -> list[tuple[str, str]]:
        rows = await self._rows(
            "SELECT at, category FROM learner_mistakes WHERE user_id=? ORDER BY at", (user_id,)
        )
        return [(r[0], r[1]) for r in rows]

    # -- export ----------------------------------------------------------------------------------
    async def export(self, user_id: int, now: datetime) -> dict[str, Any]:
        """Everything the learner model holds about one user, as JSON-able data."""
        profile = await self.profile(user_id, now)
        cards = await self.cards(user_id)
        reviews = await self._rows(
            "SELECT card_id, rating, at FROM learner_reviews WHERE user_id=? ORDER BY id",
            (user_id,),
        )
        return {
            "profile": {k: v.__dict__ for k, v in profile.fields.items()},
            "recurring_difficulties": [d.__dict__ for d in profile.difficulties],
            "profile_history": [c.__dict__ for c in await self.history(user_id)],
            "mistakes": await self.mistakes(user_id, limit=1_000_000),
            "vocabulary": await self.words(user_id, limit=1_000_000),
            "review_cards": [
                {
                    "id": c.id,
                    "kind": c.kind,
                    "front": c.front,
                    "due": review.iso(c.due),
                    "reps": c.reps,
                    "fsrs": json.loads(c.state),
                }
                for c in cards
            ],
            "reviews": [dict(r) for r in reviews],
            "days": [
                {"day": d, "messages": m, "reviews": r} for d, m, r in await self.days(user_id)
            ],
        }
