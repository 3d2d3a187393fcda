"""Commands on the caller's long-term memories: list, save, search (with what a reply would
use), the last extraction, forget, undo; profile facts are listed beside them."""

from __future__ import annotations

from dataclasses import replace

from memora.commands.registry import CommandContext, command
from memora.engine import MAX_BUDGETED_MEMORIES, Engine
from memora.learner.model import PROFILE_FIELDS
from memora.learner.profile import TEACHING_FIELDS
from memora.longterm import MAX_MEMORY_CHARS, Memory
from memora.longterm.dedupe import normalise_text
from memora.longterm.policy import describe as describe_policy
from memora.secretfilter import looks_secret
from memora.views import Reply


@command(
    "memories", "your long-term memories, numbered", bare_word=True, fresh=True, needs_memory=True
)
async def _memories(engine: Engine, ctx: CommandContext) -> Reply:
    items = await _visible(engine, ctx)
    scoped = engine.memory_origin(ctx.chat) is not None
    profile = await _profile_facts(engine, ctx)
    if not items and not profile:
        if scoped:
            return Reply(f"I don't remember anything you said in this group yet. {PRIVATE_STAY}")
        return Reply(
            "I don't remember anything about you yet. Tell me about yourself, or /remember"
        )
    who = f" for {ctx.user.name}" if ctx.chat.is_group and ctx.user.name else ""
    parts = []
    if items:
        lines = []
        for i, m in enumerate(items, 1):
            was = f"  (was: {m.history[-1].text}; /undo {i})" if m.history else ""
            lines.append(f"{i}. {m.text} [{m.category}, {m.source}]{was}")
        parts.append(f"Memories{who} ({len(items)}):\n" + "\n".join(lines))
    else:
        parts.append(f"No other memories{who} yet: tell me about yourself, or /remember.")
    if profile:
        parts.append(PROFILE_FACTS + "\n" + "\n".join(profile))
    if scoped:
        parts.append(f"({PRIVATE_STAY})")
    return Reply("\n\n".join(parts))


PROFILE_FACTS = (
    "In your learner profile (always in my context; change with /profile set <field> <value> "
    "or /profile clear <field>):"
)


async def _profile_facts(engine: Engine, ctx: CommandContext) -> list[str]:
    """The caller's profile fields as /memories lists them (in a group under the default scope,
    only those a group reply uses: the rest stays in their private chats)."""
    if not engine.config.learner_enabled:
        return []
    profile = await engine.learner.profile(ctx.user.id, engine.clock())
    names = TEACHING_FIELDS if engine.memory_origin(ctx.chat) is not None else PROFILE_FIELDS
    return [
        f"• {name}: {profile.fields[name].value} ({profile.fields[name].source}, "
        f"{profile.fields[name].updated_at[:10]})"
        for name in names
        if name in profile.fields
    ]


PRIVATE_STAY = "Memories from your other chats stay private: see them in a private chat with me."
SEARCH_SHOWN = 10  # the memories /search lists


async def _visible(engine: Engine, ctx: CommandContext) -> list[Memory]:
    """The caller's memories this chat may show (in a group, by default, only that group's)."""
    return await engine.memories(ctx.user.id, origin_chat=engine.memory_origin(ctx.chat))


@command(
    "remember",
    "save a memory for you",
    arg="<text>",
    arg_required=True,
    needs_memory=True,
    runs_turn=True,
)
async def _remember(engine: Engine, ctx: CommandContext) -> Reply:
    text = ctx.arg.strip()
    if not normalise_text(text):
        return Reply("There is nothing to remember in that: write a few words.", ok=False)
    if looks_secret(text):
        return Reply("That looks like a password, key or card number — I never store those.")
    if len(text) > MAX_MEMORY_CHARS:
        return Reply(f"A memory must be short ({MAX_MEMORY_CHARS} characters at most).", ok=False)
    result = await engine.remember(ctx.chat, ctx.user, text, message_id=ctx.message_id)
    note = "I already remembered that." if result.action == "duplicate" else f"Saved: {text}"
    reply = await engine.handle_turn(
        ctx.chat, ctx.user, text, message_id=ctx.message_id, extract=False
    )
    return replace(reply, note=f"✅ {note}")  # the adapter shows it above the reply


