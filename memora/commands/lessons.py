"""Lessons the tutor leads: /placement (the level test) and /cancel (leave any lesson mode).
/roleplay and /practice have their own modules; the modes themselves are in memora.modes."""

from __future__ import annotations

from memora.commands.registry import CommandContext, command
from memora.engine import Engine
from memora.i18n import _, ngettext
from memora.modes.placement import QUESTIONS, START_LEVEL
from memora.types import ChatRef
from memora.views import Reply

STOP_WORDS = frozenset({"stop", "end", "cancel", "quit"})


def lesson_refusal(engine: Engine, chat: ChatRef, name: str) -> Reply | None:
    """Why a lesson cannot start here: lessons run in the learner's private chat, with the
    learner model on."""
    if chat.is_group:
        return Reply(
            _("/{name} runs in our private chat: send it to me there.").format(name=name),
            ok=False,
        )
    if not engine.config.learner_enabled:
        return Reply(_("The learner model is turned off on this bot."), ok=False)
    return None


@command(
    "placement",
    "a short test of your English level (8 questions); /placement stop ends it",
    arg="[stop]",
    runs_turn=True,  # its first question is a turn: it takes the chat's lock itself
)
async def _placement(engine: Engine, ctx: CommandContext) -> Reply:
    if ctx.arg.strip().lower() in STOP_WORDS:
        return await stop_lesson(
            engine, ctx, "placement", _("There is no placement test running here.")
        )
    refused = lesson_refusal(engine, ctx.chat, "placement")
    if refused is not None:
        return refused
    level = await engine.lessons.learner_level(ctx.user.id) or START_LEVEL
    await engine.lessons.start_mode(
        ctx.chat, ctx.user, "placement", {"level": level, "answers": []}
    )
    # The first question is an ordinary reply to the command (the mode's block asks for it).
    reply = await engine.handle_turn(
        ctx.chat, ctx.user, "/placement", message_id=ctx.message_id, extract=False
    )
    if not reply.stored:  # the model could not be reached: no test was started
        await engine.lessons.leave_mode(ctx.chat.id)
        return reply
    intro = ngettext(
        "📝 Placement test: up to {n} short question. Answer it as well as you can; "
        "/placement stop ends it.",
        "📝 Placement test: up to {n} short questions. Answer each as well as you can; "
        "/placement stop ends it.",
        QUESTIONS,
    ).format(n=QUESTIONS)
    return Reply(reply.text, stats=reply.stats, stored=True, markdown=True, note=intro)


async def stop_lesson(engine: Engine, ctx: CommandContext, kind: str, missing: str) -> Reply:
    """`/<lesson> stop`: leave the chat's mode if it is this kind (else `missing`)."""
    mode = await engine.lessons.mode(ctx.chat.id)
    if mode is None or mode.kind != kind:
        return Reply(missing, ok=False)
    await engine.lessons.leave_mode(ctx.chat.id)
    if kind == "practice":  # each graded answer went to its item's review card, as it came
        kept = _("Stopped: {mode}. The answers graded so far are kept on their review cards.")
    else:
        kept = _("Stopped: {mode}. Nothing from it was written to your profile.")
    return Reply(kept.format(mode=engine.lessons.describe_mode(mode)))


@command("cancel", "leave the lesson in progress (placement, role-play, practice)", exclusive=True)
async def _cancel(engine: Engine, ctx: CommandContext) -> Reply:
    mode = await engine.lessons.leave_mode(ctx.chat.id)
    if mode is None:
        return Reply(_("There is no lesson in progress here."))
    return Reply(
        _("Ended: {mode}. We're back to normal conversation.").format(
            mode=engine.lessons.describe_mode(mode)
        )
    )
