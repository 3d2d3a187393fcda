"""Practice reminders on Telegram: one PTB JobQueue daily job per learner, restored at start-up.

The core decides (memora.reminders): whether a reminder is due now, the once-a-day claim, the
text. This module only schedules: `run_daily` in the learner's time zone; at start-up every
stored reminder is scheduled again and one that fell due while the bot was down goes out once,
if it is still the same day. The job claims the day and keeps the reminder in the durable outbox
in one transaction, then asks the outbox's sender to deliver the chat: a crash after the claim,
429s beyond the rate limiter's retries and outages are the outbox's to retry, and every send goes
through the bot's rate limiter, so a thousand learners at 20:00 queue up instead of tripping
Telegram's limits. A learner who blocked the bot (Forbidden, reported back by the sender for a
reminder row) has their reminder switched off and logged, never retried.
"""

from __future__ import annotations

import logging
from datetime import time
from typing import Any
from zoneinfo import ZoneInfo

from telegram.error import Forbidden, TelegramError
from telegram.ext import Application, ContextTypes, Job, JobQueue

from memora.reminders import Reminder, Reminders
from memora.storage.durable import REMINDER, Outgoing

from .outbox import Deliverer

log = logging.getLogger(__name__)

MISFIRE_GRACE = 600  # a job that could not start on time (busy loop, sleep) still runs


def _name(user_id: int) -> str:
    return f"reminder:{user_id}"


def _ptb_days(days: tuple[int, ...]) -> tuple[int, ...]:
    """Python's Monday = 0 → PTB's Sunday = 0 (JobQueue.run_daily since v20)."""
    return tuple(sorted((d + 1) % 7 for d in days))


class ReminderJobs:
    """Keeps the JobQueue in step with the stored reminders of one Application."""

    def __init__(
        self,
        app: Application[Any, Any, Any, Any, Any, Any],
        store: Reminders,
        deliverer: Deliverer,
    ) -> None:
        if app.job_queue is None:
            raise RuntimeError("reminders need the JobQueue: pip install 'memora' (job-queue)")
        self.app = app
        self.jobs: JobQueue[Any] = app.job_queue
        self.store = store
        self.deliverer = deliverer
        deliverer.on_refused[REMINDER] = self.refused
        deliverer.clock = lambda: store.clock().timestamp()  # a reminder's day ends by its clock
        self.zones: dict[int, str] = {}  # the zone each job was scheduled in
        # Each learner's job, kept here: JobQueue.get_jobs_by_name scans every job, which made
        # restoring N reminders O(N²) (minutes for a few thousand learners).
        self.daily: dict[int, Job[Any]] = {}

    def unschedule(self, user_id: int) -> None:
        job = self.daily.pop(user_id, None)
        if job is not None and not job.removed:
            job.schedule_removal()
        self.zones.pop(user_id, None)

    def schedule(self, reminder: Reminder, zone: str, at: time | None = None) -> None:
        """(Re)create the learner's daily job; `at` overrides the stored minute (benchmarks)."""
        self.unschedule(reminder.user_id)
        if not reminder.enabled:
            return
        local = (at or reminder.at).replace(tzinfo=ZoneInfo(zone))
        self.daily[reminder.user_id] = self.jobs.run_daily(
            self._job,
            time=local,
            days=_ptb_days(reminder.days),
            name=_name(reminder.user_id),
            data=reminder.user_id,
            chat_id=reminder.chat_id,
            user_id=reminder.user_id,
            job_kwargs={"misfire_grace_time": MISFIRE_GRACE, "coalesce": True},
        )
        self.zones[reminder.user_id] = zone

    def changed(self, reminder: Reminder) -> None:
        """The core's listener: a learner set, stopped or deleted their reminder."""
        if not reminder.enabled:
            self.unschedule(reminder.user_id)
            return
        self.app.create_task(self._reschedule(reminder.user_id), name="reminder-reschedule")

    async def _reschedule(self, user_id: int) -> None:
        reminder = await self.store.get(user_id)
        if reminder is not None:
            self.schedule(reminder, await self.store.timezone(user_id))

    async def restore(self) -> int:
        """Schedule every stored reminder; send the ones missed today. Returns how many."""
        now = self.store.clock()
        reminders = await self.store.enabled()
        for reminder in reminders:
            self.schedule(reminder, await self.store.timezone(reminder.user_id, now))
            if await self.store.due(reminder, now) is not None:
                self.jobs.run_once(
                    self._job,
                    0,
                    data=reminder.user_id,
                    name="reminder-catch-up",
                    job_kwargs={"misfire_grace_time": MISFIRE_GRACE},
                )
        self.store.listeners.append(self.changed)
        log.info("reminders restored: %d scheduled", len(reminders))
        return len(reminders)

    def close(self) -> None:
        """Stop following the store (the engine may outlive this Application)."""
        if self.changed in self.store.listeners:
            self.store.listeners.remove(self.changed)

    async def _job(self, context: ContextTypes.DEFAULT_TYPE) -> None:
        job = context.job
        assert job is not None and isinstance(job.data, int)
        await self.deliver(job.data)

    async def deliver(self, user_id: int) -> bool:
        """Keep the learner's reminder in the outbox if it is due now and not yet claimed
        today, then deliver the chat. True when this call claimed it (the outbox sends it, now
        or, after a 429, an outage or a crash, later)."""
        store = self.store
        reminder = await store.get(user_id)
        if reminder is None or not reminder.enabled:
            self.unschedule(user_id)
            return False
        now = store.clock()
        zone = await store.timezone(user_id, now)
        if self.zones.get(user_id, zone) != zone:  # the learner moved: follow their zone
            self.schedule(reminder, zone)
        day = await store.due(reminder, now)
        if day is None:
            return False
        text = await store.text(user_id, now)
        if not await store.queue(reminder, day, text, zone):
            return False
        await self.deliverer.flush(reminder.chat_id)
        return True

    async def refused(self, item: Outgoing, exc: TelegramError) -> None:
        """The outbox's report: Telegram refused a reminder for good. Blocked → off, with why."""
        if item.user_id is None or not isinstance(exc, Forbidden):
            return
        log.warning("reminder for user %s: %s; their reminders are now off", item.user_id, exc)
        await self.store.off(item.user_id, reason="blocked")
