"""Commands of the learner model (profile, review cards, progress, mistakes, words, the language
the bot speaks); the work is in memora.learner.learner_commands."""

from __future__ import annotations

from memora.commands.registry import CommandContext, command
from memora.engine import Engine
from memora.i18n import N_, NAMES, _, choice, current, speaking
from memora.learner.learner_commands import (
    entries_command,
    group_profile,
    profile_command,
    progress_command,
    review_command,
)
from memora.views import Reply


@command(
    "profile",
    "your learner profile; /profile set <field> <value>, clear <field>, undo, history",
    arg="[set|clear|undo|history]",
    bare_word=True,
    fresh=True,
)
async def _profile(engine: Engine, ctx: CommandContext) -> Reply:
    if engine.memory_origin(ctx.chat) is not None:
        return await group_profile(engine.learner, ctx.user, ctx.arg, engine.state.now())
    who = ctx.user.name if ctx.chat.is_group else ""
    return await profile_command(engine.learner, ctx.user.id, ctx.arg, engine.state.now(), who)


@command(
    "review",
    "your due review cards, one at a time (in a group: privately)",
    arg="[show|again|hard|good|easy]",
    bare_word=True,
    fresh=True,
)
async def _review(engine: Engine, ctx: CommandContext) -> Reply:
    return await review_command(
        engine.learner, ctx.user.id, ctx.arg, engine.state.now(), group=ctx.chat.is_group
    )


@command(
    "progress",
    "your progress: level, streak, mistakes by week, vocabulary, goal countdown",
    bare_word=True,
    fresh=True,
    personal=True,
)
async def _progress(engine: Engine, ctx: CommandContext) -> Reply:
    return await progress_command(engine.learner, ctx.user.id, engine.state.now())


def _entries(name: str, kind: str, help: str) -> None:
    """Register /mistakes or /words: the learner's entries of `kind`, numbered; `delete <n>`
    removes one. `help` is marked with N_ where it is written (the catalog's extraction knows
    `command`, not this)."""

    async def entries(engine: Engine, ctx: CommandContext) -> Reply:
        return await entries_command(engine.learner, ctx.user.id, kind, ctx.arg)

    command(name, help, arg="[delete <n>]", bare_word=True, fresh=True, personal=True)(entries)


_entries(
    "mistakes",
    "mistake",
    N_("the mistakes I logged for you; /mistakes delete <n> removes a wrong one"),
)
_entries("words", "word", N_("your vocabulary list; /words delete <n> removes one"))


@command(
    "language",
    "the language of my own words: en, zh-Hant (繁體) or zh-Hans (简体); auto follows your profile",
    arg="[en|zh-Hant|zh-Hans|auto]",
)
async def _language(engine: Engine, ctx: CommandContext) -> Reply:
    word = ctx.arg.strip()
    if not word:
        return Reply(
            _(
                "I speak {name} to you. Change it with /language en, /language zh-Hant or "
                "/language zh-Hans; /language auto follows your profile and your app's language."
            ).format(name=NAMES[current()])
        )
    lang = None if word.lower() == "auto" else choice(word)
    if lang is None and word.lower() != "auto":
        return Reply(_("Usage: /language en|zh-Hant|zh-Hans|auto"), ok=False)
    await engine.people.set_language(ctx.user.id, lang)
    with speaking(await engine.language(ctx.user)) as now:
        return Reply(_("From now on I speak {name} to you.").format(name=NAMES[now]))