@command(
    "search",
    "your memories ranked, with scores",
    arg="<query>",
    arg_required=True,
    needs_memory=True,
)
async def _search(engine: Engine, ctx: CommandContext) -> Reply:
    query = ctx.arg.strip()
    found = await engine.search_memories(  # as many as a reply ranks, to mark what it uses
        ctx.user.id,
        query,
        top_k=max(SEARCH_SHOWN, MAX_BUDGETED_MEMORIES),
        origin_chat=engine.memory_origin(ctx.chat),
    )
    if not found.hits:
        profile = await _profile_facts(engine, ctx)
        if profile:
            return Reply(
                "No memories to search yet.\n\n" + PROFILE_FACTS + "\n" + "\n".join(profile)
            )
        return Reply("No memories to search yet.")
    used = {h.memory.id for h in engine.used_in_reply(found.hits)}
    rule = describe_policy(engine.retrieval_policy)
    lines = [
        f"{i}. {h.score:.2f} {'✓' if h.memory.id in used else ' '} {h.memory.text}"
        for i, h in enumerate(found.hits[:SEARCH_SHOWN], 1)
    ]
    text = f"Search: {query}\n(✓ = would be used in a reply: {rule})\n" + "\n".join(lines)
    profile = await _profile_facts(engine, ctx)
    if profile:  # not ranked: the profile goes into every reply's context whole
        text += "\n\n" + PROFILE_FACTS + "\n" + "\n".join(profile)
    return Reply(text)


@command("extraction", "the last raw memory-extraction output for you", bare_word=True, fresh=True)
async def _extraction(engine: Engine, ctx: CommandContext) -> Reply:
    log = await engine.extraction_log(ctx.user.id)
    if log is None:
        return Reply("No extraction has run for you yet.")
    parts = [f"Last extraction: {log.status} at {log.at} ({log.tokens} tokens)"]
    parts.append("Raw output:\n" + (log.raw or "(none)"))
    if log.detail:
        parts.append("Result:\n" + log.detail)
    return Reply("\n\n".join(parts))


async def _pick(engine: Engine, ctx: CommandContext, name: str) -> Memory | Reply:
    """The memory numbered `ctx.arg` in /memories, or the answer saying why there is none."""
    items = await _visible(engine, ctx)
    try:
        n = int(ctx.arg.strip().lstrip("#"))
    except ValueError:
        return Reply(f"/{name} needs the number shown by /memories, e.g. /{name} 2", ok=False)
    if not 1 <= n <= len(items):
        return Reply(f"There is no memory number {n} (you have {len(items)}).", ok=False)
    return items[n - 1]


@command("forget", "delete one of your memories", arg="<n>", arg_required=True, needs_memory=True)
async def _forget(engine: Engine, ctx: CommandContext) -> Reply:
    memory = await _pick(engine, ctx, "forget")
    if isinstance(memory, Reply):
        return memory
    await engine.forget_memory(ctx.user.id, memory)
    return Reply(f"Forgotten: {memory.text}")


@command(
    "undo",
    "undo the last update of one of your memories",
    arg="<n>",
    arg_required=True,
    needs_memory=True,
)
async def _undo(engine: Engine, ctx: CommandContext) -> Reply:
    memory = await _pick(engine, ctx, "undo")
    if isinstance(memory, Reply):
        return memory
    restored = await engine.undo_memory(ctx.user.id, memory.id)
    if restored is None:
        return Reply("That memory has never been updated; nothing to undo.", ok=False)
    return Reply(f"Restored: {restored.text}")
