"""The command registry: slash commands are executed by the core so every adapter renders the
same answers.

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

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from memora.engine import Engine
from memora.i18n import N_, _, speaking, translator
from memora.learner.learner_commands import PERSONAL
from memora.modes.placement import OFFER as PLACEMENT_OFFER
from memora.types import ChatRef, UserRef
from memora.views import Reply

HELP = N_(
    """\
I'm Memora, your English tutor. I remember:
• this conversation — the recent turns word for word, older ones as a short summary;
• you — facts worth keeping across days (your level, goals, preferences, difficulties),
  which I pick up from what you say or you save with /remember.
Passwords, keys, codes, card and ID numbers that I recognise are hidden before anything is
stored or logged (in Telegram, before I read them). I can miss one, so please don't send
secrets. Ask me in words to forget something, or use /forget.
You can always see and change what I remember:
"""
)


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
    personal: bool = False  # in a group that keeps to its own memories: asked for in private
    needs_memory: bool = False  # answers "memory is off" on a bot without long-term memory
    bare_word: bool = False  # the terminal runs it when the word is typed alone on a line
    fresh: bool = False  # waits for the chat's after-reply work, so what it shows is current
    exclusive: bool = False  # runs under the chat's lock: no turn of the chat interleaves
    runs_turn: bool = False  # with an argument it also asks the model (adapters show typing)

    @property
    def description(self) -> str:
        """The help line with its argument, in the current language: "<text> — save a memory"."""
        return self.described(_)

    def described(self, gettext: Callable[[str], str]) -> str:
        """The help line with its argument, translated by `gettext`."""
        line = gettext(self.help)
        return f"{self.arg} — {line}" if self.arg else line

    @property
    def usage(self) -> str:
        return _("Usage: /{name} {arg}").format(name=self.name, arg=self.arg).rstrip()


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
    """Run one command after the checks its registration asks for, in the caller's language;
    unknown names get a pointer."""
    with speaking(await engine.language(ctx.user)):
        return await _run(engine, name, ctx)


async def _run(engine: Engine, name: str, ctx: CommandContext) -> Reply:
    cmd = COMMANDS.get(name.lower())
    if cmd is None:
        return Reply(_("I don't know /{name}. Try /help for the list.").format(name=name), ok=False)
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
        return Reply(_("Only the bot's admins can use /{name}.").format(name=cmd.name), ok=False)
    if cmd.private_only and ctx.chat.is_group:
        return Reply(
            _("/{name} shows everyone's data: ask for it in a private chat with me.").format(
                name=cmd.name
            ),
            ok=False,
        )
    if cmd.arg_required and not ctx.arg.strip():
        return Reply(cmd.usage, ok=False)
    if cmd.needs_memory and not engine.has_memory:
        return Reply(_("Long-term memory is turned off on this bot."), ok=False)
    if cmd.personal and engine.memory_origin(ctx.chat) is not None:
        # the learner's own record spans all their chats (not an error: where to ask)
        return Reply(_(PERSONAL).format(name=cmd.name))
    return None


def help_text(lang: str | None = None) -> str:
    """/help in `lang` (default: the current task's language)."""
    gettext = translator(lang) if lang else _
    return gettext(HELP) + "\n".join(f"/{c.name} {c.described(gettext)}" for c in COMMANDS.values())


@command("start", "who I am and how to use me")
async def _start(engine: Engine, ctx: CommandContext) -> Reply:
    """/help, and to a learner with no level yet, the placement test offered."""
    if ctx.chat.is_group or not engine.state.config.learner_enabled:
        return Reply(help_text())
    if await engine.lessons.learner_level(ctx.user.id) is not None:
        return Reply(help_text())
    return Reply(f"{help_text()}\n\n{_(PLACEMENT_OFFER)}")


@command("help", "what I remember and the command list", bare_word=True)
async def _help(engine: Engine, ctx: CommandContext) -> Reply:
    return Reply(help_text())
