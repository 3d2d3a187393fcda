"""Slash commands, executed by the core so every adapter renders the same answers.

Each command is registered once, where its handler is written::

    @command("progress", "your progress: chart and text", fresh=True)
    async def _progress(engine: Engine, ctx: CommandContext) -> Reply:
        ...

The registration carries everything adapters and /help need: the name, the help line, the
argument it takes and the flags that `run_command` enforces before the handler runs (admin-only,
private-chat-only, needs long-term memory, ...). /help, the Telegram command menu and the
terminal's bare words all read `COMMANDS`, so a new command appears everywhere at once; its
handler reads and writes through the engine's methods, never the stores underneath.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from memora.engine import MAX_BUDGETED_MEMORIES, ChatRef, Engine, UserRef
from memora.learner.model import PROFILE_FIELDS
from memora.learner.profile import TEACHING_FIELDS
from memora.llm import ChatMessage
from memora.longterm.policy import describe as describe_policy
from memora.prompts import MEMORY_BLOCK, PROFILE_BLOCK
from memora.views import ButtonAnswer, Document, Reply, render_history, render_messages

if TYPE_CHECKING:
    from memora.longterm import Memory

HELP = """\
I'm Memora, your English tutor. I remember:
• this conversation — the recent turns word for word, older ones as a short summary;
• you — facts worth keeping across days (your level, goals, preferences, difficulties),
  which I pick up from what you say or you save with /remember.
Passwords, keys, codes, card and ID numbers that I recognise are hidden before anything is
stored or logged (in Telegram, before I read them). I can miss one, so please don't send
secrets. Ask me in words to forget something, or use /forget.
You can always see and change what I remember:
"""


@dataclass(frozen=True)
class CommandContext:
    chat: ChatRef
    user: UserRef
    arg: str
    is_admin: bool = False
    message_id: int | None = None


Handler = Callable[[Engine, CommandContext], Awaitable[Reply]]


@dataclass(frozen=True)
class Command:
    """One command: its handler and everything said about it to users and adapters."""

    name: str
    help: str  # one line for /help and the Telegram menu
    handler: Handler
    arg: str = ""  # the argument's placeholder ("<text>"); "" when it takes none
    arg_required: bool = False  # a bare `/name` answers with its usage line
    admin_only: bool = False  # only the bot's admins (telegram.admin_ids; the terminal's user)
    private_only: bool = False  # refused in groups: the answer holds other members' data
    needs_memory: bool = False  # answers "memory is off" on a bot without long-term memory
    bare_word: bool = False  # the terminal runs it when the word is typed alone on a line
    fresh: bool = False  # waits for the chat's after-reply work, so what it shows is current
    exclusive: bool = False  # runs under the chat's lock: no turn of the chat interleaves
    runs_turn: bool = False  # with an argument it also asks the model (adapters show typing)

    @property
    def description(self) -> str:
        """The help line with its argument: "<text> — save a memory for you"."""
        return f"{self.arg} — {self.help}" if self.arg else self.help

    @property
    def usage(self) -> str:
        return f"Usage: /{self.name} {self.arg}".rstrip()


COMMANDS: dict[str, Command] = {}
"""Every command by name, in the order /help lists them."""


def command(name: str, help: str, **flags: Any) -> Callable[[Handler], Handler]:
    """Register the decorated handler as /name; `flags` are Command's fields (arg, admin_only,
    ...), checked when this module is imported."""

    def register(handler: Handler) -> Handler:
        if name in COMMANDS:
            raise ValueError(f"/{name} is registered twice")
        COMMANDS[name] = Command(name, help, handler, **flags)
        return handler

    return register


async def run_command(engine: Engine, name: str, ctx: CommandContext) -> Reply:
    """Run one command after the checks its registration asks for; unknown names get a pointer."""
    cmd = COMMANDS.get(name.lower())
    if cmd is None:
        return Reply(f"I don't know /{name}. Try /help for the list.", ok=False)
    refused = _refusal(engine, cmd, ctx)
    if refused is not None:
        return refused
    if cmd.exclusive:
        async with engine.exclusive(ctx.chat.id, ctx.user.id):
            return await cmd.handler(engine, ctx)
    if cmd.fresh:
        await engine.settle(ctx.chat.id, ctx.user.id)
    return await cmd.handler(engine, ctx)


def _refusal(engine: Engine, cmd: Command, ctx: CommandContext) -> Reply | None:
    if cmd.admin_only and not ctx.is_admin:
        return Reply(f"Only the bot's admins can use /{cmd.name}.", ok=False)
    if cmd.private_only and ctx.chat.is_group:
        return Reply(
            f"/{cmd.name} shows everyone's data: ask for it in a private chat with me.", ok=False
        )
    if cmd.arg_required and not ctx.arg.strip():
        return Reply(cmd.usage, ok=False)
    if cmd.needs_memory and not engine.has_memory:
        return Reply("Long-term memory is turned off on this bot.", ok=False)
    return None


def help_text() -> str:
    return HELP + "\n".join(f"/{c.name} {c.description}" for c in COMMANDS.values())


# -- the commands, in /help order ------------------------------------------------------------------
@command("help", "what I remember and the command list", bare_word=True)
@command("start", "who I am and how to use me")  # registered first: the decorator nearest
async def _help(engine: Engine, ctx: CommandContext) -> Reply:
    return Reply(help_text())


@command("history", "this chat's full history", bare_word=True, fresh=True)
async def _history(engine: Engine, ctx: CommandContext) -> Reply:
    row = await engine.chat_state(ctx.chat.id)
    return Reply(render_history(await engine.history(ctx.chat.id), row.summarized_count))


@command("context", "exactly what the last request sent to the model", bare_word=True, fresh=True)
async def _context(engine: Engine, ctx: CommandContext) -> Reply:
    row = await engine.chat_state(ctx.chat.id)
    if not row.last_context:
        return Reply(render_messages("Last request context", []))
    sent = [ChatMessage("system", engine.config.instructions), *row.last_context]
    if ctx.chat.is_group:
        speaker = await engine.last_speaker(ctx.chat.id)
        if speaker is not None and speaker[0] != ctx.user.id:
            sent = [_hide_memories(m, speaker[1]) for m in sent]
    return Reply(render_messages("Last request context (system prompt first)", sent))


def _hide_memories(message: ChatMessage, owner: str) -> ChatMessage:
    """In a group, another member's retrieved memories are theirs alone."""
    if message.role == "developer" and message.content.startswith(PROFILE_BLOCK):
        return ChatMessage(
            "developer", f"(the learner profile of {owner or 'another member'}, hidden)"
        )
    if message.role != "developer" or not message.content.startswith(MEMORY_BLOCK):
        return message
    n = message.content.count("\n- ")
    return ChatMessage(
        "developer",
        f"({n} long-term memories of {owner or 'another member'}, hidden: only they can see them)",
    )


