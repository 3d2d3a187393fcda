"""/practice: short exercises from the learner's own mistakes and words (memora.modes.practice);
/practice stop ends them. The first exercise is written by code: starting costs no model call."""

from __future__ import annotations

from memora.commands.lessons import STOP_WORDS, lesson_refusal, stop_lesson
from memora.commands.registry import CommandContext, command
from memora.engine import Engine
from memora.i18n import _, ngettext
from memora.modes.practice import build_items
from memora.views import Reply


@command(
    "practice",
    "short exercises from your own mistakes and words; /practice stop ends them",
    arg="[stop]",
    exclusive=True,
)
async def _practice(engine: Engine, ctx: CommandContext) -> Reply:
    if ctx.arg.strip().lower() in STOP_WORDS:
        return await stop_lesson(engine, ctx, "practice", _("There is no practice running here."))
    refused = lesson_refusal(engine, ctx.chat, "practice")
    if refused is not None:
        return refused
    items = await build_items(engine.learner.cards, ctx.user.id, engine.clock())
    if not items:
        return Reply(
            _(
                "There is nothing to practise yet: I haven't logged any mistakes or words of "
                "yours. Try /placement or /roleplay, or just chat with me."
            )
        )
    await engine.lessons.start_mode(ctx.chat, ctx.user, "practice", {"items": items, "results": []})
    intro = ngettext(
        "🏋️ Practice: {n} short exercise from your own mistakes and words; /practice stop ends it.",
        "🏋️ Practice: {n} short exercises from your own mistakes and words; /practice stop ends it.",
        len(items),
    ).format(n=len(items))
    first = _("Exercise {n} of {total}: {prompt}").format(
        n=1, total=len(items), prompt=items[0]["prompt"]
    )
    return Reply(f"{intro}\n\n{first}")
