"""`memora chat`: the terminal REPL on the real engine and the real data dir."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from bot.inputs import clean, split_command
from memora.commands import COMMANDS, CommandContext, press_button, run_command
from memora.engine import Engine
from memora.i18n import N_, _, ngettext, switch
from memora.modes.placement import OFFER as PLACEMENT_OFFER
from memora.privacy.confirmations import yes_no
from memora.types import ChatRef, UserRef
from memora.views import Reply

TERMINAL_SENDS_NO_REMINDERS = N_(
    "(Only the Telegram bot, `memora run`, sends reminders and weekly reports; this terminal "
    "chat sends none.)"
)


def banner() -> str:
    """The words that work alone on a line (Command.bare_word), then those that need the "/"."""
    bare = [c.name for c in COMMANDS.values() if c.bare_word]
    slashed = [f"/{c.name} {c.arg}".rstrip() for c in COMMANDS.values() if not c.bare_word]
    return _(
        "Memora — terminal chat. Alone on a line: {bare}, exit. With a slash: {slashed}."
    ).format(bare=", ".join(bare), slashed=", ".join(slashed))


def system_language() -> str:
    """The terminal's language hint for the core: LC_ALL/LC_MESSAGES/LANG ("zh_TW.UTF-8")."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name, "")
        if value:
            return value.split(".")[0]
    return ""


class Keyboard:
    """The terminal's lines, read by a daemon thread: waiting for one never holds up the event
    loop, nor the process's exit (an executor thread would: asyncio.run waits for it, so Ctrl-C
    did nothing until Enter). While it is in use (`with`), Ctrl-C at the prompt reads as the end
    of input; during a turn it does what it did before (asyncio stops the chat)."""

    def __init__(self, stream: TextIO) -> None:
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._before: Any = None  # the SIGINT handler in place before ours
        self.waiting = False  # a `readline` is waiting: the prompt is showing
        threading.Thread(target=self._pump, args=(stream,), name="stdin", daemon=True).start()

    def __enter__(self) -> Keyboard:
        if threading.current_thread() is threading.main_thread():
            self._before = signal.signal(signal.SIGINT, self._interrupted)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._before is not None:
            signal.signal(signal.SIGINT, self._before)

    def _pump(self, stream: TextIO) -> None:
        while True:
            try:
                line = stream.readline()
            except (OSError, ValueError):  # stdin closed under us
                line = ""
            try:
                self._loop.call_soon_threadsafe(self._lines.put_nowait, line or None)
            except RuntimeError:  # the loop is closed: the chat is over
                return
            if not line:
                return

    def _interrupted(self, signum: int, frame: FrameType | None) -> None:
        if self.waiting:
            self._loop.call_soon_threadsafe(self._lines.put_nowait, None)
        elif callable(self._before):
            self._before(signum, frame)
        else:
            raise KeyboardInterrupt

    async def readline(self, prompt: Callable[[], None]) -> str | None:
        """Show the prompt, then the next line; None at the end of input or after Ctrl-C."""
        self.waiting = True  # before the prompt shows: a Ctrl-C from then on ends the chat
        try:
            prompt()
            line = await self._lines.get()
        finally:
            self.waiting = False
        if line is None:  # the end stays the end: every later read gets it too
            self._lines.put_nowait(None)
        return line


async def keep_files(reply: Reply, folder: Path | None) -> list[str]:
    """Write what a command made for the learner (the /progress chart, an /export) to their
    folder, the one place the terminal keeps files (`/forgetme` deletes it); lines saying where."""
    files: list[tuple[str, bytes]] = []
    if folder is None:
        return []
    if reply.photo is not None:
        files.append(("progress.png", reply.photo))
    if reply.document is not None:
        files.append((Path(reply.document.filename).name, reply.document.content))
    lines = []
    for name, content in files:
        path = folder / name
        await asyncio.to_thread(_write, path, content)
        lines.append(_("(wrote {path})").format(path=path))
    return lines


