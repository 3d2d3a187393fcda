"""The scheduled messages' rows (memora.reminders): each learner's practice reminder (table
reminders, with the local day it last went out), their weekly report setting (weekly_reports)
and each week claimed (weekly_sent).

A claim and the outbox row it sends are written in one transaction (`queue_reminder`,
`queue_weekly`): the day or the week is taken and the message kept together, or neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, time
from typing import Any

from memora.storage.connection import Connection
from memora.storage.durable import Kept, keep

EVERY_DAY: tuple[int, ...] = tuple(range(7))  # Python's weekday(): Monday = 0


@dataclass(frozen=True)
class Reminder:
    """One learner's reminder setting as stored."""

    user_id: int
    chat_id: int
    at: time  # local to the learner's time zone
    days: tuple[int, ...] = EVERY_DAY  # Monday = 0
    enabled: bool = True
    updated_at: str = ""  # UTC ISO: a reminder set after today's time does not catch up today
    last_sent: str = ""  # the learner's local date of the last send
    off_reason: str = ""  # "you" | "blocked" when enabled is False


@dataclass(frozen=True)
class WeeklySetting:
    """One learner's weekly report setting as stored."""

    user_id: int
    chat_id: int
    weekday: int = 0  # Monday = 0
    enabled: bool = True
    updated_at: str = ""  # UTC ISO: turned on after this week's time, it starts next week
    off_reason: str = ""  # "you" | "blocked" when enabled is False


_REMINDER = "user_id, chat_id, at, days, enabled, updated_at, last_sent, off_reason"
_WEEKLY = "user_id, chat_id, weekday, enabled, updated_at, off_reason"


