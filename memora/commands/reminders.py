"""Commands for the daily practice reminder, the weekly report and the time zone they follow."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from memora import reminders as rm
from memora.commands.registry import CommandContext, command
from memora.engine import Engine
from memora.i18n import N_, _
from memora.learner.profile import ProfileError, clean_value
from memora.views import Reply


@command(
    "remind",
    "a daily practice reminder in our private chat; /remind weekly for a weekly report on "
    "the 7 days before it; "
    "/remind off; /remind shows both",
    arg="[HH:MM [days] | weekly [day|off|now] | off]",
)
async def _remind(engine: Engine, ctx: CommandContext) -> Reply:
    """Set, stop or show the caller's practice reminder (sent in their private chat only)."""

    if ctx.chat.is_group:
        return Reply(_(rm.PRIVATE_ONLY), ok=False)
    store = engine.reminders
    now = store.clock()
    arg = ctx.arg.strip()
    if arg.lower().split(" ")[0] == "weekly":
        return await engine.weekly.command(ctx.user.id, ctx.chat.id, arg[len("weekly") :])
    if arg.lower() in {"off", "stop", "none", "no"}:
        stopped = await store.off(ctx.user.id)
        if stopped is None:
            return Reply(_("You have no reminder to stop. /remind 20:00 sets one."))
        return Reply(
            _("Reminders off (it was {reminder}). /remind 20:00 to start again.").format(
                reminder=stopped.describe()
            )
        )
    if arg:
        try:
            at, days = rm.parse_remind(arg)
        except rm.ReminderError as exc:
            return Reply(f"{exc}\n{_(rm.USAGE)}", ok=False)
        await store.set(ctx.user.id, ctx.chat.id, at, days)
        await engine.weekly.reminder_set(ctx.user.id, ctx.chat.id)  # [reminders] weekly
    daily = await _reminder_setting(engine, ctx.user.id, now, just_set=bool(arg))
    return Reply(daily + "\n" + await engine.weekly.describe(ctx.user.id, now))


async def _reminder_setting(engine: Engine, user_id: int, now: datetime, just_set: bool) -> str:
    store = engine.reminders
    reminder = await store.get(user_id)
    zone = await store.timezone(user_id, now)
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
        return off.format(reminder=reminder.describe())
    nxt = store.next_time(reminder, zone, now)
    head = _("⏰ Reminder set") if just_set else _("Your practice reminder")
    if nxt:
        line = _("{head}: {reminder} ({zone}); next: {when}. /remind off to stop.")
    else:
        line = _("{head}: {reminder} ({zone}). /remind off to stop.")
    text = line.format(
        head=head, reminder=reminder.describe(), zone=zone, when=rm.moment_text(nxt) if nxt else ""
    )
    if zone == "UTC":
        text += _(" Set your time zone with /timezone, e.g. /timezone Asia/Taipei.")
    return text


USAGE_REMIND = N_("Set one with /remind 20:00 (every day) or /remind 20:00 mon-fri.")


@command("timezone", "your time zone, for reminders", arg="[Area/City]")
async def _timezone(engine: Engine, ctx: CommandContext) -> Reply:
    """Show or set the caller's time zone: a field of their learner profile (reminders use it)."""

    store = engine.reminders
    now = store.clock()
    if not ctx.arg.strip():
        zone = await store.timezone(ctx.user.id, now)
        return Reply(
            _(
                "Your time zone: {zone}. Change it with /timezone Asia/Taipei (any IANA name)."
            ).format(zone=zone)
        )
    try:
        zone = clean_value("timezone", ctx.arg)
    except ProfileError as exc:
        return Reply(str(exc), ok=False)
    reminder = await store.set_timezone(ctx.user.id, zone, now)
    await engine.weekly.moved(ctx.user.id)  # the weekly report is rescheduled in it too
    local = now.astimezone(ZoneInfo(zone))
    text = _("Time zone set: {zone} (it is {time} there now).").format(
        zone=zone, time=f"{local:%H:%M}"
    )
    if reminder is not None and reminder.enabled:
        text += _(" Your reminder follows it: {reminder} {zone} time.").format(
            reminder=reminder.describe(), zone=zone
        )
    return Reply(text)
