"""/pin and /unpin, with the numbering of /memories; `pin` and `unpin` by memory id are the same
actions for any other place that names a memory by id (the web app's page)."""

from __future__ import annotations

from memora.commands.memory import memory_command
from memora.commands.registry import CommandContext
from memora.engine import Engine
from memora.i18n import N_, _, ngettext
from memora.longterm import Memory
from memora.longterm.retrieval_policy import pins_that_fit
from memora.views import Reply


async def pin(
    engine: Engine, user_id: int, memory_id: str, *, origin_chat: int | None = None
) -> Reply | None:
    """Pin the user's memory with this id, with /pin's answer (and its warning when the pins are
    more than the memory budget, counting the pins `origin_chat` may use; see
    `Engine.memory_origin`); None when the user has no such memory."""
    pinned = await engine.queries.pin_memory(user_id, memory_id, True)
    if pinned is None:
        return None
    text = _("Pinned: {text}. It goes into every reply's context first.").format(text=pinned.text)
    mine = await engine.queries.memories(user_id, origin_chat=origin_chat)
    pins = sum(1 for m in mine if m.pinned_at)
    fit = pins_that_fit(engine.retrieval.policy, mine)
    if fit < pins:
        text += "\n" + ngettext(
            "Your pins are more than my memory budget: only the newest {fit} of {pins} fits. "
            "/unpin one you need less.",
            "Your pins are more than my memory budget: only the newest {fit} of {pins} fit. "
            "/unpin one you need less.",
            fit,
        ).format(fit=fit, pins=pins)
    return Reply(text)


async def unpin(engine: Engine, user_id: int, memory_id: str) -> Reply | None:
    """Unpin the user's memory with this id, with /unpin's answer (refused when it is not
    pinned); None when the user has no such memory."""
    memory = await engine.queries.memory(user_id, memory_id)
    if memory is None:
        return None
    if not memory.pinned_at:
        return Reply(_("That memory is not pinned."), ok=False)
    await engine.queries.pin_memory(user_id, memory_id, False)
    return Reply(_("Unpinned: {text}").format(text=memory.text))


def _gone() -> Reply:
    return Reply(_("That memory is gone."), ok=False)


@memory_command("pin", N_("always keep one of your memories in mind"))
async def _pin(engine: Engine, ctx: CommandContext, memory: Memory) -> Reply:
    origin = engine.memory_origin(ctx.chat)
    return await pin(engine, ctx.user.id, memory.id, origin_chat=origin) or _gone()


@memory_command("unpin", N_("stop pinning one of your memories"))
async def _unpin(engine: Engine, ctx: CommandContext, memory: Memory) -> Reply:
    return await unpin(engine, ctx.user.id, memory.id) or _gone()