def _write(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


async def answer_question(
    engine: Engine,
    chat: ChatRef,
    user: UserRef,
    question: tuple[str, str],
    keyboard: Keyboard,
    out: TextIO,
) -> str:
    """A Yes/No question (memora.privacy.confirmations) answered by typing: only "yes" presses
    Yes."""

    def ask() -> None:
        print(_("Type yes to delete, anything else keeps it: "), end="", file=out, flush=True)

    line = await keyboard.readline(ask)
    return await typed_answer(engine, chat, user, question, clean(line or ""))


def is_yes(typed: str) -> bool:
    return typed.strip().lower() in {"yes", "y", _("yes").lower()}


async def typed_answer(
    engine: Engine, chat: ChatRef, user: UserRef, question: tuple[str, str], typed: str
) -> str:
    """Yes or No pressed for the question, as the typed answer says; what the core answers."""
    yes, no = question
    answer = await press_button(engine, chat, user, yes if is_yes(typed) else no)
    return answer.edit.text if answer.edit is not None else answer.notice


def parse_command(line: str) -> tuple[str, str] | None:
    """'/remember I like tea' → ('remember', 'I like tea'); a bare 'status' or 'exit' →
    ('status', ''); anything else is a message ("help me with this email" is not /help)."""
    text = line.strip()
    if text.startswith("/"):
        name, _, arg = split_command(text)
        return name, arg
    word = text.lower()
    if word in {"exit", "quit"} or (word in COMMANDS and COMMANDS[word].bare_word):
        return word, ""
    return None


async def chat_loop(
    engine: Engine,
    *,
    chat_id: int = 0,
    user_id: int = 0,
    user_name: str = "",
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    show_stats: bool = True,
    language: str | None = None,
) -> None:
    """Read lines, answer them, print a memory status line per turn; stop on exit or EOF.
    `language` is the platform's hint (default: the terminal's locale); the core resolves it
    with the learner's /language choice and profile."""
    inp, out = stdin or sys.stdin, stdout or sys.stdout
    hint = system_language() if language is None else language
    chat, user = ChatRef(chat_id, "private", "terminal"), UserRef(user_id, user_name, hint)

    def prompt() -> None:
        print("\n" + _("You: "), end="", file=out, flush=True)

    asked: list[tuple[str, str]] = []  # a question a notice asked (the next "yes" answers it)

    with Keyboard(inp) as keyboard:

        async def notify(_chat: ChatRef, _user: UserRef, notice: Reply) -> None:
            question = yes_no(notice.buttons)
            hint = "" if question is None else "\n" + _("(Type yes to delete, no to keep.)")
            print(f"\nMemora: {notice.text}{hint}", file=out, flush=True)
            asked[:] = [] if question is None else [question]
            if keyboard.waiting:  # the notice came while the prompt showed: draw it again
                prompt()

        engine.state.notify = notify
        count = await engine.queries.message_count(chat_id)
        switch(await engine.language(user))
        print(banner(), file=out)
        if count:
            continuing = ngettext(
                "(continuing: {n} message in this chat's history)",
                "(continuing: {n} messages in this chat's history)",
                count,
            )
            print(continuing.format(n=count), file=out)
        elif (
            engine.state.config.learner_enabled
            and await engine.lessons.learner_level(user.id) is None
        ):
            print(_(PLACEMENT_OFFER), file=out)  # a first conversation, no level yet
        while True:
            switch(await engine.language(user))  # /language may have changed it
            line = await keyboard.readline(prompt)
            if line is None:
                print("\n" + _("Bye!"), file=out)
                break
            if not line.strip():
                continue
            line = clean(line).strip()  # "" (nothing visible) gets the core's clear answer
            if asked and (is_yes(line) or line.lower() in {"no", "n", _("no").lower()}):
                print(await typed_answer(engine, chat, user, asked.pop(), line), file=out)
                continue  # anything else leaves the question to expire: nothing is deleted
            cmd = parse_command(line) if line else None
            if cmd and cmd[0] in {"exit", "quit"}:
                print(_("Bye!"), file=out)
                break
            if cmd:
                ctx = CommandContext(chat, user, cmd[1], is_admin=True)
                reply = await run_command(engine, cmd[0], ctx)
                print(f"\n{reply.plain}", file=out, flush=True)
                for kept in await keep_files(reply, engine.queries.learner_files(user.id)):
                    print(kept, file=out, flush=True)
                if cmd[0] == "remind" and reply.ok and cmd[1].strip():
                    print(_(TERMINAL_SENDS_NO_REMINDERS), file=out, flush=True)
            else:
                reply = await engine.handle_turn(chat, user, line, unlimited=True)  # the operator
                print(f"\nMemora: {reply.plain}", file=out, flush=True)
                if show_stats and reply.stats is not None:
                    print(reply.stats.render(), file=out, flush=True)
            question = yes_no(reply.buttons)
            if question is not None:
                told = await answer_question(engine, chat, user, question, keyboard, out)
                print(told, file=out, flush=True)
        await engine.drain()
