"""Yes/No before a deletion nothing can undo (memora.privacy.confirmations), answered by typing at
the terminal: /forgetme, and forgetting in words. The Telegram buttons' checks are in
test_learner_telegram.py (/forgetme) and test_trust.py (forgetting in words)."""

from __future__ import annotations

import asyncio
import os
from io import StringIO

from bot.terminal import chat_loop
from memora.engine import ChatRef, Engine, UserRef
from memora.longterm import MemoryStore
from tests.support.extraction import naming
from tests.support.fakes import FakeLLM

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
    assert await engine.queries.message_count(TERMINAL.id) == 2
    out = await typed(engine, "/forgetme")  # the input ends before an answer: silence
    assert "Deleted everything" not in out
    assert await engine.queries.message_count(TERMINAL.id) == 2
    out = await typed(engine, "/forgetme", "sure, go on")  # only "yes" is a yes
    assert await engine.queries.message_count(TERMINAL.id) == 2
    out = await typed(engine, "/forgetme", "yes")
    assert "Deleted everything I stored about you: 0 long-term memories, 2 messages" in out
    assert await engine.queries.message_count(TERMINAL.id) == 0


async def test_the_terminal_asks_before_forgetting_in_words_and_a_typed_yes_deletes(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    await mem_engine.queries.remember(TERMINAL, YOU, "Lives in Taipei.")
    await mem_engine.queries.remember(TERMINAL, YOU, "Works as a nurse.")
    naming(llm, "Taipei")
    read, write = os.pipe()
    out = StringIO()
    with os.fdopen(read) as stdin, os.fdopen(write, "w") as typing:
        loop = asyncio.create_task(chat_loop(mem_engine, stdin=stdin, stdout=out))
        typing.write("Please forget that I live in Taipei.\n")
        typing.flush()
        for _ in range(600):  # the question comes after the reply, from the extraction
            if "(Type yes to delete, no to keep.)" in out.getvalue():
                break
            await asyncio.sleep(0.05)
        assert "• Lives in Taipei." in out.getvalue()
        assert len(await store.memories(YOU.id)) == 2  # asked, nothing deleted
        typing.write("yes\n")
        typing.close()
        await asyncio.wait_for(loop, 60)
    assert "🗑 Forgotten, as you asked (deleted for good): 1 memory." in out.getvalue()
    assert [m.text for m in await store.memories(YOU.id)] == ["Works as a nurse."]
