"""/pin and /unpin, with the numbering of /memories."""

from __future__ import annotations

from memora.commands.memory import _pick
from memora.commands.registry import CommandContext, command
from memora.engine import Engine
from memora.i18n import _
from memora.longterm.policy import pins_that_fit
from memora.views import Reply


@command(
    "pin",
    "always keep one of your memories in mind",
    arg="<n>",
    arg_required=True,
    needs_memory=True,
)
async def _pin(engine: Engine, ctx: CommandContext) -> Reply:
    memory = await _pick(engine, ctx, "pin")
    if isinstance(memory, Reply):
        return memory
    pinned = await engine.pin_memory(ctx.user.id, memory.id, True)
    if pinned is None:
        return Reply(_("That memory is gone."), ok=False)
    text = _("Pinned: {text}. It goes into every reply's context first.").format(text=memory.text)
    mine = await engine.memories(ctx.user.id, origin_chat=engine.memory_origin(ctx.chat))
    pins = sum(1 for m in mine if m.pinned_at)
    fit = pins_that_fit(engine.retrieval_policy, mine)
    if fit < pins:
        text += "\n" + _(
            "Your pins are more than my memory budget: only the newest {fit} of {pins} fit. "
            "/unpin one you need less."
        ).format(fit=fit, pins=pins)
    return Reply(text)


@command(
    "unpin", "stop pinning one of your memories", arg="<n>", arg_required=True, needs_memory=True
)
async def _unpin(engine: Engine, ctx: CommandContext) -> Reply:
    memory = await _pick(engine, ctx, "unpin")
    if isinstance(memory, Reply):
        return memory
    if not memory.pinned_at:
        return Reply(_("That memory is not pinned."), ok=False)
    await engine.pin_memory(ctx.user.id, memory.id, False)
    return Reply(_("Unpinned: {text}").format(text=memory.text))
