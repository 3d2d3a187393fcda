"""Commands that show what the bot holds for this chat: its history, the last request sent to
the model, the running summary, the token and memory figures."""

from __future__ import annotations

from memora.commands.registry import CommandContext, command
from memora.engine import Engine
from memora.i18n import _, ngettext
from memora.llm import ChatMessage
from memora.shortterm.instructions import MEMORY_BLOCK, PROFILE_BLOCK
from memora.views import Reply, render_history, render_messages


@command("history", "this chat's full history", bare_word=True, fresh=True)
async def _history(engine: Engine, ctx: CommandContext) -> Reply:
    row = await engine.queries.chat_state(ctx.chat.id)
    return Reply(render_history(await engine.queries.history(ctx.chat.id), row.summarized_count))


@command("context", "exactly what the last request sent to the model", bare_word=True, fresh=True)
async def _context(engine: Engine, ctx: CommandContext) -> Reply:
    row = await engine.queries.chat_state(ctx.chat.id)
    if not row.last_context:
        shown = render_messages(_("Last request context"), [])
        return Reply(f"{await _mode_line(engine, ctx)}\n\n{shown}")
    sent = [ChatMessage("system", engine.state.config.instructions), *row.last_context]
    if ctx.chat.is_group:
        speaker = await engine.queries.last_speaker(ctx.chat.id)
        if speaker is not None and speaker[0] != ctx.user.id:
            sent = [_hide_memories(m, speaker[1]) for m in sent]
    shown = render_messages(_("Last request context (system prompt first)"), sent)
    return Reply(f"{await _mode_line(engine, ctx)}\n\n{shown}")


async def _mode_line(engine: Engine, ctx: CommandContext) -> str:
    """Which lesson mode the chat is in, as /status and /context show it."""
    mode = engine.lessons.describe_mode(await engine.lessons.mode(ctx.chat.id)) or _("none")
    return _("Lesson mode: {mode}").format(mode=mode)


def _hide_memories(message: ChatMessage, owner: str) -> ChatMessage:
    """In a group, another member's retrieved memories are theirs alone."""
    if message.role == "developer" and message.content.startswith(PROFILE_BLOCK):
        return ChatMessage(
            "developer",
            _("(the learner profile of {owner}, hidden)").format(
                owner=owner or _("another member")
            ),
        )
    if message.role != "developer" or not message.content.startswith(MEMORY_BLOCK):
        return message
    n = message.content.count("\n- ")
    return ChatMessage(
        "developer",
        ngettext(
            "({n} long-term memory of {owner}, hidden: only they can see it)",
            "({n} long-term memories of {owner}, hidden: only they can see them)",
            n,
        ).format(n=n, owner=owner or _("another member")),
    )


@command("summary", "the rolling summary of older turns", bare_word=True, fresh=True)
async def _summary(engine: Engine, ctx: CommandContext) -> Reply:
    row = await engine.queries.chat_state(ctx.chat.id)
    n = row.summarized_count
    head = ngettext("Summary (covers {n} message)", "Summary (covers {n} messages)", n).format(n=n)
    return Reply(f"{head}\n{row.summary or _('(empty)')}")


@command("status", "memory and token figures", bare_word=True, fresh=True)
async def _status(engine: Engine, ctx: CommandContext) -> Reply:
    status = (await engine.queries.status(ctx.chat.id, ctx.user.id)).render()
    return Reply(f"{status}\n{await _mode_line(engine, ctx)}")
