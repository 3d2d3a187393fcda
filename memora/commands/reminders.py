"""Commands for the daily practice reminder, the weekly report and the time zone they follow;
the work is in memora.reminders.remind."""

from __future__ import annotations

from memora.commands.registry import CommandContext, command
from memora.engine import Engine
from memora.i18n import _
from memora.reminders import remind, texts
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
        return Reply(_(texts.PRIVATE_ONLY), ok=False)
    return await remind.remind(engine.reminders, engine.weekly, ctx.user.id, ctx.chat.id, ctx.arg)


@command("timezone", "your time zone, for reminders", arg="[Area/City]")
async def _timezone(engine: Engine, ctx: CommandContext) -> Reply:
    """Show or set the caller's time zone: a field of their learner profile (reminders use it)."""

    return await remind.timezone(engine.reminders, engine.weekly, ctx.user.id, ctx.arg)
