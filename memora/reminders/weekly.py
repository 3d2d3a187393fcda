"""The weekly report's rules: who wants it and which weekday, when it is due, the week's claim.

Platform-neutral, and built like the daily reminder (daily.py) whose pieces it reuses:
the learner's time zone (their profile), their reminder time (the daily reminder's, or
DEFAULT_AT until they set one), the outbox row kept in the same transaction as the claim, and
its expiry when the learner's local day ends. The text is report.py's, from the
learner model without an LLM call, in the learner's language (the one a command speaks, or for
the weekly job the one their profile resolves to); the chart is /progress's.

- Opt-in: `/remind weekly [day]` (Monday unless a day is given; the command is remind.py's) or,
  when the deployment sets `[reminders] weekly = true`, setting a daily reminder turns it on too
  (once: `/remind weekly off` is remembered).
- Once a week: `weekly_sent` (memora.storage.schedules) holds one row per learner and ISO week
  of their local send day, inserted with the outbox row in one transaction. A restart, a
  start-up catch-up, a second replica or a changed weekday never send a week twice; a crash
  after the claim still delivers (the outbox keeps the row).
- A learner Telegram refuses for good (they blocked the bot) has it switched off (`blocked`).

Time is passed in (`now`): tests never wait a week.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from memora.blocking import background, run_blocking
from memora.errors import ReminderError
from memora.i18n import speaking
from memora.learner import progress
from memora.reminders import report as week_text
from memora.reminders import texts
from memora.reminders.daily import DAY_NAMES, Reminders, expires_at
from memora.storage import Database
from memora.storage.durable import WEEKLY, Kept
from memora.storage.schedules import WeeklySetting

log = logging.getLogger(__name__)

DEFAULT_AT = time(19, 0)  # the report's time for a learner without a daily reminder


@dataclass(frozen=True)
class Report:
    text: str
    chart: bytes | None  # /progress's chart (PNG), None if it could not be drawn


def week_key(day: date) -> str:
    """The ISO week of the learner's local send day: '2026-W49'."""
    year, week, _weekday = day.isocalendar()
    return f"{year}-W{week:02d}"


_FULL_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def parse_weekday(text: str) -> int:
    """'fri', 'Friday' or 'fridays' → 4; anything else (two days, a time) is refused."""
    word = text.strip().lower()
    for i, (short, full) in enumerate(zip(DAY_NAMES, _FULL_DAYS, strict=True)):
        if word in {short, full, full + "s"}:
            return i
    raise ReminderError(texts.not_a_weekday(text))


Listener = Callable[[WeeklySetting], None]


