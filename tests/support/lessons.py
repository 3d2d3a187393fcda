"""Driving a lesson through the engine in one private chat: commands, answers, the lesson
block of the reply request, the notices sent, and /export then /forgetme."""

from __future__ import annotations

from memora.commands import CommandContext, run_command
from memora.engine import ChatRef, Engine, UserRef
from memora.shortterm.instructions import MODE_BLOCK
from memora.views import Reply
from tests.support.fakes import FakeLLM, forgetme

ALICE = UserRef(1, "Alice")
CHAT = ChatRef(1)
GROUP = ChatRef(-100, "group", "Study group")
NOTICES: list[str] = []


async def command(engine: Engine, name: str, arg: str = "", chat: ChatRef = CHAT) -> str:
    reply = await run_command(engine, name, CommandContext(chat, ALICE, arg))
    await engine.drain()
    return reply.plain


async def assert_exported_then_forgotten(engine: Engine, kind: str) -> None:
    """The chat's running lesson is in /export; /forgetme deletes it."""
    data = await engine.export.export_chat(CHAT.id)
    assert data is not None
    assert data["participants"]["1"]["lesson_modes"][0]["kind"] == kind
    await forgetme(engine, CHAT, ALICE)
    assert await engine.db.modes.user_modes(ALICE.id) == []


def mode_block(llm: FakeLLM) -> str:
    """The lesson block of the last reply request."""
    last = [c for c in llm.calls if c.kind == "complete" and not llm.is_summary(c.instructions)][-1]
    blocks = [m.content for m in last.messages if m.content.startswith(MODE_BLOCK)]
    assert len(blocks) == 1, [m.content[:50] for m in last.messages]
    return blocks[0]


async def answer(engine: Engine, text: str) -> None:
    reply = await engine.handle_turn(CHAT, ALICE, text)
    assert reply.ok
    await engine.drain()


async def listen(engine: Engine) -> None:
    NOTICES.clear()

    async def notify(_chat: ChatRef, _user: UserRef, notice: Reply) -> None:
        NOTICES.append(notice.text)

    engine.state.notify = notify
