"""The learner's profile as stored: each field's value and source, its history of changes (with
/undo), and the recurring difficulties read from the mistakes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from memora.learner import review
from memora.learner.profile import (
    RECURRING_DAYS,
    RECURRING_MIN,
    Difficulty,
    FieldValue,
    Profile,
)
from memora.learner.tables import LearnerTables, Statement


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


class ProfileStore(LearnerTables):
    """Profile fields, their history and undo."""

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
