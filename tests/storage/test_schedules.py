"""The scheduled messages' rows (db.schedules), on SQLite and PostgreSQL: a setting as stored and
read back, the day's and the week's claim taken once with its outbox row, and /forgetme's delete."""

from __future__ import annotations

from datetime import date, time

from memora.storage import Database
from memora.storage.durable import REMINDER, WEEKLY, Kept
from memora.storage.schedules import EVERY_DAY, Reminder, WeeklySetting

NOW = "2026-12-07T12:00:00+00:00"
MONDAY = date(2026, 12, 7)


async def outbox_kinds(db: Database, user_id: int) -> list[str]:
    rows = await db.connection.rows(
        "SELECT kind FROM outbox WHERE user_id=? ORDER BY id", (user_id,)
    )
    return [str(r[0]) for r in rows]


async def test_a_reminder_is_stored_claimed_once_a_day_and_deleted(db: Database) -> None:
    rows = db.schedules
    await rows.set_reminder(7, 70, time(20, 0), (4, 0, 0, 2), NOW)
    await rows.set_reminder(8, 80, time(8, 30), EVERY_DAY, NOW)
    assert await rows.reminder(7) == Reminder(7, 70, time(20, 0), (0, 2, 4), updated_at=NOW)
    assert [r.user_id for r in await rows.enabled_reminders()] == [7, 8]

    row = Kept('{"text": "practise"}', REMINDER)
    assert await rows.queue_reminder(7, 70, MONDAY, row) is True
    assert await rows.queue_reminder(7, 70, MONDAY, row) is False  # the day is taken
    assert await rows.claim_day(7, MONDAY) is False
    assert await outbox_kinds(db, 7) == [REMINDER]
    assert (await rows.reminder(7)) == Reminder(
        7, 70, time(20, 0), (0, 2, 4), updated_at=NOW, last_sent=MONDAY.isoformat()
    )

    await rows.reminder_off(8, "blocked")
    off = await rows.reminder(8)
    assert off is not None and not off.enabled and off.off_reason == "blocked"
    assert await rows.claim_day(8, MONDAY) is False  # off: never claimed
    assert [r.user_id for r in await rows.enabled_reminders()] == [7]
    await rows.set_reminder(8, 80, time(9, 0), EVERY_DAY, NOW)  # on again, the reason gone
    assert await rows.reminder(8) == Reminder(8, 80, time(9, 0), updated_at=NOW)

    assert await rows.delete_reminder(7) == 1
    assert await rows.reminder(7) is None and await rows.delete_reminder(7) == 0


async def test_a_weekly_report_is_stored_claimed_once_a_week_and_deleted(db: Database) -> None:
    rows = db.schedules
    await rows.set_weekly(7, 70, 4, NOW)
    assert await rows.weekly(7) == WeeklySetting(7, 70, 4, updated_at=NOW)
    assert await rows.enabled_weekly() == [WeeklySetting(7, 70, 4, updated_at=NOW)]

    row = Kept('{"text": "your week", "photo": null}', WEEKLY)
    assert await rows.queue_weekly(7, 70, "2026-W50", NOW, row) is True
    assert await rows.queue_weekly(7, 70, "2026-W50", NOW, row) is False  # the week is taken
    assert await rows.week_claimed(7, "2026-W50") and not await rows.week_claimed(7, "2026-W51")
    assert await rows.weeks(7) == [("2026-W50", NOW)]
    assert await outbox_kinds(db, 7) == [WEEKLY]

    await rows.weekly_off(7, "you")
    assert await rows.queue_weekly(7, 70, "2026-W51", NOW, row) is False  # off: never claimed
    assert await rows.enabled_weekly() == []
    assert await rows.queue_weekly(8, 80, "2026-W50", NOW, row) is False  # no setting at all

    assert await rows.delete_weekly(7) == 2  # the setting and the week claimed
    assert await rows.weekly(7) is None and await rows.weeks(7) == []