class ScheduleQueries:
    """Reads and writes of reminders, weekly_reports and weekly_sent, over one Connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    # -- the daily reminder -----------------------------------------------------------------------
    async def reminder(self, user_id: int) -> Reminder | None:
        row = await self.connection.row(
            f"SELECT {_REMINDER} FROM reminders WHERE user_id=?", (user_id,)
        )
        return _reminder(row) if row else None

    async def enabled_reminders(self) -> list[Reminder]:
        rows = await self.connection.rows(
            f"SELECT {_REMINDER} FROM reminders WHERE enabled=1 ORDER BY user_id"
        )
        return [_reminder(r) for r in rows]

    async def set_reminder(
        self, user_id: int, chat_id: int, at: time, days: tuple[int, ...], now: str
    ) -> None:
        """Set (or set again, and turn on) the learner's reminder; `now` is UTC ISO."""
        async with self.connection.transaction() as db:
            await db.execute(
                "INSERT INTO reminders(user_id, chat_id, at, days, enabled, updated_at) "
                "VALUES (?,?,?,?,1,?) ON CONFLICT(user_id) DO UPDATE SET chat_id=excluded.chat_id,"
                " at=excluded.at, days=excluded.days, enabled=1, updated_at=excluded.updated_at,"
                " off_reason=''",
                (user_id, chat_id, at.strftime("%H:%M"), _days_text(days), now),
            )

    async def reminder_off(self, user_id: int, reason: str) -> None:
        async with self.connection.transaction() as db:
            await db.execute(
                "UPDATE reminders SET enabled=0, off_reason=? WHERE user_id=?", (reason, user_id)
            )

    async def delete_reminder(self, user_id: int) -> int:
        async with self.connection.transaction() as db:
            cur = await db.execute("DELETE FROM reminders WHERE user_id=?", (user_id,))
            return cur.rowcount or 0

    async def claim_day(self, user_id: int, day: date) -> bool:
        """Record that the day's reminder goes out; False if it already went (or is off)."""
        async with self.connection.transaction() as db:
            return await _claim_day(db, user_id, day)

    async def queue_reminder(self, user_id: int, chat_id: int, day: date, row: Kept) -> bool:
        """Claim the day and keep `row` in the outbox, in one transaction: False (and nothing
        kept) if the day was claimed already or the reminder is off."""
        async with self.connection.transaction() as db:
            if not await _claim_day(db, user_id, day):
                return False
            return await keep(db, self.connection.dialect, chat_id, user_id, [row])

    # -- the weekly report ------------------------------------------------------------------------
    async def weekly(self, user_id: int) -> WeeklySetting | None:
        row = await self.connection.row(
            f"SELECT {_WEEKLY} FROM weekly_reports WHERE user_id=?", (user_id,)
        )
        return _weekly(row) if row else None

    async def enabled_weekly(self) -> list[WeeklySetting]:
        rows = await self.connection.rows(
            f"SELECT {_WEEKLY} FROM weekly_reports WHERE enabled=1 ORDER BY user_id"
        )
        return [_weekly(r) for r in rows]

    async def set_weekly(self, user_id: int, chat_id: int, weekday: int, now: str) -> None:
        """Turn the learner's report on, on `weekday`; `now` is UTC ISO."""
        async with self.connection.transaction() as db:
            await db.execute(
                "INSERT INTO weekly_reports(user_id, chat_id, weekday, enabled, updated_at) "
                "VALUES (?,?,?,1,?) ON CONFLICT(user_id) DO UPDATE SET "
                "chat_id=excluded.chat_id, weekday=excluded.weekday, enabled=1, "
                "updated_at=excluded.updated_at, off_reason=''",
                (user_id, chat_id, weekday, now),
            )

    async def weekly_off(self, user_id: int, reason: str) -> None:
        async with self.connection.transaction() as db:
            await db.execute(
                "UPDATE weekly_reports SET enabled=0, off_reason=? WHERE user_id=?",
                (reason, user_id),
            )

    async def delete_weekly(self, user_id: int) -> int:
        """The setting and every week claimed."""
        async with self.connection.transaction() as db:
            cur = await db.execute("DELETE FROM weekly_reports WHERE user_id=?", (user_id,))
            n = cur.rowcount or 0
            cur = await db.execute("DELETE FROM weekly_sent WHERE user_id=?", (user_id,))
            return n + (cur.rowcount or 0)

    async def weeks(self, user_id: int) -> list[tuple[str, str]]:
        """The weeks claimed for the user, oldest first: (ISO week, when claimed)."""
        rows = await self.connection.rows(
            "SELECT week, claimed_at FROM weekly_sent WHERE user_id=? ORDER BY week", (user_id,)
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    async def week_claimed(self, user_id: int, week: str) -> bool:
        row = await self.connection.row(
            "SELECT 1 FROM weekly_sent WHERE user_id=? AND week=?", (user_id, week)
        )
        return row is not None

    async def queue_weekly(
        self, user_id: int, chat_id: int, week: str, claimed_at: str, row: Kept
    ) -> bool:
        """Claim the week and keep `row` in the outbox, in one transaction: False (and nothing
        kept) if the week was claimed already or the report is off."""
        async with self.connection.transaction() as db:
            cur = await db.execute("SELECT enabled FROM weekly_reports WHERE user_id=?", (user_id,))
            on = await cur.fetchone()
            if not on or not on[0]:
                return False
            cur = await db.execute(
                "INSERT OR IGNORE INTO weekly_sent(user_id, week, claimed_at) VALUES (?,?,?)",
                (user_id, week, claimed_at),
            )
            if not cur.rowcount:
                return False
            return await keep(db, self.connection.dialect, chat_id, user_id, [row])


async def _claim_day(db: Any, user_id: int, day: date) -> bool:
    cur = await db.execute(
        "UPDATE reminders SET last_sent=? WHERE user_id=? AND enabled=1 AND last_sent < ?",
        (day.isoformat(), user_id, day.isoformat()),
    )
    return (cur.rowcount or 0) == 1


def _days_text(days: tuple[int, ...]) -> str:
    return ",".join(str(d) for d in sorted(set(days)))


def _reminder(row: Any) -> Reminder:
    hh, mm = (int(x) for x in str(row[2]).split(":"))
    return Reminder(
        user_id=int(row[0]),
        chat_id=int(row[1]),
        at=time(hh, mm),
        days=tuple(int(d) for d in str(row[3]).split(",") if d),
        enabled=bool(row[4]),
        updated_at=str(row[5]),
        last_sent=str(row[6]),
        off_reason=str(row[7]),
    )


def _weekly(row: Any) -> WeeklySetting:
    return WeeklySetting(
        user_id=int(row[0]),
        chat_id=int(row[1]),
        weekday=int(row[2]),
        enabled=bool(row[3]),
        updated_at=str(row[4]),
        off_reason=str(row[5]),
    )
