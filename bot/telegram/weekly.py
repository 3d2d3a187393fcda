"""The weekly report on Telegram: one PTB JobQueue job per learner, on their weekday at their
reminder time in their time zone, restored at start-up.

The core decides (memora.weekly): whether the report is due now, the once-a-week claim, the text
and chart. This module schedules, as bot.telegram.reminders does for the daily reminder: at
start-up every stored report is scheduled again and one that fell due earlier the same day
while the bot was down goes out once. The job claims the week and keeps the report (a photo of
the /progress chart with the text as its caption) in the durable outbox in one transaction,
then asks the outbox's sender to deliver the chat. A learner who blocked the bot (Forbidden on
the report, or on their daily reminder) has the report switched off, never retried.
"""

from __future__ import annotations

import logging
from datetime import time
from typing import Any
from zoneinfo import ZoneInfo

from telegram.error import Forbidden, TelegramError
from telegram.ext import Application, ContextTypes, Job, JobQueue

from memora.reminders import Reminder
from memora.storage.durable import WEEKLY, Outgoing
from memora.weekly import WeeklyReports, WeeklySetting

from .outbox import Deliverer
from .reminders import MISFIRE_GRACE, _ptb_days

log = logging.getLogger(__name__)


def _name(user_id: int) -> str:
    return f"weekly:{user_id}"


class WeeklyJobs:
    """Keeps the JobQueue in step with the stored weekly reports of one Application."""

    def __init__(
        self,
        app: Application[Any, Any, Any, Any, Any, Any],
        store: WeeklyReports,
        deliverer: Deliverer,
    ) -> None:
        if app.job_queue is None:
            raise RuntimeError("the weekly report needs the JobQueue: pip install 'memora'")
        self.app = app
        self.jobs: JobQueue[Any] = app.job_queue
        self.store = store
        self.deliverer = deliverer
        deliverer.on_refused[WEEKLY] = self.refused
        self.when: dict[int, tuple[str, time]] = {}  # the zone and time each job was set for
        self.weekly: dict[int, Job[Any]] = {}

    def unschedule(self, user_id: int) -> None:
        job = self.weekly.pop(user_id, None)
        if job is not None and not job.removed:
            job.schedule_removal()
        self.when.pop(user_id, None)

    def schedule(self, setting: WeeklySetting, zone: str, at: time) -> None:
        """(Re)create the learner's weekly job at `at` in `zone` on their weekday."""
        self.unschedule(setting.user_id)
        if not setting.enabled:
            return
        self.weekly[setting.user_id] = self.jobs.run_daily(
            self._job,
            time=at.replace(tzinfo=ZoneInfo(zone)),
            days=_ptb_days((setting.weekday,)),
            name=_name(setting.user_id),
            data=setting.user_id,
            chat_id=setting.chat_id,
            user_id=setting.user_id,
            job_kwargs={"misfire_grace_time": MISFIRE_GRACE, "coalesce": True},
        )
        self.when[setting.user_id] = (zone, at)

    def changed(self, setting: WeeklySetting) -> None:
        """The weekly store's listener: a learner turned it on, moved it, stopped or deleted."""
        if not setting.enabled:
            self.unschedule(setting.user_id)
            return
        self.app.create_task(self._reschedule(setting.user_id), name="weekly-reschedule")

    def reminder_changed(self, reminder: Reminder) -> None:
        """The reminders' listener: a new reminder time moves the report too; a learner whose
        reminder Telegram refused (blocked) gets no report either."""
        if reminder.off_reason == "blocked":
            self.app.create_task(self.store.off(reminder.user_id, "blocked"), name="weekly-off")
        elif reminder.user_id in self.weekly:
            self.app.create_task(self._reschedule(reminder.user_id), name="weekly-reschedule")

    async def _reschedule(self, user_id: int) -> None:
        setting = await self.store.get(user_id)
        if setting is not None:
            zone = await self.store.reminders.timezone(user_id)
            self.schedule(setting, zone, await self.store.at(user_id))

    async def restore(self) -> int:
        """Schedule every stored weekly report; send the ones missed today. Returns how many."""
        now = self.store.clock()
        settings = await self.store.enabled()
        for setting in settings:
            zone = await self.store.reminders.timezone(setting.user_id, now)
            self.schedule(setting, zone, await self.store.at(setting.user_id))
            if await self.store.due(setting, now) is not None:
                self.jobs.run_once(
                    self._job,
                    0,
                    data=setting.user_id,
                    name="weekly-catch-up",
                    job_kwargs={"misfire_grace_time": MISFIRE_GRACE},
                )
        self.store.listeners.append(self.changed)
        self.store.reminders.listeners.append(self.reminder_changed)
        log.info("weekly reports restored: %d scheduled", len(settings))
        return len(settings)

    def close(self) -> None:
        """Stop following the stores (the engine may outlive this Application)."""
        if self.changed in self.store.listeners:
            self.store.listeners.remove(self.changed)
        if self.reminder_changed in self.store.reminders.listeners:
            self.store.reminders.listeners.remove(self.reminder_changed)

    async def _job(self, context: ContextTypes.DEFAULT_TYPE) -> None:
        job = context.job
        assert job is not None and isinstance(job.data, int)
        await self.deliver(job.data)

    async def deliver(self, user_id: int) -> bool:
        """Keep the learner's report in the outbox if it is due now and this week is not yet
        claimed, then deliver the chat. True when this call claimed the week."""
        store = self.store
        setting = await store.get(user_id)
        if setting is None or not setting.enabled:
            self.unschedule(user_id)
            return False
        now = store.clock()
        zone = await store.reminders.timezone(user_id, now)
        at = await store.at(user_id)
        if self.when.get(user_id, (zone, at)) != (zone, at):  # moved, or a new reminder time
            self.schedule(setting, zone, at)
        day = await store.due(setting, now)
        if day is None:
            return False
        if not await store.queue(setting, day, await store.report(user_id, now), zone):
            return False
        await self.deliverer.flush(setting.chat_id)
        return True

    async def refused(self, item: Outgoing, exc: TelegramError) -> None:
        """The outbox's report: Telegram refused a weekly report for good. Blocked → off (the
        daily reminder too: it could not arrive either)."""
        if item.user_id is None or not isinstance(exc, Forbidden):
            return
        log.warning("weekly report for user %s: %s; it is now off", item.user_id, exc)
        await self.store.off(item.user_id, reason="blocked")
        if await self.store.reminders.get(item.user_id) is not None:
            await self.store.reminders.off(item.user_id, reason="blocked")
