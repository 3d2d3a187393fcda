"""Two senders (replicas) on one outbox: each answer goes out once, in the order it was kept.

Each "replica" is a Deliverer with its own holder name on the same store (PostgreSQL: its own
Database, as two `memora run` processes have; SQLite: the one process's Database), and the real
PTB Bot talks to the fake Bot API. The fake holds sendMessage unanswered for as long as the test
needs, so one replica is in the middle of a send when the other looks at the same chat: the CI
failure of tests/e2e/test_e2e_replicas.py, made deterministic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from telegram import Bot, Message

from bot.telegram.bodies import Answer
from bot.telegram.outbox import Deliverer
from memora.storage import Database
from memora.storage.durable import Outbox
from memora.views import Reply
from tests.support.fake_telegram import FakeTelegram

CHAT = 4242


@pytest.fixture(params=["sqlite", "postgres"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[Database]]:
    """Two replicas' handles on one store: on PostgreSQL two Databases (pools) as two processes
    have; SQLite is one process's file (one connection, as `memora run` keeps), shared by both
    senders."""
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        dbs = [Database(url=url), Database(url=url)]
    else:
        dbs = [Database(tmp_path / "memora.sqlite3")]
    for db in dbs:
        await db.open()
    yield dbs if len(dbs) == 2 else [dbs[0], dbs[0]]
    for db in dbs:
        await db.close()


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url) as b:
        yield b


def answer(bot: Bot, n: int) -> Answer:
    """The answer to the learner's message number n."""
    message = Message.de_json(
        {
            "message_id": n,
            "from": FakeTelegram.make_user(CHAT, "Mei"),
            "chat": {"id": CHAT, "type": "private", "first_name": "Mei"},
            "date": int(time.time()),
            "text": f"message {n}",
        },
        bot,
    )
    return Answer(message, Reply(f"answer {n}"), markdown=False)


async def test_a_chat_being_sent_by_one_replica_is_left_to_it_by_the_other(
    stores: list[Database], bot: Bot, tg: FakeTelegram
) -> None:
    a, b = (Deliverer(Outbox(db.connection), bot) for db in stores)
    tg.hold("sendMessage")
    first = asyncio.create_task(a.answer(answer(bot, 1), update_id=1))
    await tg.await_calls("sendMessage", 1)  # replica A is sending answer 1 right now
    # Replica B's background sender finds the chat's oldest answer pending, and B keeps the
    # answer to the next message: neither may go out while A holds the chat.
    looking = asyncio.create_task(b.flush(CHAT))
    await tg.await_for(
        lambda: looking.done() or len(tg.calls_to("sendMessage")) > 1, 20, "B to look"
    )
    await asyncio.wait_for(b.answer(answer(bot, 2), update_id=2), 20)
    assert [c["text"] for c in tg.calls_to("sendMessage")] == ["answer 1"]
    tg.release("sendMessage")
    await asyncio.wait_for(asyncio.gather(first, looking), 20)
    # A, letting go, found B's answer waiting and sent it after its own: once each, in order.
    assert tg.texts(CHAT) == ["answer 1", "answer 2"]
    assert len(tg.calls_to("sendMessage")) == 2
    assert await Outbox(stores[0].connection).pending(CHAT) == []


async def test_answers_made_by_two_busy_replicas_go_out_once_each_in_the_order_kept(
    stores: list[Database], bot: Bot, tg: FakeTelegram
) -> None:
    replicas = [Deliverer(Outbox(db.connection), bot) for db in stores]
    for replica in replicas:
        replica.start()  # both background senders look at the outbox too
    try:
        n = 12
        tasks = []
        for i in range(n):
            tasks.append(asyncio.create_task(replicas[i % 2].answer(answer(bot, i), update_id=i)))
            await asyncio.sleep(0)  # interleave their stores and sends
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        await tg.await_for(lambda: len(tg.texts(CHAT)) >= n, 20, "every answer")
    finally:
        for replica in replicas:
            await replica.stop()
    async with stores[0].connection.db.execute("SELECT update_id FROM outbox ORDER BY id") as cur:
        kept = [int(r[0]) for r in await cur.fetchall()]
    assert sorted(kept) == list(range(n))
    assert tg.texts(CHAT) == [f"answer {i}" for i in kept]


async def test_the_lease_is_one_holders_and_a_dead_holders_runs_out(
    stores: list[Database],
) -> None:
    a, b = (Outbox(db.connection) for db in stores)
    assert await a.lease(CHAT, "replica-a", 30)
    assert not await b.lease(CHAT, "replica-b", 30)
    assert await a.lease(CHAT, "replica-a", 30)  # renewed by its holder
    await b.unlease(CHAT, "replica-b")  # only the holder can let go
    assert not await b.lease(CHAT, "replica-b", 30)
    await a.unlease(CHAT, "replica-a")
    assert await b.lease(CHAT, "replica-b", -1)  # taken, and already run out (a dead holder)
    assert await a.lease(CHAT, "replica-a", 30)
    # Many senders at once: exactly one gets a free chat.
    got = await asyncio.gather(
        *(o.lease(CHAT + 1, f"r{i}{j}", 30) for i in range(8) for j, o in enumerate((a, b)))
    )
    assert sum(got) == 1
    if stores[0].connection.dialect == "sqlite":  # one process owns the file: leases stay in memory
        async with stores[0].connection.db.execute("SELECT COUNT(*) FROM outbox_leases") as cur:
            assert (await cur.fetchone() or [None])[0] == 0