@command("summary", "the rolling summary of older turns", bare_word=True, fresh=True)
async def _summary(engine: Engine, ctx: CommandContext) -> Reply:
    row = await engine.chat_state(ctx.chat.id)
    return Reply(f"Summary (covers {row.summarized_count} messages)\n{row.summary or '(empty)'}")


@command("status", "memory and token figures", bare_word=True, fresh=True)
async def _status(engine: Engine, ctx: CommandContext) -> Reply:
    return Reply((await engine.status(ctx.chat.id, ctx.user.id)).render())


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
    from memora.longterm import MAX_MEMORY_CHARS
    from memora.longterm.dedupe import normalise_text
    from memora.longterm.extraction import looks_secret

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


@command(
    "profile",
    "your learner profile; /profile set <field> <value>, clear <field>, undo, history",
    arg="[set|clear|undo|history]",
    bare_word=True,
    fresh=True,
)
async def _profile(engine: Engine, ctx: CommandContext) -> Reply:
    from memora.learner.commands import profile_command

    who = ctx.user.name if ctx.chat.is_group else ""
    return await profile_command(engine.learner, ctx.user.id, ctx.arg, engine.clock(), who)


@command(
    "review",
    "your due review cards, one at a time (in a group: privately)",
    arg="[show|again|hard|good|easy]",
    bare_word=True,
    fresh=True,
)
async def _review(engine: Engine, ctx: CommandContext) -> Reply:
    from memora.learner.commands import review_command

    return await review_command(
        engine.learner, ctx.user.id, ctx.arg, engine.clock(), group=ctx.chat.is_group
    )


@command(
    "progress",
    "your progress: level, streak, mistakes by week, vocabulary, goal countdown",
    bare_word=True,
    fresh=True,
)
async def _progress(engine: Engine, ctx: CommandContext) -> Reply:
    from memora.learner.commands import progress_command

    return await progress_command(engine.learner, ctx.user.id, engine.clock())


@command(
    "mistakes",
    "the mistakes I logged for you; /mistakes delete <n> removes a wrong one",
    arg="[delete <n>]",
    bare_word=True,
    fresh=True,
)
async def _mistakes(engine: Engine, ctx: CommandContext) -> Reply:
    from memora.learner.commands import entries_command

    return await entries_command(engine.learner, ctx.user.id, "mistake", ctx.arg)


@command(
    "words",
    "your vocabulary list; /words delete <n> removes one",
    arg="[delete <n>]",
    bare_word=True,
    fresh=True,
)
async def _words(engine: Engine, ctx: CommandContext) -> Reply:
    from memora.learner.commands import entries_command

    return await entries_command(engine.learner, ctx.user.id, "word", ctx.arg)


