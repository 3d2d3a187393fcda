"""What the scheduled messages say, in the current language (memora.i18n): the practice
reminder written from the learner model's facts, how a setting and a coming moment read, the
usage lines and why an argument of /remind was refused. The rules (daily.py, weekly.py) decide;
this module words."""

from __future__ import annotations

from datetime import datetime

from memora.i18n import N_, _, month_name, ngettext, weekday_name
from memora.learner.service import ReminderFacts
from memora.storage.schedules import EVERY_DAY, Reminder

LIST_SEPARATOR = N_(", ")  # between day names: "Mon, Wed"; 、 in Chinese

USAGE = N_(
    "Usage: /remind 20:00 (every day), /remind 20:00 mon-fri, /remind 08:30 sat,sun, "
    "/remind off; /remind alone shows your setting. Times are in your time zone (/timezone)."
)
PRIVATE_ONLY = N_("Reminders come to our private chat: send me /remind there.")
WEEKLY_USAGE = N_(
    "Weekly report: /remind weekly (Mondays) or /remind weekly fri, /remind weekly off, "
    "/remind weekly now to see it at once. It covers the 7 days before the day it comes, and "
    "comes at your reminder time."
)


def describe(reminder: Reminder) -> str:
    """'20:00 every day', in the current language."""
    return _("{time} {days}").format(
        time=reminder.at.strftime("%H:%M"), days=describe_days(reminder.days)
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


def not_a_time(text: str) -> str:
    return _("'{text}' is not a time I can read: write it as HH:MM, e.g. 20:00.").format(text=text)


def not_a_day(name: str) -> str:
    return _(
        "'{name}' is not a day I know: use mon, tue, wed, thu, fri, sat, sun, ranges such "
        "as mon-fri, or weekdays / weekends / daily."
    ).format(name=name)


def not_a_weekday(text: str) -> str:
    return _("'{text}' is not a day I know: use mon, tue, wed, thu, fri, sat, sun.").format(
        text=text
    )


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
