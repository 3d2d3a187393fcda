"""Scheduled messages: the daily practice reminder and the weekly report, platform-neutral.

Its parts: daily.py (the practice reminder's rules: its time and days, when it is due, the day's
claim), weekly.py (the weekly report's rules: who wants it, which weekday, the week's claim),
report.py (the report's text from the learner model), texts.py (what the reminders and /remind
say), remind.py (/remind and its subcommands, /timezone). Their rows are
memora.storage.schedules'; the Telegram adapter schedules them (bot.telegram.reminders).
"""

from memora.errors import ReminderError
from memora.reminders.daily import (
    DAY_NAMES,
    Reminders,
    due_day,
    expires_at,
    parse_days,
    parse_remind,
    parse_time,
)
from memora.reminders.texts import PRIVATE_ONLY, USAGE, compose, describe, moment_text
from memora.reminders.weekly import Report, WeeklyReports, parse_weekday, week_key
from memora.storage.schedules import EVERY_DAY, Reminder, WeeklySetting

__all__ = [
    "DAY_NAMES",
    "EVERY_DAY",
    "PRIVATE_ONLY",
    "USAGE",
    "Reminder",
    "ReminderError",
    "Reminders",
    "Report",
    "WeeklyReports",
    "WeeklySetting",
    "compose",
    "describe",
    "due_day",
    "expires_at",
    "moment_text",
    "parse_days",
    "parse_remind",
    "parse_time",
    "parse_weekday",
    "week_key",
]
