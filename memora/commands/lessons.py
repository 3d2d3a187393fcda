"""Lessons the tutor leads, one command each: /placement (the level test), /roleplay (role-play
scenes), /practice (exercises from the learner's own items), and /cancel (leave any lesson
mode). The modes themselves are in memora.modes.

/roleplay with no argument suggests three scenes from the learner's goal, interests and memories
(as buttons too), and lists them all; `/roleplay <scene>`, `/roleplay <your own scene>` or a tap
on a suggestion starts one (the model opens it with an ordinary turn); `/roleplay end` ends it
with a debrief. /practice's first exercise is written by code: starting costs no model call."""

from __future__ import annotations

from memora.commands.registry import CommandContext, command
from memora.engine import Engine
from memora.i18n import _, ngettext
from memora.modes.placement import QUESTIONS, START_LEVEL
from memora.modes.practice import build_items
from memora.modes.roleplay import (
    BY_KEY,
    FREE_TEXT_CAP,
    SCENES,
    debrief,
    suggest,
)
from memora.modes.roleplay import START_LEVEL as SCENE_START_LEVEL
from memora.privacy.secretfilter import mask_secrets
from memora.types import ChatRef, UserRef
from memora.views import Button, ButtonAnswer, Reply

STOP_WORDS = frozenset({"stop", "end", "cancel", "quit"})


def lesson_refusal(engine: Engine, chat: ChatRef, name: str) -> Reply | None:
    """Why a lesson cannot start here: lessons run in the learner's private chat, with the
    learner model on."""
    if chat.is_group:
        return Reply(
            _("/{name} runs in our private chat: send it to me there.").format(name=name),
            ok=False,
        )
    if not engine.state.config.learner_enabled:
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


SCENE_BUTTON = "scene:"  # a suggestion's button data: SCENE_BUTTON + the scene's key


async def learner_text(engine: Engine, ctx: CommandContext) -> str:
    """What the suggestions are ranked against: the goal, interests and long-term memories."""
    profile = await engine.learner.profile(ctx.user.id, engine.state.now())
    parts = [profile.get("goal") or "", profile.get("interests") or ""]
    if engine.has_memory:
        parts += [m.text for m in await engine.queries.memories(ctx.user.id)]
    return " ".join(parts)


def menu(text: str) -> Reply:
    """All scenes, the three suggested for this learner first, with a button each."""
    picks = suggest(text)
    lines = [_("🎭 Role-play: I play the other side, you practise a real situation.")]
    lines.append(_("Suggested for you:"))
    lines += [f"• /roleplay {s.key} — {_(s.title)}" for s in picks]
    lines.append(_("All scenes:"))
    lines += [f"• {s.key} — {_(s.title)}" for s in SCENES]
    lines.append(_("Or describe your own: /roleplay <a scene in your words>. /roleplay end stops."))
    buttons = tuple((Button(f"🎭 {_(s.title)}", SCENE_BUTTON + s.key),) for s in picks)
    return Reply("\n".join(lines), buttons=buttons)


@command(
    "roleplay",
    "act out a scene (airport, hotel, interview…); /roleplay end stops with a debrief",
    arg="[scene | your own scene | end]",
    runs_turn=True,  # the scene's opening line is a turn: it takes the chat's lock itself
)
async def _roleplay(engine: Engine, ctx: CommandContext) -> Reply:
    arg = " ".join(ctx.arg.split())
    if arg.lower() in STOP_WORDS:
        return await end_scene(engine, ctx)
    refused = lesson_refusal(engine, ctx.chat, "roleplay")
    if refused is not None:
        return refused
    if not arg:
        return menu(await learner_text(engine, ctx))
    key = arg.lower()
    if key in BY_KEY:
        state: dict[str, object] = {"scene": key}
    else:
        state = {"scene": "custom", "text": mask_secrets(arg[:FREE_TEXT_CAP])}
    state["level"] = await engine.lessons.learner_level(ctx.user.id) or SCENE_START_LEVEL
    # What was logged before the scene stays out of its debrief (times can share a second).
    state["after"] = list(await engine.learner.entries.last_entry_ids(ctx.user.id))
    await engine.lessons.start_mode(ctx.chat, ctx.user, "roleplay", state)
    reply = await engine.handle_turn(
        ctx.chat, ctx.user, "/roleplay", message_id=ctx.message_id, extract=False
    )
    if not reply.stored:  # the model could not be reached: no scene was started
        await engine.lessons.leave_mode(ctx.chat.id)
        return reply
    mode = await engine.lessons.mode(ctx.chat.id)
    intro = _("🎭 {scene}. Stay in the scene; /roleplay end stops it with a debrief.").format(
        scene=engine.lessons.describe_mode(mode)
    )
    return Reply(reply.text, stats=reply.stats, stored=True, markdown=True, note=intro)


async def end_scene(engine: Engine, ctx: CommandContext) -> Reply:
    """`/roleplay end`: wait for the scene's last extraction, then the debrief."""
    await engine.settle(ctx.chat.id, ctx.user.id)
    mode = await engine.lessons.mode(ctx.chat.id)
    if mode is None or mode.kind != "roleplay":
        return Reply(_("There is no role-play scene running here."), ok=False)
    text = await debrief(engine.learner, mode, ctx.user.id)
    await engine.lessons.leave_mode(ctx.chat.id)
    return Reply(text)


async def press_scene(engine: Engine, chat: ChatRef, user: UserRef, key: str) -> ButtonAnswer:
    """A tap on a suggested scene: checked here, then run by the adapter as `/roleplay <key>`.
    An unknown scene is forged; a tap while a lesson runs comes from an old menu, except this
    very scene before its opening line was stored (the tap delivered again after a crash)."""
    scene = BY_KEY.get(key)
    if scene is None:
        text = _("That button isn't one I can use (it may be from an old message). Send /roleplay.")
        return ButtonAnswer(text, alert=True)
    refused = lesson_refusal(engine, chat, "roleplay")
    if refused is not None:
        return ButtonAnswer(refused.text, alert=True)
    mode = await engine.lessons.mode(chat.id)
    unopened = mode is not None and mode.step == 0 and mode.state.get("scene") == key
    if mode is not None and not unopened:
        text = _("A lesson is running here ({lesson}): finish it or send /cancel first.")
        return ButtonAnswer(text.format(lesson=engine.lessons.describe_mode(mode)), alert=True)
    title = _(scene.title)
    return ButtonAnswer(
        f"🎭 {title}",
        edit=Reply(_("🎭 Role-play: {scene}").format(scene=title)),
        command=f"/roleplay {key}",
    )


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
    items = await build_items(engine.learner.cards, ctx.user.id, engine.state.now())
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
