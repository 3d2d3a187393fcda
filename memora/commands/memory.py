"""Commands on the caller's long-term memories: list, save, search (with what a reply would
use), the last extraction, forget, undo; profile facts are listed beside them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from memora.commands.dated import dates_label
from memora.commands.registry import CommandContext, command
from memora.engine import MAX_BUDGETED_MEMORIES, Engine
from memora.engine.queries import memory_text_refusal
from memora.i18n import N_, _, ngettext
from memora.learner.model import PROFILE_FIELDS
from memora.learner.profile import TEACHING_FIELDS
from memora.longterm import Memory
from memora.longterm.dedupe import normalise_text
from memora.longterm.retrieval_policy import describe as describe_policy
from memora.longterm.retrieval_policy import used_in_time
from memora.privacy.secretfilter import looks_secret
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
            return Reply(
                _("I don't remember anything you said in this group yet.") + " " + _(PRIVATE_STAY)
            )
        return Reply(
            _("I don't remember anything about you yet. Tell me about yourself, or /remember")
        )
    named = ctx.chat.is_group and ctx.user.name
    parts = []
    if items:
        lines = []
        today = await engine.people.today(ctx.user)
        for i, m in enumerate(items, 1):
            was = (
                _("  (was: {text}; /undo {n})").format(text=m.history[-1].text, n=i)
                if m.history and _undoable_here(engine, ctx, m)
                else ""
            )
            dates = dates_label(m, today)
            lines.append(f"{i}. {m.text} [{m.category}, {m.source}; {dates}]{was}")
        head = _("Memories for {name} ({n}):") if named else _("Memories ({n}):")
        parts.append(head.format(name=ctx.user.name, n=len(items)) + "\n" + "\n".join(lines))
    elif named:
        parts.append(
            _("No other memories for {name} yet: tell me about yourself, or /remember.").format(
                name=ctx.user.name
            )
        )
    else:
        parts.append(_("No other memories yet: tell me about yourself, or /remember."))
    if profile:
        parts.append(_(PROFILE_FACTS) + "\n" + "\n".join(profile))
    if scoped:
        parts.append(f"({_(PRIVATE_STAY)})")
    return Reply("\n\n".join(parts))


PROFILE_FACTS = N_(
    "In your learner profile (always in my context; change with /profile set <field> <value> "
    "or /profile clear <field>):"
)


async def _profile_facts(engine: Engine, ctx: CommandContext) -> list[str]:
    """The caller's profile fields as /memories lists them (in a group under the default scope,
    only those a group reply uses: the rest stays in their private chats)."""
    if not engine.state.config.learner_enabled:
        return []
    profile = await engine.learner.profile(ctx.user.id, engine.state.now())
    names = TEACHING_FIELDS if engine.memory_origin(ctx.chat) is not None else PROFILE_FIELDS
    return [
        f"• {name}: {profile.fields[name].value} ({profile.fields[name].source}, "
        f"{profile.fields[name].updated_at[:10]})"
        for name in names
        if name in profile.fields
    ]


ELSEWHERE = N_(
    "Your last /{name} is from another chat, so it stays private: send /{name} in a private "
    "chat with me."
)
PRIVATE_STAY = N_(
    "Memories from your other chats stay private: see them in a private chat with me."
)
SEARCH_SHOWN = 10  # the memories /search lists


async def _visible(engine: Engine, ctx: CommandContext) -> list[Memory]:
    """The caller's memories this chat may show (in a group, by default, only that group's)."""
    return await engine.queries.memories(ctx.user.id, origin_chat=engine.memory_origin(ctx.chat))


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
    refusal = memory_text_refusal(text)
    if refusal is not None:  # a secret is not the learner's mistake: that answer is not an error
        return Reply(refusal, ok=looks_secret(text) and bool(normalise_text(text)))
    result = await engine.queries.remember(ctx.chat, ctx.user, text, message_id=ctx.message_id)
    if result.action == "duplicate":
        note = _("I already remembered that.")
    else:
        note = _("Saved: {text}").format(text=text)
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
    found = await engine.queries.search_memories(  # as many as a reply ranks, to mark what it uses
        ctx.user.id,
        query,
        top_k=max(SEARCH_SHOWN, MAX_BUDGETED_MEMORIES),
        origin_chat=engine.memory_origin(ctx.chat),
    )
    if not found.hits:
        profile = await _profile_facts(engine, ctx)
        if profile:
            return Reply(
                _("No memories to search yet.")
                + "\n\n"
                + _(PROFILE_FACTS)
                + "\n"
                + "\n".join(profile)
            )
        return Reply(_("No memories to search yet."))
    today = await engine.people.today(ctx.user)
    mine = await _visible(engine, ctx)
    used = {h.memory.id for h in used_in_time(engine.retrieval.policy, found.hits, mine, today)}
    rule = describe_policy(engine.retrieval.policy)
    lines = [
        f"{i}. {h.score:.2f} {'✓' if h.memory.id in used else ' '} {h.memory.text}"
        f" ({dates_label(h.memory, today)})"
        for i, h in enumerate(found.hits[:SEARCH_SHOWN], 1)
    ]
    head = _("Search: {query}\n(✓ = would be used in a reply: {rule})").format(
        query=query, rule=rule
    )
    text = head + "\n" + "\n".join(lines)
    profile = await _profile_facts(engine, ctx)
    if profile:  # not ranked: the profile goes into every reply's context whole
        text += "\n\n" + _(PROFILE_FACTS) + "\n" + "\n".join(profile)
    return Reply(text)


@command("extraction", "the last raw memory-extraction output for you", bare_word=True, fresh=True)
async def _extraction(engine: Engine, ctx: CommandContext) -> Reply:
    log = await engine.queries.extraction_log(ctx.user.id)
    if log is None:
        return Reply(_("No extraction has run for you yet."))
    if engine.memory_origin(ctx.chat) is not None and log.chat_id != ctx.chat.id:
        # The last one was about another chat (a private one): it stays there.
        return Reply(_(ELSEWHERE).format(name="extraction"))
    parts = [
        ngettext(
            "Last extraction: {status} at {at} ({tokens} token)",
            "Last extraction: {status} at {at} ({tokens} tokens)",
            log.tokens,
        ).format(status=log.status, at=log.at, tokens=log.tokens)
    ]
    parts.append(_("Raw output:") + "\n" + (log.raw or _("(none)")))
    if log.detail:
        parts.append(_("Result:") + "\n" + log.detail)
    return Reply("\n\n".join(parts))


async def _pick(engine: Engine, ctx: CommandContext, name: str) -> Memory | Reply:
    """The memory numbered `ctx.arg` in /memories, or the answer saying why there is none."""
    items = await _visible(engine, ctx)
    try:
        n = int(ctx.arg.strip().lstrip("#"))
    except ValueError:
        return Reply(
            _("/{name} needs the number shown by /memories, e.g. /{name} 2").format(name=name),
            ok=False,
        )
    if not 1 <= n <= len(items):
        return Reply(
            _("There is no memory number {n} (you have {count}).").format(n=n, count=len(items)),
            ok=False,
        )
    return items[n - 1]


MemoryHandler = Callable[[Engine, CommandContext, Memory], Awaitable[Reply]]


def memory_command(name: str, help: str) -> Callable[[MemoryHandler], MemoryHandler]:
    """Register the decorated handler as `/name <n>` on the memory numbered n in /memories: the
    handler is given that memory; a missing or wrong number is answered before it runs. `help`
    is marked with N_ where it is written (the catalog's extraction knows `command`, not this)."""

    def register(handler: MemoryHandler) -> MemoryHandler:
        async def picked(engine: Engine, ctx: CommandContext) -> Reply:
            memory = await _pick(engine, ctx, name)
            if isinstance(memory, Reply):
                return memory
            return await handler(engine, ctx, memory)

        command(name, help, arg="<n>", arg_required=True, needs_memory=True)(picked)
        return handler

    return register


@memory_command("forget", N_("delete one of your memories"))
async def _forget(engine: Engine, ctx: CommandContext, memory: Memory) -> Reply:
    await engine.queries.forget_memory(ctx.user.id, memory)
    # Its words are not repeated: the answer waits in the outbox (on disk) until it is sent.
    return Reply(_("Forgotten for good: memory {n}.").format(n=int(ctx.arg.strip().lstrip("#"))))


UNDO_ELSEWHERE = N_(
    "That memory's earlier version is from another chat, so it stays private: undo it in a "
    "private chat with me."
)


def _undoable_here(engine: Engine, ctx: CommandContext, memory: Memory) -> bool:
    """Whether this chat may show and restore the memory's earlier text: in a group (under the
    default scope) only a text said in that group (one of unknown origin stays hidden)."""
    return engine.memory_origin(ctx.chat) is None or memory.history[-1].chat_id == ctx.chat.id


@memory_command("undo", N_("undo the last update of one of your memories"))
async def _undo(engine: Engine, ctx: CommandContext, memory: Memory) -> Reply:
    if memory.history and not _undoable_here(engine, ctx, memory):
        return Reply(_(UNDO_ELSEWHERE), ok=False)
    restored = await engine.queries.undo_memory(ctx.user.id, memory.id)
    if restored is None:
        return Reply(_("That memory has never been updated; nothing to undo."), ok=False)
    return Reply(_("Restored: {text}").format(text=restored.text))
