"""Commands on the caller's data as a whole: a fresh start in this chat, forgetting everything
about them, and (admins) a chat's export."""

from __future__ import annotations

import json

from memora.commands.registry import CommandContext, command
from memora.engine import Engine
from memora.i18n import _, ngettext
from memora.privacy.confirmations import FORGETME, ask
from memora.views import Document, Reply


@command("reset", "start a fresh conversation in this chat (memories stay)", exclusive=True)
async def _reset(engine: Engine, ctx: CommandContext) -> Reply:
    mode = await engine.lessons.mode(ctx.chat.id)  # the reset leaves it too
    n = await engine.queries.reset_chat(ctx.chat.id)
    done = ngettext(
        "Fresh start: deleted this chat's history ({n} message) and summary. "
        "Your long-term memories stay (/memories).",
        "Fresh start: deleted this chat's history ({n} messages) and summary. "
        "Your long-term memories stay (/memories).",
        n,
    ).format(n=n)
    if mode is not None:
        done += "\n" + _("Ended: {mode}.").format(mode=engine.lessons.describe_mode(mode))
    return Reply(done)


@command("forgetme", "delete everything stored about you (asks first)")
async def _forgetme(engine: Engine, ctx: CommandContext) -> Reply:
    """Asks first: only a Yes from the caller, in this chat, in time, deletes (commands/answers)."""
    buttons = await ask(engine.db.asks, ctx.chat, ctx.user, FORGETME, engine.state.now())
    question = _(
        "Delete everything I stored about you? Your long-term memories, our private chat, your "
        "messages in groups, your learner profile, mistakes, vocabulary, review cards and "
        "reminders all go, for good: nothing can bring them back."
    )
    return Reply(question, buttons=buttons)


@command(
    "export",
    "(admin) this chat's data as JSON; /export <chat_id> for another chat",
    admin_only=True,
    private_only=True,
    fresh=True,
)
async def _export(engine: Engine, ctx: CommandContext) -> Reply:
    target = ctx.chat.id
    if ctx.arg.strip():
        try:
            target = int(ctx.arg.strip())
        except ValueError:
            return Reply(_("Usage: /export [chat_id] — the chat id is a number."), ok=False)
    data = await engine.export.export_chat(target)
    if data is None:
        return Reply(_("I have no data for chat {chat}.").format(chat=target), ok=False)
    blob = json.dumps(data, ensure_ascii=False, indent=2).encode()
    n = len(data["history"])
    return Reply(
        ngettext(
            "Export of chat {chat}: {n} message.", "Export of chat {chat}: {n} messages.", n
        ).format(chat=target, n=n),
        document=Document(
            f"memora-chat-{target}.json",
            blob,
            ngettext("chat {chat}, {n} message", "chat {chat}, {n} messages", n).format(
                chat=target, n=n
            ),
        ),
    )


@command(
    "usage",
    "(admin) what each learner spent over the last days (7 if left out)",
    arg="[days]",
    admin_only=True,
    private_only=True,
    fresh=True,  # this chat's last turn counted
)
async def _usage(engine: Engine, ctx: CommandContext) -> Reply:
    arg = ctx.arg.strip() or "7"
    if not arg.isdigit() or not 1 <= int(arg) <= 366:
        return Reply(_("Usage: /usage [days] — 1 to 366 days, 7 if left out."), ok=False)
    if engine.state.metering is None:
        return Reply(_("Usage is not counted on this bot."), ok=False)
    return Reply(await engine.state.metering.report(int(arg), engine.state.now()))
