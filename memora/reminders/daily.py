"""Practice reminders' rules: a learner's time and days, when one is due, the day's claim.

Platform-neutral: this module stores the setting (memora.storage.schedules), decides whether a
reminder is due *now*, claims the day's send durably (so a restart, a catch-up and a second
replica never send twice) and has the text written from the learner model (texts.compose) —
cards due, goal countdown, recurring difficulty, streak — without any LLM call, in the learner's
language (resolved from their profile: a reminder has no message to take the app's language
from). The Telegram adapter schedules it (PTB's JobQueue); the durable outbox sends it.

The claim and the reminder are written in one transaction (`queue`): the day is taken and the
reminder kept in the outbox together, so a crash after the claim still delivers it (the outbox
sends what it holds after a restart), 429s and outages are retried by the outbox's sender, and it
goes out once whichever replica claimed it. A reminder is for its day: one still undelivered when
the learner's local day ends (an outage of many hours) is dropped, not sent the next morning, and
the outbox row says why (`failed`, "expired: …").

Time is always passed in (`now`), so tests never wait for 20:00.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from memora.clock import now as clock_now
from memora.errors import ReminderError
from memora.i18n import DEFAULT, speaking
from memora.learner.service import Learner, ReminderFacts
from memora.reminders import texts
from memora.storage import Database
from memora.storage.durable import REMINDER, Kept
from memora.storage.schedules import EVERY_DAY, Reminder

log = logging.getLogger(__name__)

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # Python's weekday(): Monday = 0
_ALIASES = {
    "daily": EVERY_DAY,
    "everyday": EVERY_DAY,
    "weekdays": (0, 1, 2, 3, 4),
    "weekends": (5, 6),
    "weekend": (5, 6),
}
_TIME = re.compile(r"^([01]?\d|2[0-3])[:.h]([0-5]\d)$")


def parse_time(text: str) -> time:
    m = _TIME.match(text.strip().lower())
    if not m:
        raise ReminderError(texts.not_a_time(text))
    return time(int(m.group(1)), int(m.group(2)))


def parse_days(text: str) -> tuple[int, ...]:
    """'mon-fri', 'sat,sun', 'weekdays', 'daily', 'fri-mon' (wraps) → sorted weekday numbers."""
    spec = text.strip().lower().replace(" ", "")
    if not spec:
        return EVERY_DAY
    if spec in _ALIASES:
        return _ALIASES[spec]
    chosen: set[int] = set()
    for part in spec.split(","):
        first, _dash, last = part.partition("-")
        start, end = _day(first), _day(last) if last else _day(first)
        n = (end - start) % 7
        chosen.update((start + i) % 7 for i in range(n + 1))
    return tuple(sorted(chosen))


def _day(name: str) -> int:
    key = name[:3]
    if len(name) < 3 or key not in DAY_NAMES:
        raise ReminderError(texts.not_a_day(name))
    return DAY_NAMES.index(key)


def parse_remind(arg: str) -> tuple[time, tuple[int, ...]]:
    """'20:00 mon-fri' → (20:00, (0..4)); ReminderError with a clear reason otherwise."""
    at, _space, days = arg.strip().partition(" ")
    return parse_time(at), parse_days(days)


def due_day(reminder: Reminder, zone: str, now: datetime) -> date | None:
    """The learner's local date if the reminder should go out now, else None.

    Due means: enabled, today (in the learner's zone) is one of its days, its time today has
    come, it was set before that time (setting 20:00 at 21:00 waits for tomorrow), and it has
    not gone out today. Used by the daily job and by the start-up catch-up alike."""
    if not reminder.enabled:
        return None
    local = now.astimezone(ZoneInfo(zone))
    today = local.date()
    if today.weekday() not in reminder.days:
        return None
    due = datetime.combine(today, reminder.at, tzinfo=ZoneInfo(zone))
    if local < due or (reminder.last_sent and reminder.last_sent >= today.isoformat()):
        return None
    if reminder.updated_at and datetime.fromisoformat(reminder.updated_at) > due:
        return None
    return today


Listener = Callable[[Reminder], None]


class Reminders:
    """The stored settings, the once-a-day claim, the time zone and the text, for every user."""

    def __init__(
        self,
        db: Database,
        *,
        learner: Learner | None = None,
        clock: Callable[[], datetime] = clock_now,
    ) -> None:
        self.db = db
        self.rows = db.schedules  # the settings and the claims as stored
        self.learner = learner or Learner(db)  # the profile (time zone) and the reminder facts
        self.clock = clock
        self.listeners: list[Listener] = []  # the adapter's scheduler, told of every change

    # -- the setting --------------------------------------------------------------------------
    async def get(self, user_id: int) -> Reminder | None:
        return await self.rows.reminder(user_id)

    async def enabled(self) -> list[Reminder]:
        return await self.rows.enabled_reminders()

    async def set(self, user_id: int, chat_id: int, at: time, days: tuple[int, ...]) -> Reminder:
        now = self.clock().astimezone(UTC).isoformat(timespec="seconds")
        await self.rows.set_reminder(user_id, chat_id, at, days, now)
        return await self._changed(user_id)

    async def off(self, user_id: int, reason: str = "you") -> Reminder | None:
        await self.rows.reminder_off(user_id, reason)
        return await self._changed(user_id) if await self.get(user_id) else None

    async def delete_user(self, user_id: int) -> int:
        n = await self.rows.delete_reminder(user_id)
        for listener in self.listeners:
            listener(Reminder(user_id, user_id, time(0), enabled=False, off_reason="deleted"))
        return n

    async def export(self, user_id: int) -> dict[str, Any] | None:
        """The setting as /export shows it (None without one)."""
        r = await self.get(user_id)
        if r is None:
            return None
        return {
            "at": r.at.strftime("%H:%M"),
            "days": [DAY_NAMES[d] for d in r.days],
            "enabled": r.enabled,
            "off_reason": r.off_reason,
            "last_sent": r.last_sent,
            "updated_at": r.updated_at,
        }

    async def claim(self, user_id: int, day: date) -> bool:
        """Record that the day's reminder goes out; False if it already went (or is off)."""
        return await self.rows.claim_day(user_id, day)

    async def queue(self, reminder: Reminder, day: date, text: str, zone: str) -> bool:
        """Claim the day and keep the reminder in the outbox, in one transaction: False (and
        nothing kept) if the day was claimed already or the reminder is off. It expires when
        the learner's local day ends (`expires_at`)."""
        row = Kept(json.dumps({"text": text}), REMINDER, expires_at(day, zone).timestamp())
        return await self.rows.queue_reminder(reminder.user_id, reminder.chat_id, day, row)

    async def set_timezone(self, user_id: int, zone: str, now: datetime) -> Reminder | None:
        """Store the learner's zone in their profile (the one place it lives); their reminder,
        if any, is rescheduled in it. `zone` is already validated (learner.profile)."""
        await self.learner.profiles.set_field(user_id, "timezone", zone, source="you", now=now)
        reminder = await self.get(user_id)
        return await self._changed(user_id) if reminder is not None else None

    async def _changed(self, user_id: int) -> Reminder:
        reminder = await self.get(user_id)
        assert reminder is not None
        for listener in self.listeners:
            listener(reminder)
        return reminder

    # -- the learner's side -------------------------------------------------------------------
    async def timezone(self, user_id: int, now: datetime | None = None) -> str:
        """The learner's time zone from their profile (UTC until they set one)."""
        try:
            return str(await self.learner.timezone(user_id, now or self.clock()))
        except Exception:
            log.exception("could not read the time zone of user %s; using UTC", user_id)
            return "UTC"

    async def language(self, user_id: int, now: datetime) -> str:
        """The learner's language, from their profile (English when it cannot be read)."""
        try:
            return await self.learner.language(user_id, now)
        except Exception:
            log.exception("could not read the language of user %s; English", user_id)
            return DEFAULT

    async def text(self, user_id: int, now: datetime, name: str = "") -> str:
        """The reminder's text from memory (no LLM call), in the learner's language; generic
        where the model has nothing."""
        with speaking(await self.language(user_id, now)):
            facts: ReminderFacts | None = None
            try:
                facts = await self.learner.reminder_facts(user_id, now)
            except Exception:
                log.exception("learner facts failed for user %s; a plain reminder", user_id)
            return texts.compose(facts, name)

    async def due(self, reminder: Reminder, now: datetime) -> date | None:
        return due_day(reminder, await self.timezone(reminder.user_id, now), now)

    def next_time(self, reminder: Reminder, zone: str, now: datetime) -> datetime | None:
        """When it goes out next, in the learner's zone (for /remind's answer)."""
        if not reminder.enabled:
            return None
        local = now.astimezone(ZoneInfo(zone))
        for ahead in range(8):
            day = local.date() + timedelta(days=ahead)
            when = datetime.combine(day, reminder.at, tzinfo=ZoneInfo(zone))
            if day.weekday() in reminder.days and when > local:
                return when
        return None


def expires_at(day: date, zone: str) -> datetime:
    """When a reminder for `day` stops being worth sending: midnight ending that day, in the
    learner's zone. A reminder is about today's practice; delivered tomorrow it would be noise
    (and tomorrow's comes anyway)."""
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=ZoneInfo(zone))