async def press_button(engine: Engine, user: UserRef, data: str) -> ButtonAnswer:
    """A tap on one of our buttons (only review cards have them), checked against the tapper."""
    from memora.learner.commands import review_button

    return await review_button(engine.learner, user.id, data, engine.clock())


@command("reset", "start a fresh conversation in this chat (memories stay)", exclusive=True)
async def _reset(engine: Engine, ctx: CommandContext) -> Reply:
    n = await engine.reset_chat(ctx.chat.id)
    return Reply(
        f"Fresh start: deleted this chat's history ({n} messages) and summary. "
        "Your long-term memories stay (/memories)."
    )


@command("forgetme", "delete everything stored about you", exclusive=True)
async def _forgetme(engine: Engine, ctx: CommandContext) -> Reply:
    counts = await engine.forget_user(ctx.user.id)
    return Reply(
        "Deleted everything I stored about you: "
        f"{counts['memories']} long-term memories, {counts['private_messages']} messages of our "
        f"private chat, {counts['group_messages']} of your messages in groups (with my replies "
        "to them, and those groups' summaries), your extraction log, your practice reminder, and "
        "your learner profile, mistakes, vocabulary and review cards."
    )


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
            return Reply("Usage: /export [chat_id] — the chat id is a number.", ok=False)
    data = await engine.export_chat(target)
    if data is None:
        return Reply(f"I have no data for chat {target}.", ok=False)
    blob = json.dumps(data, ensure_ascii=False, indent=2).encode()
    n = len(data["history"])
    return Reply(
        f"Export of chat {target}: {n} messages.",
        document=Document(f"memora-chat-{target}.json", blob, f"chat {target}, {n} messages"),
    )


@command(
    "remind",
    "a daily practice reminder in our private chat; /remind off; /remind shows it",
    arg="[HH:MM [days]]",
)
async def _remind(engine: Engine, ctx: CommandContext) -> Reply:
    """Set, stop or show the caller's practice reminder (sent in their private chat only)."""
    from memora import reminders as rm

    if ctx.chat.is_group:
        return Reply(rm.PRIVATE_ONLY, ok=False)
    store = engine.reminders
    now = store.clock()
    arg = ctx.arg.strip()
    if arg.lower() in {"off", "stop", "none", "no"}:
        stopped = await store.off(ctx.user.id)
        if stopped is None:
            return Reply("You have no reminder to stop. /remind 20:00 sets one.")
        return Reply(f"Reminders off (it was {stopped.describe()}). /remind 20:00 to start again.")
    if arg:
        try:
            at, days = rm.parse_remind(arg)
        except rm.ReminderError as exc:
            return Reply(f"{exc}\n{rm.USAGE}", ok=False)
        await store.set(ctx.user.id, ctx.chat.id, at, days)
    return Reply(await _reminder_setting(engine, ctx.user.id, now, just_set=bool(arg)))


async def _reminder_setting(engine: Engine, user_id: int, now: datetime, just_set: bool) -> str:
    store = engine.reminders
    reminder = await store.get(user_id)
    zone = await store.timezone(user_id, now)
    if reminder is None:
        return "You have no practice reminder. " + USAGE_REMIND
    if not reminder.enabled:
        why = " because Telegram said you blocked me" if reminder.off_reason == "blocked" else ""
        return f"Your reminder ({reminder.describe()}) is off{why}. /remind 20:00 to start again."
    nxt = store.next_time(reminder, zone, now)
    head = "⏰ Reminder set" if just_set else "Your practice reminder"
    when = f"; next: {nxt:%a %d %b %H:%M}" if nxt else ""
    hint = (
        "" if zone != "UTC" else " Set your time zone with /timezone, e.g. /timezone Asia/Taipei."
    )
    return f"{head}: {reminder.describe()} ({zone}){when}. /remind off to stop.{hint}"


USAGE_REMIND = "Set one with /remind 20:00 (every day) or /remind 20:00 mon-fri."


@command("timezone", "your time zone, for reminders", arg="[Area/City]")
async def _timezone(engine: Engine, ctx: CommandContext) -> Reply:
    """Show or set the caller's time zone: a field of their learner profile (reminders use it)."""
    from memora.learner.profile import ProfileError, clean_value

    store = engine.reminders
    now = store.clock()
    if not ctx.arg.strip():
        zone = await store.timezone(ctx.user.id, now)
        return Reply(
            f"Your time zone: {zone}. Change it with /timezone Asia/Taipei (any IANA name)."
        )
    try:
        zone = clean_value("timezone", ctx.arg)
    except ProfileError as exc:
        return Reply(str(exc), ok=False)
    reminder = await store.set_timezone(ctx.user.id, zone, now)
    local = now.astimezone(ZoneInfo(zone))
    text = f"Time zone set: {zone} (it is {local:%H:%M} there now)."
    if reminder is not None and reminder.enabled:
        text += f" Your reminder follows it: {reminder.describe()} {zone} time."
    return Reply(text)
