"""The learner model's logs as stored: what the learner got wrong (learner_mistakes) and the words
they met (learner_words), each with its review card, and the days they practised (learner_days).
Every query names its user."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memora.storage.connection import Connection
from memora.storage.learner_cards import insert_card
from memora.storage.learner_schema import iso

NewCard = tuple[str, datetime]
"""A new review card's FSRS state and due time (memora.learner.review.new_card)."""


class EntryQueries:
    """Reads and writes of mistakes, vocabulary and study days."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def add_mistake(
        self,
        user_id: int,
        mistake: tuple[str, str, str, str],
        card: NewCard,
        *,
        now: datetime,
        chat_id: int | None = None,
        message_id: int | None = None,
    ) -> bool:
        """Log a mistake (original, corrected, category, reason) with its review card; False,
        and nothing written, when the same wrong sentence is logged already."""
        original, corrected, category, reason = mistake
        dup = await self.connection.row(
            "SELECT 1 FROM learner_mistakes WHERE user_id=? AND lower(original)=lower(?) "
            "AND lower(corrected)=lower(?)",
            (user_id, original, corrected),
        )
        if dup:
            return False
        async with self.connection.transaction() as db:
            cur = await db.execute(
                "INSERT INTO learner_mistakes(user_id, chat_id, message_id, original, "
                "corrected, category, reason, at) VALUES (?,?,?,?,?,?,?,?)",
                (user_id, chat_id, message_id, original, corrected, category, reason, iso(now)),
            )
            await insert_card(db, user_id, "mistake", int(cur.lastrowid or 0), card, now)
        return True

    async def add_word(
        self,
        user_id: int,
        word: tuple[str, str, str, str],
        card: NewCard,
        *,
        now: datetime,
        chat_id: int | None = None,
        message_id: int | None = None,
    ) -> bool:
        """Add a word (key, term, meaning, example) with its review card; False, and nothing
        written, when a word of that key is known already."""
        key, term, meaning, example = word
        async with self.connection.transaction() as db:
            cur = await db.execute(
                "INSERT OR IGNORE INTO learner_words(user_id, key, term, meaning, example, "
                "chat_id, message_id, at) VALUES (?,?,?,?,?,?,?,?)",
                (user_id, key, term, meaning, example, chat_id, message_id, iso(now)),
            )
            if not cur.rowcount:
                return False
            await insert_card(db, user_id, "word", int(cur.lastrowid or 0), card, now)
        return True

    async def mistakes(self, user_id: int, limit: int = 1000) -> list[dict[str, Any]]:
        rows = await self.connection.rows(
            "SELECT id, original, corrected, category, reason, at, chat_id, message_id "
            "FROM learner_mistakes WHERE user_id=? ORDER BY id DESC LIMIT ?",
            (user_id, limit),
        )
        return [dict(r) for r in rows]

    async def words(self, user_id: int, limit: int = 1000) -> list[dict[str, Any]]:
        rows = await self.connection.rows(
            "SELECT id, term, meaning, example, at, chat_id, message_id "
            "FROM learner_words WHERE user_id=? ORDER BY id DESC LIMIT ?",
            (user_id, limit),
        )
        return [dict(r) for r in rows]

    async def delete_entry(self, user_id: int, kind: str, ref_id: int) -> bool:
        """Delete one of the user's mistakes ("mistake") or words ("word") with its review card
        and that card's reviews, in one transaction; False if the user has no such entry."""
        table = {"mistake": "learner_mistakes", "word": "learner_words"}[kind]
        async with self.connection.transaction() as db:
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
        await self.connection.checkpoint()  # deleted means gone from the files (file_erasure.py)
        return True

    # -- activity --------------------------------------------------------------------------------
    async def note_day(
        self, user_id: int, day: str, *, messages: int = 0, reviews: int = 0
    ) -> None:
        """Count a message or a review on the learner's local calendar day."""
        await self.connection.write(
            "INSERT INTO learner_days(user_id, day, messages, reviews) VALUES (?,?,?,?) "
            "ON CONFLICT(user_id, day) DO UPDATE SET "
            "messages=learner_days.messages+excluded.messages, "
            "reviews=learner_days.reviews+excluded.reviews",
            (user_id, day, messages, reviews),
        )

    async def days(self, user_id: int) -> list[tuple[str, int, int]]:
        rows = await self.connection.rows(
            "SELECT day, messages, reviews FROM learner_days WHERE user_id=? ORDER BY day",
            (user_id,),
        )
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    async def mistake_dates(self, user_id: int) -> list[tuple[str, str]]:
        rows = await self.connection.rows(
            "SELECT at, category FROM learner_mistakes WHERE user_id=? ORDER BY at", (user_id,)
        )
        return [(r[0], r[1]) for r in rows]

    async def last_entry_ids(self, user_id: int) -> tuple[int, int]:
        """The user's newest mistake id and word id (0 for none): what came before a scene."""
        m = await self.connection.row(
            "SELECT max(id) FROM learner_mistakes WHERE user_id=?", (user_id,)
        )
        w = await self.connection.row(
            "SELECT max(id) FROM learner_words WHERE user_id=?", (user_id,)
        )
        return int((m and m[0]) or 0), int((w and w[0]) or 0)

    async def logged_since(
        self, user_id: int, chat_id: int, since: datetime, after: tuple[int, int] = (0, 0)
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The user's mistakes and new words logged in this chat since `since` and after the
        ids `after` (mistake, word), oldest first: a role-play scene's debrief."""
        start = iso(since)
        mistakes = await self.connection.rows(
            "SELECT original, corrected, category FROM learner_mistakes "
            "WHERE user_id=? AND chat_id=? AND at>=? AND id>? ORDER BY id",
            (user_id, chat_id, start, after[0]),
        )
        words = await self.connection.rows(
            "SELECT term, meaning FROM learner_words "
            "WHERE user_id=? AND chat_id=? AND at>=? AND id>? ORDER BY id",
            (user_id, chat_id, start, after[1]),
        )
        return [dict(r) for r in mistakes], [dict(r) for r in words]
