"""The command registry: one registration per command, its flags enforced before the handler."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memora.commands import COMMANDS, CommandContext, command, help_text, run_command
from memora.engine import ChatRef, Engine, UserRef
from memora.views import Reply

ALICE = UserRef(1, "Alice")
PRIVATE = ChatRef(1)
GROUP = ChatRef(-5, "group", "class")


@pytest.fixture
def probe() -> Iterator[list[CommandContext]]:
    """A command registered for the test only (as another module would), removed afterwards."""
    seen: list[CommandContext] = []

    @command("probe", "a test command", arg="<word>", arg_required=True, admin_only=True)
    async def _probe(engine: Engine, ctx: CommandContext) -> Reply:
        seen.append(ctx)
        return Reply(f"probed {ctx.arg}")

    try:
        yield seen
    finally:
        del COMMANDS["probe"]


def test_help_lists_every_command_once_in_registration_order_with_its_argument() -> None:
    lines = [line for line in help_text().splitlines() if line.startswith("/")]
    assert [line.split()[0][1:] for line in lines] == list(COMMANDS)
    assert list(COMMANDS)[:2] == ["start", "help"]
    assert "/remember <text> — save a memory for you" in lines
    assert COMMANDS["export"].description.startswith("(admin)")
    for c in COMMANDS.values():  # an argument is shown once, before the help line
        assert not c.arg or f"/{c.name} {c.arg}" not in c.help, c.name


def test_only_the_views_work_as_bare_words() -> None:
    bare = {c.name for c in COMMANDS.values() if c.bare_word}
    views = {"help", "history", "context", "summary", "status", "memories", "extraction"}
    assert bare == views | {"profile", "review", "progress", "mistakes", "words"}  # the learner's
    assert not any(COMMANDS[name].arg_required for name in bare)


def test_a_name_registers_once() -> None:
    with pytest.raises(ValueError, match="twice"):
        command("help", "again")(COMMANDS["help"].handler)


async def test_a_registered_command_gets_its_flags_checked_before_it_runs(
    engine: Engine, probe: list[CommandContext]
) -> None:
    refused = await run_command(engine, "probe", CommandContext(PRIVATE, ALICE, "x"))
    assert (refused.ok, refused.text) == (False, "Only the bot's admins can use /probe.")
    usage = await run_command(engine, "probe", CommandContext(PRIVATE, ALICE, " ", is_admin=True))
    assert (usage.ok, usage.text) == (False, "Usage: /probe <word>")
    assert probe == []  # the handler never ran
    ran = await run_command(engine, "PROBE", CommandContext(PRIVATE, ALICE, "hi", is_admin=True))
    assert ran.text == "probed hi" and len(probe) == 1
    assert "/probe <word> — a test command" in help_text()


async def test_private_only_commands_are_refused_in_groups(engine: Engine) -> None:
    admin = CommandContext(GROUP, ALICE, "", is_admin=True)
    refused = await run_command(engine, "export", admin)
    assert not refused.ok and refused.document is None and "private chat" in refused.text


async def test_memory_commands_say_memory_is_off_on_a_bot_without_it(engine: Engine) -> None:
    assert not engine.has_memory
    for name in (c.name for c in COMMANDS.values() if c.needs_memory):
        arg = "" if name == "memories" else "1"
        reply = await run_command(engine, name, CommandContext(PRIVATE, ALICE, arg))
        assert (reply.ok, reply.text) == (False, "Long-term memory is turned off on this bot.")


async def test_export_of_a_chat_never_seen_is_a_clear_answer(engine: Engine) -> None:
    admin = CommandContext(PRIVATE, ALICE, "424242", is_admin=True)
    reply = await run_command(engine, "export", admin)
    assert (reply.ok, reply.text) == (False, "I have no data for chat 424242.")
    assert await engine.export.export_chat(424242) is None


async def test_unknown_commands_point_to_help(engine: Engine) -> None:
    reply = await run_command(engine, "frobnicate", CommandContext(PRIVATE, ALICE, ""))
    assert (reply.ok, reply.text) == (False, "I don't know /frobnicate. Try /help for the list.")