class WeeklyReports:
    """The stored settings, the weekly claim, and the report, for every user."""

    def __init__(self, db: Database, reminders: Reminders, *, by_default: bool = False) -> None:
        self.db = db
        self.rows = db.schedules  # the settings and the weeks claimed as stored
        self.reminders = reminders  # the reminder time, the time zone, the learner model
        self.by_default = by_default  # [reminders] weekly: a daily reminder brings it along
        self.listeners: list[Listener] = []  # the adapter's scheduler

    @property
    def clock(self) -> Callable[[], datetime]:
        return self.reminders.clock

    # -- the setting ----------------------------------------------------------------------------
    async def get(self, user_id: int) -> WeeklySetting | None:
        return await self.rows.weekly(user_id)

    async def enabled(self) -> list[WeeklySetting]:
        return await self.rows.enabled_weekly()

    async def set(self, user_id: int, chat_id: int, weekday: int = 0) -> WeeklySetting:
        now = self.clock().astimezone(UTC).isoformat(timespec="seconds")
        await self.rows.set_weekly(user_id, chat_id, weekday, now)
        return await self._changed(user_id)

    async def reminder_set(self, user_id: int, chat_id: int) -> WeeklySetting | None:
        """A daily reminder was set: under `[reminders] weekly = true` the report comes along,
        unless the learner has a setting of their own already (say, turned it off)."""
        if not self.by_default or await self.get(user_id) is not None:
            return None
        return await self.set(user_id, chat_id)

    async def off(self, user_id: int, reason: str = "you") -> WeeklySetting | None:
        await self.rows.weekly_off(user_id, reason)
        return await self._changed(user_id) if await self.get(user_id) else None

    async def delete_user(self, user_id: int) -> int:
        """/forgetme: the setting and every week claimed."""
        n = await self.rows.delete_weekly(user_id)
        for listener in self.listeners:
            listener(WeeklySetting(user_id, user_id, enabled=False, off_reason="deleted"))
        return n

    async def weeks(self, user_id: int) -> list[tuple[str, str]]:
        """The weeks claimed for the user, oldest first: (ISO week, when claimed)."""
        return await self.rows.weeks(user_id)

    async def export(self, user_id: int) -> dict[str, Any] | None:
        """The setting and the weeks sent, as /export shows them (None without either)."""
        setting, weeks = await self.get(user_id), await self.weeks(user_id)
        if setting is None and not weeks:
            return None
        return {
            "weekday": DAY_NAMES[setting.weekday] if setting else None,
            "enabled": setting.enabled if setting else False,
            "off_reason": setting.off_reason if setting else "",
            "updated_at": setting.updated_at if setting else "",
            "weeks_sent": [{"week": w, "claimed_at": at} for w, at in weeks],
        }

    async def moved(self, user_id: int) -> None:
        """The learner's time zone changed: their scheduler hears of it (a report set for
        Monday 19:00 in UTC is Tuesday 03:00 in Taipei)."""
        if await self.get(user_id) is not None:
            await self._changed(user_id)

    async def _changed(self, user_id: int) -> WeeklySetting:
        setting = await self.get(user_id)
        assert setting is not None
        for listener in self.listeners:
            listener(setting)
        return setting

    # -- when -----------------------------------------------------------------------------------
    async def at(self, user_id: int) -> time:
        """The learner's reminder time (DEFAULT_AT until they set a daily reminder)."""
        reminder = await self.reminders.get(user_id)
        return reminder.at if reminder is not None else DEFAULT_AT

    async def claimed(self, user_id: int, day: date) -> bool:
        return await self.rows.week_claimed(user_id, week_key(day))

    async def due(self, setting: WeeklySetting, now: datetime) -> date | None:
        """The learner's local date if the report should go out now: enabled, it is their
        weekday, their time has come, it was turned on before that time, and this week has not
        been claimed. Used by the weekly job and the start-up catch-up alike."""
        if not setting.enabled:
            return None
        zone = await self.reminders.timezone(setting.user_id, now)
        local = now.astimezone(ZoneInfo(zone))
        today = local.date()
        if today.weekday() != setting.weekday:
            return None
        due = datetime.combine(today, await self.at(setting.user_id), tzinfo=ZoneInfo(zone))
        if local < due or (setting.updated_at and datetime.fromisoformat(setting.updated_at) > due):
            return None
        return None if await self.claimed(setting.user_id, today) else today

    async def next_time(self, setting: WeeklySetting, now: datetime) -> datetime | None:
        """When it goes out next, in the learner's zone (for /remind's answer)."""
        if not setting.enabled:
            return None
        zone = ZoneInfo(await self.reminders.timezone(setting.user_id, now))
        at, local = await self.at(setting.user_id), now.astimezone(zone)
        for ahead in range(15):
            day = local.date() + timedelta(days=ahead)
            when = datetime.combine(day, at, tzinfo=zone)
            if day.weekday() == setting.weekday and when > local:
                if not await self.claimed(setting.user_id, day):
                    return when
        return None

    # -- what and the claim ---------------------------------------------------------------------
    async def report(
        self, user_id: int, now: datetime, name: str = "", lang: str | None = None
    ) -> Report:
        """This week's report from the learner model (no LLM call), with /progress's chart, in
        `lang` (None: the learner's language as their profile resolves it, for the job)."""
        with speaking(lang or await self.reminders.language(user_id, now)):
            week = await week_text.gather(self.reminders.learner, user_id, now)
            try:
                with background():  # one report's chart at a time, in a thread: replies first
                    chart: bytes | None = await run_blocking(progress.chart, week.progress)
            except Exception:
                log.exception("the weekly chart of user %s could not be drawn; text only", user_id)
                chart = None
            return Report(week_text.compose(week, name), chart)

    async def queue(self, setting: WeeklySetting, day: date, rep: Report, zone: str) -> bool:
        """Claim the week and keep the report in the outbox, in one transaction: False (and
        nothing kept) if the week was claimed already or the report is off. It expires when
        the learner's local send day ends."""
        photo = base64.b64encode(rep.chart).decode() if rep.chart else None
        row = Kept(
            json.dumps({"text": rep.text, "photo": photo}),
            WEEKLY,
            expires_at(day, zone).timestamp(),
        )
        now = self.clock().astimezone(UTC).isoformat(timespec="seconds")
        return await self.rows.queue_weekly(
            setting.user_id, setting.chat_id, week_key(day), now, row
        )
