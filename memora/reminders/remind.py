"""/remind and its subcommands (`/remind HH:MM [days]`, `off`, `weekly [day|off|now]`) and
/timezone: the answers any adapter renders, over the daily reminders and the weekly reports.
Registered as commands by memora.commands.reminders."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from memora.errors import ReminderError
from memora.i18n import N_, _, current, weekday_name
from memora.learner.profile import ProfileError, clean_value
from memora.reminders import texts
from memora.reminders.daily import Reminders, parse_remind
from memora.reminders.weekly import WeeklyReports, parse_weekday
from memora.views import Reply

USAGE_REMIND = N_("Set one with /remind 20:00 (every day) or /remind 20:00 mon-fri.")


async def remind(
    reminders: Reminders, weekly: WeeklyReports, user_id: int, chat_id: int, arg: str
) -> Reply:
    """Set, stop or show the caller's practice reminder and weekly report (`arg`: what follows
    /remind). Private chats only: the caller checks."""
    now = reminders.clock()
    arg = arg.strip()
    if arg.lower().split(" ")[0] == "weekly":
        return await remind_weekly(weekly, user_id, chat_id, arg[len("weekly") :])
    if arg.lower() in {"off", "stop", "none", "no"}:
        stopped = await reminders.off(user_id)
        if stopped is None:
            return Reply(_("You have no reminder to stop. /remind 20:00 sets one."))
        return Reply(
            _("Reminders off (it was {reminder}). /remind 20:00 to start again.").format(
                reminder=texts.describe(stopped)
            )
        )
    if arg:
        try:
            at, days = parse_remind(arg)
        except ReminderError as exc:
            return Reply(f"{exc}\n{_(texts.USAGE)}", ok=False)
        await reminders.set(user_id, chat_id, at, days)
        await weekly.reminder_set(user_id, chat_id)  # [reminders] weekly
    daily = await _reminder_setting(reminders, user_id, now, just_set=bool(arg))
    return Reply(daily + "\n" + await describe_weekly(weekly, user_id, now))


async def _reminder_setting(
    reminders: Reminders, user_id: int, now: datetime, just_set: bool
) -> str:
    reminder = await reminders.get(user_id)
    zone = await reminders.timezone(user_id, now)
    if reminder is None:
        return _("You have no practice reminder. ") + _(USAGE_REMIND)
    if not reminder.enabled:
        if reminder.off_reason == "blocked":
            off = _(
                "Your reminder ({reminder}) is off because Telegram said you blocked me. "
                "/remind 20:00 to start again."
            )
        else:
            off = _("Your reminder ({reminder}) is off. /remind 20:00 to start again.")
        return off.format(reminder=texts.describe(reminder))
    nxt = reminders.next_time(reminder, zone, now)
    head = _("⏰ Reminder set") if just_set else _("Your practice reminder")
    if nxt:
        line = _("{head}: {reminder} ({zone}); next: {when}. /remind off to stop.")
    else:
        line = _("{head}: {reminder} ({zone}). /remind off to stop.")
    text = line.format(
        head=head,
        reminder=texts.describe(reminder),
        zone=zone,
        when=texts.moment_text(nxt) if nxt else "",
    )
    if zone == "UTC":
        text += _(" Set your time zone with /timezone, e.g. /timezone Asia/Taipei.")
    return text


async def remind_weekly(weekly: WeeklyReports, user_id: int, chat_id: int, arg: str) -> Reply:
    """`/remind weekly [day|off|now]` (arg: what follows "weekly")."""
    now = weekly.clock()
    word = arg.strip().lower()
    if word in {"off", "stop", "no", "none"}:
        if await weekly.off(user_id) is None:
            return Reply(_("You have no weekly report to stop. /remind weekly turns it on."))
        return Reply(_("Weekly report off. /remind weekly to turn it on again."))
    if word in {"now", "preview", "show"}:
        rep = await weekly.report(user_id, now, lang=current())
        return Reply(rep.text, photo=rep.chart)
    try:
        weekday = parse_weekday(word) if word else 0
    except ReminderError as exc:
        return Reply(f"{exc}\n{_(texts.WEEKLY_USAGE)}", ok=False)
    await weekly.set(user_id, chat_id, weekday)
    return Reply("📅 " + await describe_weekly(weekly, user_id, now))


async def describe_weekly(weekly: WeeklyReports, user_id: int, now: datetime) -> str:
    """One line on the learner's weekly report, for /remind."""
    setting = await weekly.get(user_id)
    if setting is None:
        return _("Weekly report: off (/remind weekly turns it on).")
    if not setting.enabled:
        if setting.off_reason == "blocked":
            return _(
                "Weekly report: off because Telegram said you blocked me "
                "(/remind weekly turns it on)."
            )
        return _("Weekly report: off (/remind weekly turns it on).")
    at = await weekly.at(user_id)
    if await weekly.reminders.get(user_id):
        whose = _("your reminder time")
    else:
        whose = _("until you set a reminder")
    nxt = await weekly.next_time(setting, now)
    if nxt:
        line = _(
            "Weekly report: on, {day}s at {time} ({whose}); next: {when}. "
            "/remind weekly off to stop it; /remind weekly now to see it now."
        )
    else:
        line = _(
            "Weekly report: on, {day}s at {time} ({whose}). "
            "/remind weekly off to stop it; /remind weekly now to see it now."
        )
    return line.format(
        day=weekday_name(setting.weekday),
        time=f"{at:%H:%M}",
        whose=whose,
        when=texts.moment_text(nxt) if nxt else "",
    )


async def timezone(reminders: Reminders, weekly: WeeklyReports, user_id: int, arg: str) -> Reply:
    """Show or set the caller's time zone: a field of their learner profile; the reminder and
    the weekly report follow it."""
    now = reminders.clock()
    if not arg.strip():
        zone = await reminders.timezone(user_id, now)
        return Reply(
            _(
                "Your time zone: {zone}. Change it with /timezone Asia/Taipei (any IANA name)."
            ).format(zone=zone)
        )
    try:
        zone = clean_value("timezone", arg)
    except ProfileError as exc:
        return Reply(str(exc), ok=False)
    reminder = await reminders.set_timezone(user_id, zone, now)
    await weekly.moved(user_id)  # the weekly report is rescheduled in it too
    local = now.astimezone(ZoneInfo(zone))
    text = _("Time zone set: {zone} (it is {time} there now).").format(
        zone=zone, time=f"{local:%H:%M}"
    )
    if reminder is not None and reminder.enabled:
        text += _(" Your reminder follows it: {reminder} {zone} time.").format(
            reminder=texts.describe(reminder), zone=zone
        )
    return Reply(text)
