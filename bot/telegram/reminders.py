"""Scheduled messages on Telegram: one PTB JobQueue job per learner for the daily practice
reminder and one for the weekly report, restored at start-up.

The core decides (memora.reminders): whether a message is due now, the once-a-day or
once-a-week claim, the text (and the report's chart). This module only schedules: `run_daily` in
the learner's time zone, on their days (the weekly report: their weekday, at their reminder
time). At start-up every stored setting is scheduled again and a message that fell due earlier
the same day while the bot was down goes out once. A job claims its day or week and keeps the
message in the durable outbox in one transaction, then asks the outbox's sender to deliver the
chat: a crash after the claim, 429s beyond the rate limiter's retries and outages are the
outbox's to retry, and every send goes through the bot's rate limiter, so a thousand learners at
20:00 queue up instead of tripping Telegram's limits. A learner who blocked the bot (Forbidden,
reported back by the sender) has the message switched off and logged, never retried; a blocked
weekly report turns the daily reminder off too, and a blocked reminder the report.

`ScheduledJobs` keeps the jobs of one kind in step with its store; `ReminderJobs` and
`WeeklyJobs` say what their kind reads, when it goes, and what it sends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date, datetime, time
from typing import Any, Generic, Protocol, TypeVar
from zoneinfo import ZoneInfo

from telegram.error import Forbidden, TelegramError
from telegram.ext import Application, ContextTypes, Job, JobQueue

from memora.reminders import Reminder, Reminders, WeeklyReports, WeeklySetting
from memora.storage.durable import REMINDER, WEEKLY, Outgoing

from .outbox import Deliverer

log = logging.getLogger(__name__)

MISFIRE_GRACE = 600  # a job that could not start on time (busy loop, sleep) still runs


def ptb_days(days: tuple[int, ...]) -> tuple[int, ...]:
    """Python's Monday = 0 → PTB's Sunday = 0 (JobQueue.run_daily since v20)."""
    return tuple(sorted((d + 1) % 7 for d in days))


class Setting(Protocol):
    """What a stored setting (a reminder, a weekly report) tells the scheduler."""

    @property
    def user_id(self) -> int: ...

    @property
    def chat_id(self) -> int: ...

    @property
    def enabled(self) -> bool: ...


S = TypeVar("S", bound=Setting)
Follow = tuple[list[Callable[[Any], None]], Callable[[Any], None]]  # a store's listeners, ours


class SettingStore(Protocol[S]):
    """What the scheduler reads from the store of its kind (memora.reminders' Reminders and
    WeeklyReports): the clock, the settings, and whether one is due now."""

    @property
    def clock(self) -> Callable[[], datetime]: ...

    async def get(self, user_id: int) -> S | None: ...

    async def enabled(self) -> list[S]: ...

    async def due(self, setting: S, now: datetime) -> date | None:
        """The day (or week's day) to claim if the message is due at `now`, else None."""
        ...


class ScheduledJobs(Generic[S]):
    """Keeps the JobQueue in step with one kind of stored setting of one Application: a job per
    learner named `<kind>:<user id>`, the outbox's refusals of `kind` reported to `refused`."""

    def __init__(
        self,
        app: Application[Any, Any, Any, Any, Any, Any],
        store: SettingStore[S],
        deliverer: Deliverer,
        *,
        kind: str,
        what: str,
    ) -> None:
        if app.job_queue is None:
            raise RuntimeError(f"{what} need the JobQueue: pip install 'memora' (job-queue)")
        self.app = app
        self.store = store
        self.jobs: JobQueue[Any] = app.job_queue
        self.deliverer = deliverer
        self.kind = kind  # the outbox rows' kind and the jobs' names
        self.what = what  # for the log
        deliverer.on_refused[kind] = self.refused
        self.when: dict[int, tuple[str, time]] = {}  # the zone and time each job was set for
        # Each learner's job, kept here: JobQueue.get_jobs_by_name scans every job, which made
        # restoring N reminders O(N²) (minutes for a few thousand learners).
        self.scheduled: dict[int, Job[Any]] = {}
        self.follows: list[Follow] = []  # the stores' listeners this follows once restored

    # -- what the store says --------------------------------------------------------------------
    def now(self) -> datetime:
        return self.store.clock()

    async def get(self, user_id: int) -> S | None:
        return await self.store.get(user_id)

    async def enabled(self) -> list[S]:
        return await self.store.enabled()

    async def due(self, setting: S, now: datetime) -> date | None:
        return await self.store.due(setting, now)

    # -- what each kind says --------------------------------------------------------------------
    def days(self, setting: S) -> tuple[int, ...]:
        """The learner's days, Monday = 0."""
        raise NotImplementedError

    async def place(self, setting: S, now: datetime) -> tuple[str, time]:
        """The learner's zone and the time their job goes at."""
        raise NotImplementedError

    def moved(self, user_id: int, zone: str, at: time) -> bool:
        """Whether the job was set for another zone or time than the learner's now."""
        return self.when.get(user_id, (zone, at)) != (zone, at)

    async def queue(self, setting: S, day: date, now: datetime, zone: str) -> bool:
        """Claim the day (or week) and keep the message in the outbox; False if claimed."""
        raise NotImplementedError

    async def refused(self, item: Outgoing, exc: TelegramError) -> None:
        raise NotImplementedError

    # -- the jobs -------------------------------------------------------------------------------
    def unschedule(self, user_id: int) -> None:
        job = self.scheduled.pop(user_id, None)
        if job is not None and not job.removed:
            job.schedule_removal()
        self.when.pop(user_id, None)

    def schedule(self, setting: S, zone: str, at: time) -> None:
        """(Re)create the learner's job at `at` in `zone` on their days (`at` may differ from
        the stored one: benchmarks and tests fire soon)."""
        self.unschedule(setting.user_id)
        if not setting.enabled:
            return
        self.scheduled[setting.user_id] = self.jobs.run_daily(
            self._job,
            time=at.replace(tzinfo=ZoneInfo(zone)),
            days=ptb_days(self.days(setting)),
            name=f"{self.kind}:{setting.user_id}",
            data=setting.user_id,
            chat_id=setting.chat_id,
            user_id=setting.user_id,
            job_kwargs={"misfire_grace_time": MISFIRE_GRACE, "coalesce": True},
        )
        self.when[setting.user_id] = (zone, at)

    def changed(self, setting: S) -> None:
        """The store's listener: a learner set, moved, stopped or deleted their setting."""
        if not setting.enabled:
            self.unschedule(setting.user_id)
            return
        self.reschedule_soon(setting.user_id)

    def reschedule_soon(self, user_id: int) -> None:
        self.app.create_task(self._reschedule(user_id), name=f"{self.kind}-reschedule")

    async def _reschedule(self, user_id: int) -> None:
        setting = await self.get(user_id)
        if setting is not None:
            self.schedule(setting, *await self.place(setting, self.now()))

    async def restore(self) -> int:
        """Schedule every stored setting; send the ones missed today. Returns how many."""
        now = self.now()
        settings = await self.enabled()
        for setting in settings:
            self.schedule(setting, *await self.place(setting, now))
            if await self.due(setting, now) is not None:
                self.jobs.run_once(
                    self._job,
                    0,
                    data=setting.user_id,
                    name=f"{self.kind}-catch-up",
                    job_kwargs={"misfire_grace_time": MISFIRE_GRACE},
                )
        for listeners, listener in self.follows:
            listeners.append(listener)
        log.info("%s restored: %d scheduled", self.what, len(settings))
        return len(settings)

    def close(self) -> None:
        """Stop following the stores (the engine may outlive this Application)."""
        for listeners, listener in self.follows:
            if listener in listeners:
                listeners.remove(listener)

    async def _job(self, context: ContextTypes.DEFAULT_TYPE) -> None:
        job = context.job
        assert job is not None and isinstance(job.data, int)
        await self.deliver(job.data)

    async def deliver(self, user_id: int) -> bool:
        """Keep the learner's message in the outbox if it is due now and not yet claimed, then
        deliver the chat. True when this call claimed it (the outbox sends it, now or, after a
        429, an outage or a crash, later)."""
        setting = await self.get(user_id)
        if setting is None or not setting.enabled:
            self.unschedule(user_id)
            return False
        now = self.now()
        zone, at = await self.place(setting, now)
        if self.moved(user_id, zone, at):  # the learner moved, or a new reminder time
            self.schedule(setting, zone, at)
        day = await self.due(setting, now)
        if day is None:
            return False
        if not await self.queue(setting, day, now, zone):
            return False
        await self.deliverer.flush(setting.chat_id)
        return True


class ReminderJobs(ScheduledJobs[Reminder]):
    """The daily practice reminders: on their days at their time, in the learner's zone."""

    store: Reminders

    def __init__(
        self,
        app: Application[Any, Any, Any, Any, Any, Any],
        store: Reminders,
        deliverer: Deliverer,
    ) -> None:
        super().__init__(app, store, deliverer, kind=REMINDER, what="reminders")
        deliverer.clock = lambda: store.clock().timestamp()  # a reminder's day ends by its clock
        self.follows = [(store.listeners, self.changed)]

    def days(self, setting: Reminder) -> tuple[int, ...]:
        return setting.days

    async def place(self, setting: Reminder, now: datetime) -> tuple[str, time]:
        return await self.store.timezone(setting.user_id, now), setting.at

    def moved(self, user_id: int, zone: str, at: time) -> bool:
        """Only a new zone moves the job: its time may be a benchmark's, set on purpose."""
        placed = self.when.get(user_id)
        return placed is not None and placed[0] != zone

    async def queue(self, setting: Reminder, day: date, now: datetime, zone: str) -> bool:
        text = await self.store.text(setting.user_id, now)
        return await self.store.queue(setting, day, text, zone)

    async def refused(self, item: Outgoing, exc: TelegramError) -> None:
        """The outbox's report: Telegram refused a reminder for good. Blocked → off, with why."""
        if item.user_id is None or not isinstance(exc, Forbidden):
            return
        log.warning("reminder for user %s: %s; their reminders are now off", item.user_id, exc)
        await self.store.off(item.user_id, reason="blocked")


class WeeklyJobs(ScheduledJobs[WeeklySetting]):
    """The weekly reports: on the learner's weekday at their reminder time, in their zone."""

    store: WeeklyReports

    def __init__(
        self,
        app: Application[Any, Any, Any, Any, Any, Any],
        store: WeeklyReports,
        deliverer: Deliverer,
    ) -> None:
        super().__init__(app, store, deliverer, kind=WEEKLY, what="weekly reports")
        self.follows = [
            (store.listeners, self.changed),
            (store.reminders.listeners, self.reminder_changed),
        ]

    def days(self, setting: WeeklySetting) -> tuple[int, ...]:
        return (setting.weekday,)

    async def place(self, setting: WeeklySetting, now: datetime) -> tuple[str, time]:
        zone = await self.store.reminders.timezone(setting.user_id, now)
        return zone, await self.store.at(setting.user_id)

    async def queue(self, setting: WeeklySetting, day: date, now: datetime, zone: str) -> bool:
        report = await self.store.report(setting.user_id, now)
        return await self.store.queue(setting, day, report, zone)

    def reminder_changed(self, reminder: Reminder) -> None:
        """The reminders' listener: a new reminder time moves the report too; a learner whose
        reminder Telegram refused (blocked) gets no report either."""
        if reminder.off_reason == "blocked":
            self.app.create_task(self.store.off(reminder.user_id, "blocked"), name="weekly-off")
        elif reminder.user_id in self.scheduled:
            self.reschedule_soon(reminder.user_id)

    async def refused(self, item: Outgoing, exc: TelegramError) -> None:
        """The outbox's report: Telegram refused a weekly report for good. Blocked → off (the
        daily reminder too: it could not arrive either)."""
        if item.user_id is None or not isinstance(exc, Forbidden):
            return
        log.warning("weekly report for user %s: %s; it is now off", item.user_id, exc)
        await self.store.off(item.user_id, reason="blocked")
        if await self.store.reminders.get(item.user_id) is not None:
            await self.store.reminders.off(item.user_id, reason="blocked")
