"""Practice reminders: a learner's time and days, stored; the text written from memory.

Platform-neutral: this module stores the setting, decides whether a reminder is due *now*, claims
the day's send durably (so a restart, a catch-up and a second replica never send twice) and
writes the text from the learner model — cards due, goal countdown, recurring difficulty, streak —
without any LLM call, in the learner's language (resolved from their profile: a reminder has no
message to take the app's language from). The Telegram adapter schedules it (PTB's JobQueue);
the durable outbox sends it.

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
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from memora.clock import now as clock_now
from memora.errors import ReminderError as ReminderError  # re-exported
from memora.i18n import DEFAULT, N_, _, month_name, ngettext, speaking, weekday_name
from memora.learner.service import Learner, ReminderFacts
from memora.storage import Database
from memora.storage.durable import REMINDER, Kept, keep

log = logging.getLogger(__name__)

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # Python's weekday(): Monday = 0
LIST_SEPARATOR = N_(", ")  # between day names: "Mon, Wed"; 、 in Chinese
EVERY_DAY: tuple[int, ...] = tuple(range(7))
_ALIASES = {
    "daily": EVERY_DAY,
    "everyday": EVERY_DAY,
    "weekdays": (0, 1, 2, 3, 4),
    "weekends": (5, 6),
    "weekend": (5, 6),
}
_TIME = re.compile(r"^([01]?\d|2[0-3])[:.h]([0-5]\d)$")

USAGE = N_(
    "Usage: /remind 20:00 (every day), /remind 20:00 mon-fri, /remind 08:30 sat,sun, "
    "/remind off; /remind alone shows your setting. Times are in your time zone (/timezone)."
)
PRIVATE_ONLY = N_("Reminders come to our private chat: send me /remind there.")


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

    def describe(self) -> str:
        """'20:00 every day', in the current language."""
        return _("{time} {days}").format(
            time=self.at.strftime("%H:%M"), days=describe_days(self.days)
        )


def describe_days(days: tuple[int, ...]) -> str:
    """'every day', 'Mon–Fri', 'Mon, Wed', in the current language."""
    if tuple(days) == EVERY_DAY:
        return _("every day")
    if tuple(days) == (0, 1, 2, 3, 4):
        return _("Mon–Fri")
    if tuple(days) == (5, 6):
        return _("Sat–Sun")
    return _(LIST_SEPARATOR).join(weekday_name(d) for d in days)


def moment_text(moment: datetime) -> str:
    """A coming moment for /remind's answers, 'Mon 07 Dec 20:00', in the current language."""
    return _("{weekday} {day} {month} {time}").format(
        weekday=weekday_name(moment.weekday()),
        day=f"{moment:%d}",
        month=month_name(moment.month),
        time=f"{moment:%H:%M}",
    )


def parse_time(text: str) -> time:
    m = _TIME.match(text.strip().lower())
    if not m:
        raise ReminderError(
            _("'{text}' is not a time I can read: write it as HH:MM, e.g. 20:00.").format(text=text)
        )
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
        raise ReminderError(
            _(
                "'{name}' is not a day I know: use mon, tue, wed, thu, fri, sat, sun, ranges such "
                "as mon-fri, or weekdays / weekends / daily."
            ).format(name=name)
        )
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


