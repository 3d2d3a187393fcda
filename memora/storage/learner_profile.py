"""The learner's profile as stored (learner_profile): each field's value and source, its history
of changes with /undo (learner_profile_history), the mistake categories counted for the recurring
difficulties, and the language the learner's app last named (learner_app_language). The fields'
rules (which exist, what a value may be) are memora.learner.profile's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memora.storage.connection import Connection
from memora.storage.learner_schema import iso

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


class ProfileQueries:
    """Reads and writes of profile fields, their history and undo; every query names its user."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def fields(self, user_id: int) -> list[tuple[str, str, str, str]]:
        """The user's fields as (field, value, source, updated_at)."""
        rows = await self.connection.rows(
            "SELECT field, value, source, updated_at FROM learner_profile WHERE user_id=?",
            (user_id,),
        )
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    async def categories(
        self, user_id: int, since: datetime, at_least: int
    ) -> list[tuple[str, int]]:
        """The mistake categories logged at least `at_least` times since `since`, with their
        counts, the most frequent first."""
        rows = await self.connection.rows(
            "SELECT category, COUNT(*) AS n FROM learner_mistakes WHERE user_id=? AND at>=? "
            "GROUP BY category HAVING COUNT(*)>=? ORDER BY n DESC, category",
            (user_id, iso(since), at_least),
        )
        return [(r[0], int(r[1])) for r in rows]

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
        at = iso(now)
        old = await self.connection.row(
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
        await self._run(
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
        return [Change(*r) for r in await self.connection.rows(sql + " ORDER BY id", params)]

    async def undo(self, user_id: int, now: datetime) -> Change | None:
        """Undo the user's latest change not yet undone: the field gets its old value back."""
        row = await self.connection.row(
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
                (user_id, change.field, change.old_value, row[7] or "undo", row[8] or iso(now)),
            )
        await self._run(
            restore,
            (
                "UPDATE learner_profile_history SET undone_at=? WHERE id=? AND user_id=?",
                (iso(now), change.id, user_id),
            ),
        )
        return change

    async def app_language(self, user_id: int) -> str | None:
        """The language the learner's app last named (Telegram's language_code), if any."""
        row = await self.connection.row(
            "SELECT lang FROM learner_app_language WHERE user_id=?", (user_id,)
        )
        return None if row is None else str(row[0])

    async def set_app_language(self, user_id: int, lang: str, now: datetime) -> None:
        """Keep the app's language for the messages no message prompts (reminders, reports)."""
        await self._run(
            (
                "INSERT INTO learner_app_language(user_id, lang, updated_at) VALUES (?,?,?) "
                "ON CONFLICT(user_id) DO UPDATE SET lang=excluded.lang, "
                "updated_at=excluded.updated_at",
                (user_id, lang, iso(now)),
            )
        )

    async def _run(self, *statements: Statement) -> None:
        """The statements in one transaction."""
        async with self.connection.transaction() as db:
            for sql, params in statements:
                await db.execute(sql, params)
