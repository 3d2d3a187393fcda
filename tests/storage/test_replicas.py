"""Several processes (replicas) on one PostgreSQL: one chat is still answered one turn at a time.

Each replica here is an Engine with its own Database (its own connection pools), exactly what
two `memora run` processes have; the only thing they share is the PostgreSQL server.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator

import pytest

from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fakes import FakeLLM

CHAT = ChatRef(42)
MEI = UserRef(42, "Mei")


@pytest.fixture
async def replicas(postgres_url: str) -> AsyncIterator[list[tuple[Engine, FakeLLM]]]:
    out: list[tuple[Engine, FakeLLM]] = []
    for _ in range(2):
        db = Database(url=postgres_url)
        await db.open()
        llm = FakeLLM(delay=0.05)
        config = EngineConfig(max_input_tokens=4000, max_recent_turns=20)
        out.append((Engine(db=db, llm=llm, counter=LocalTokenCounter(), config=config), llm))
    yield out
    for engine, _ in out:
        await engine.drain()
        await engine.db.close()


async def test_one_chat_over_two_replicas_is_answered_in_order_each_turn_seeing_the_last(
    replicas: list[tuple[Engine, FakeLLM]],
) -> None:
    n = 8
    tasks = []
    for i in range(n):  # messages arrive in order, alternately at each replica, while busy
        engine, _ = replicas[i % 2]
        tasks.append(asyncio.create_task(engine.handle_turn(CHAT, MEI, f"message {i}")))
        # The next arrives while this one is in its model call (holding the chat), not after a
        # fixed sleep: which of two waiting replicas gets the chat first is not an order.
        await until_asked(replicas, f"message {i}")
    replies = await asyncio.gather(*tasks)
    assert all(r.ok for r in replies)
    history = await replicas[0][0].db.chats.messages(CHAT.id)
    assert [m.content for m in history if m.role == "user"] == [f"message {i}" for i in range(n)]
    # Every reply was written knowing every earlier turn, whichever replica answered it.
    for _, llm in replicas:
        for call in (c for c in llm.calls if c.kind == "complete"):
            current = call.messages[-1].content
            i = int(current.rsplit(" ", 1)[1])
            seen = [m.content for m in call.messages if m.role == "user"]
            assert seen == [f"message {j}" for j in range(i + 1)], current


async def until_asked(replicas: list[tuple[Engine, FakeLLM]], text: str) -> None:
    """Until one replica's model has been asked to reply to `text`."""
    deadline = time.monotonic() + 30
    while not any(
        c.kind == "complete" and c.messages[-1].content == text
        for _, llm in replicas
        for c in llm.calls
    ):
        assert time.monotonic() < deadline, f"nobody was asked about {text!r}"
        await asyncio.sleep(0.005)


HOLDER = """
import asyncio, sys
from memora.storage import Database

async def main():
    db = Database(url=sys.argv[1])
    await db.open()
    await db.connection.lock_chat(int(sys.argv[2]))
    print("held", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


async def test_a_replica_killed_while_holding_a_chat_lets_the_others_in(postgres_url: str) -> None:
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLDER, postgres_url, str(CHAT.id), stdout=asyncio.subprocess.PIPE
    )
    other = Database(url=postgres_url)
    await other.open()
    try:
        assert holder.stdout is not None
        assert await asyncio.wait_for(holder.stdout.readline(), 60) == b"held\n"
        waiting = asyncio.create_task(other.connection.lock_chat(CHAT.id))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # the chat is held by the other process
        holder.kill()  # kill -9 mid-turn
        await holder.wait()
        got = await asyncio.wait_for(waiting, 30)  # PostgreSQL let go with the connection
        await got.release()
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()
        await other.close()


async def test_a_reminder_due_on_every_replica_is_claimed_by_one(postgres_url: str) -> None:
    """Each replica's JobQueue fires the same daily reminder; only one claim may win."""
    from datetime import date, time

    from memora.reminders import Reminders

    dbs = [Database(url=postgres_url) for _ in range(3)]
    for db in dbs:
        await db.open()
    try:
        await Reminders(dbs[0]).set(7, 7, time(20, 0), (0, 1, 2, 3, 4, 5, 6))
        day = date(2026, 12, 1)
        claims = await asyncio.gather(
            *(Reminders(db).claim(7, day) for db in dbs for _ in range(3))
        )
        assert sum(claims) == 1
    finally:
        for db in dbs:
            await db.close()