def compose(facts: ReminderFacts | None, name: str = "") -> str:
    """The reminder in the current language, from what the learner model knows; each piece only
    when it is there."""
    if name:
        lines = [_("⏰ Hi {name}! Time for your English practice.").format(name=name)]
    else:
        lines = [_("⏰ Time for your English practice.")]
    if facts is not None and facts.due_cards:
        n = facts.due_cards
        due = ngettext("• {n} review card due — /review", "• {n} review cards due — /review", n)
        lines.append(due.format(n=n))
    if facts is not None and facts.goal_countdown:
        lines.append(_("• Goal: {countdown}").format(countdown=facts.goal_countdown))
    if facts is not None and facts.difficulty:
        lines.append(
            _("• Something to work on: {what} (your most frequent mistake lately)").format(
                what=facts.difficulty
            )
        )
    if facts is not None and facts.streak >= 2:
        lines.append(_("• 🔥 {n}-day streak — keep it going!").format(n=facts.streak))
    lines.append(_("Send me a message or a voice note to start. (/remind off to stop these.)"))
    return "\n".join(lines)


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
        self.learner = learner or Learner(db)  # the profile (time zone) and the reminder facts
        self.clock = clock
        self.listeners: list[Listener] = []  # the adapter's scheduler, told of every change

    # -- the setting --------------------------------------------------------------------------
    async def get(self, user_id: int) -> Reminder | None:
        async with self.db.connection.db.execute(
            "SELECT user_id, chat_id, at, days, enabled, updated_at, last_sent, off_reason "
            "FROM reminders WHERE user_id=?",
            (user_id,),
        ) as cur:
            row = await cur.fetchone()
        return _row(row) if row else None

    async def enabled(self) -> list[Reminder]:
        async with self.db.connection.db.execute(
            "SELECT user_id, chat_id, at, days, enabled, updated_at, last_sent, off_reason "
            "FROM reminders WHERE enabled=1 ORDER BY user_id"
        ) as cur:
            return [_row(r) for r in await cur.fetchall()]

    async def set(self, user_id: int, chat_id: int, at: time, days: tuple[int, ...]) -> Reminder:
        now = self.clock().astimezone(UTC).isoformat(timespec="seconds")
        async with self.db.connection.transaction() as db:
            await db.execute(
                "INSERT INTO reminders(user_id, chat_id, at, days, enabled, updated_at) "
                "VALUES (?,?,?,?,1,?) ON CONFLICT(user_id) DO UPDATE SET chat_id=excluded.chat_id,"
                " at=excluded.at, days=excluded.days, enabled=1, updated_at=excluded.updated_at,"
                " off_reason=''",
                (user_id, chat_id, at.strftime("%H:%M"), _days_text(days), now),
            )
        return await self._changed(user_id)

    async def off(self, user_id: int, reason: str = "you") -> Reminder | None:
        async with self.db.connection.transaction() as db:
            await db.execute(
                "UPDATE reminders SET enabled=0, off_reason=? WHERE user_id=?", (reason, user_id)
            )
        return await self._changed(user_id) if await self.get(user_id) else None

    async def delete_user(self, user_id: int) -> int:
        async with self.db.connection.transaction() as db:
            cur = await db.execute("DELETE FROM reminders WHERE user_id=?", (user_id,))
            n = cur.rowcount or 0
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
        async with self.db.connection.transaction() as db:
            return await _claim(db, user_id, day)

    async def queue(self, reminder: Reminder, day: date, text: str, zone: str) -> bool:
        """Claim the day and keep the reminder in the outbox, in one transaction: False (and
        nothing kept) if the day was claimed already or the reminder is off. It expires when
        the learner's local day ends (`expires_at`)."""
        row = Kept(json.dumps({"text": text}), REMINDER, expires_at(day, zone).timestamp())
        async with self.db.connection.transaction() as db:
            if not await _claim(db, reminder.user_id, day):
                return False
            return await keep(
                db, self.db.connection.dialect, reminder.chat_id, reminder.user_id, [row]
            )

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
            return compose(facts, name)

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


async def _claim(db: Any, user_id: int, day: date) -> bool:
    cur = await db.execute(
        "UPDATE reminders SET last_sent=? WHERE user_id=? AND enabled=1 AND last_sent < ?",
        (day.isoformat(), user_id, day.isoformat()),
    )
    return (cur.rowcount or 0) == 1


def _days_text(days: tuple[int, ...]) -> str:
    return ",".join(str(d) for d in sorted(set(days)))


def _row(row: Any) -> Reminder:
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
