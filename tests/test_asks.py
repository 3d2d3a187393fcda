"""Yes/No before a deletion nothing can undo (memora.asks), answered by typing at the terminal;
the Telegram buttons' checks are in test_learner_telegram.py."""

from __future__ import annotations

from io import StringIO

from bot.terminal import chat_loop
from memora.engine import ChatRef, Engine, UserRef

TERMINAL = ChatRef(0, "private", "terminal")
YOU = UserRef(0, "")


async def typed(engine: Engine, *lines: str) -> str:
    out = StringIO()
    await chat_loop(engine, stdin=StringIO("".join(f"{x}\n" for x in lines)), stdout=out)
    return out.getvalue()


async def test_the_terminal_asks_before_forgetme_and_only_a_typed_yes_deletes(
    engine: Engine,
) -> None:
    assert (await engine.handle_turn(TERMINAL, YOU, "I am a nurse")).ok
    out = await typed(engine, "/forgetme", "no")
    assert "Delete everything I stored about you?" in out and "Type yes to delete" in out
    assert "Nothing was deleted." in out
    assert await engine.message_count(TERMINAL.id) == 2
    out = await typed(engine, "/forgetme")  # the input ends before an answer: silence
    assert "Deleted everything" not in out
    assert await engine.message_count(TERMINAL.id) == 2
    out = await typed(engine, "/forgetme", "sure, go on")  # only "yes" is a yes
    assert await engine.message_count(TERMINAL.id) == 2
    out = await typed(engine, "/forgetme", "yes")
    assert "Deleted everything I stored about you: 0 long-term memories, 2 messages" in out
    assert await engine.message_count(TERMINAL.id) == 0
