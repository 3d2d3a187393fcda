"""Replicas on one store share the inbox: each handles its own updates, takes over a gone
replica's, and a chat's updates are handled in order whichever replica Telegram gave them to.

Each replica is a DurableQueue (the application's update queue, as `memora run` has it) with
its own Database on the same PostgreSQL; "handling" an update is taking it off the queue and
marking it done, as the update processor does. A replica is killed by stopping its heartbeat
without leaving (what kill -9 leaves behind); nothing is mocked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from telegram import Bot, Update

from bot.telegram.inbox import DurableQueue
from memora.storage import Database
from memora.storage.durable import Inbox, Replicas

BEAT = 0.2  # seconds: a replica silent for 0.6 s is gone


def update(update_id: int, chat: int) -> Update:
    data: dict[str, Any] = {
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": int(time.time()),
            "chat": {"id": chat, "type": "private", "first_name": "Mei"},
            "from": {"id": chat, "is_bot": False, "first_name": "Mei"},
            "text": f"message {update_id}",
        },
    }
    return Update.de_json(data, BOT)


BOT = Bot("123:TEST")


class Replica:
    """One process's inbox side: its Database, heartbeat and update queue."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.inbox = Inbox(db.connection)
        self.replicas = Replicas(db.connection, interval=BEAT)
        self.queue = DurableQueue()

    async def open(self, *, sole: bool = False) -> int:
        return await self.queue.open(self.inbox, BOT, self.replicas, sole=sole)

    async def handle(self) -> int:
        """The next update this replica queued, marked handled; its update_id."""
        item = await asyncio.wait_for(self.queue.get(), 20)
        assert isinstance(item, Update)
        await self.inbox.done(item.update_id)
        return item.update_id

    def queued(self) -> list[int]:
        out = []
        while not self.queue.empty():
            item = self.queue.get_nowait()
            assert isinstance(item, Update)
            out.append(item.update_id)
        return out

    async def kill(self) -> None:
        """Stop beating without leaving: the store sees what kill -9 leaves."""
        task = self.queue._task
        assert task is not None
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self.queue._task = None


@pytest.fixture
async def pair(postgres_url: str) -> AsyncIterator[list[Replica]]:
    dbs = [Database(url=postgres_url), Database(url=postgres_url)]
    for db in dbs:
        await db.open()
    replicas = [Replica(db) for db in dbs]
    yield replicas
    for replica in replicas:
        await replica.queue.close()
    for db in dbs:
        await db.close()


@pytest.fixture
async def both_open(pair: list[Replica]) -> list[Replica]:
    """The pair, both replicas open (alive and beating)."""
    for replica in pair:
        await replica.open()
    return pair


async def test_a_starting_replica_leaves_a_live_ones_updates_alone(pair: list[Replica]) -> None:
    a, b = pair
    await a.open()
    await a.queue.put(update(1, 10))
    assert await b.open() == 0  # A is alive and handling update 1
    assert b.queued() == []
    assert await a.handle() == 1


async def test_an_update_waits_for_an_older_one_of_its_chat_at_another_replica(
    both_open: list[Replica],
) -> None:
    a, b = both_open
    await a.queue.put(update(1, 10))
    await b.queue.put(update(2, 10))  # the same chat: must not overtake update 1
    await b.queue.put(update(3, 11))  # another chat: goes at once
    assert b.queued() == [3]
    assert await a.handle() == 1
    assert await b.handle() == 2  # let go once A handled update 1


async def test_a_killed_replicas_updates_are_taken_over_in_order(
    both_open: list[Replica],
) -> None:
    a, b = both_open
    for n in (1, 2):
        await a.queue.put(update(n, 10))
    await b.queue.put(update(3, 10))  # behind A's two
    await b.queue.put(update(4, 10))  # behind B's own parked one
    await a.kill()  # A received 1 and 2 (Telegram had its 200s) and died before handling them
    assert [await b.handle() for _ in range(4)] == [1, 2, 3, 4]
    assert await b.inbox.pending() == []


async def test_telegram_delivering_again_an_update_left_by_a_gone_replica_gets_it_handled(
    both_open: list[Replica],
) -> None:
    a, b = both_open
    await a.queue.put(update(1, 10))
    await b.queue.put(update(1, 10))  # A is alive: the copy is dropped, A handles it
    assert b.queued() == []
    await a.kill()
    await b.kill()  # B's own upkeep stopped too: only the redelivery may take update 1 over
    await until_gone(b, "A to go stale")
    await b.queue.put(update(1, 10))
    assert b.queued() == [1]
    assert [i.update_id for i in await b.inbox.pending(b.replicas.id)] == [1]  # B's now


async def test_a_replica_that_stops_cleanly_is_taken_over_without_waiting_for_staleness(
    both_open: list[Replica],
) -> None:
    a, b = both_open
    await a.queue.put(update(1, 10))
    assert await b.inbox.orphans(b.replicas.alive_after()) == []
    await a.queue.close()  # left before handling update 1, its last beat still fresh
    assert [u for u, _, _ in await b.inbox.orphans(b.replicas.alive_after())] == [1]
    assert await b.handle() == 1


async def until_gone(replica: Replica, what: str) -> None:
    """Until some pending update's owner is gone, as `replica` sees the store."""
    deadline = time.monotonic() + 20
    while not await replica.inbox.orphans(replica.replicas.alive_after()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_alone_on_sqlite_every_pending_update_is_taken_at_start(tmp_path: Path) -> None:
    db = Database(tmp_path / "memora.sqlite3")
    await db.open()
    try:
        first = Replica(db)
        await first.open(sole=True)
        await first.queue.put(update(1, 10))  # then the process dies, its beat fresh or not
        second = Replica(db)
        assert await second.open(sole=True) == 1
        assert await second.handle() == 1
    finally:
        await db.close()


async def test_replicas_split_the_bots_send_budget_by_how_many_are_alive(
    pair: list[Replica],
) -> None:
    """Telegram's ~30 messages a second are the bot's: each live replica spends its share."""
    from bot.telegram.limits import SENDS_PER_SECOND, ReplyFirstRateLimiter

    a, b = pair
    limiter = ReplyFirstRateLimiter()
    limiter.share = lambda: a.replicas.live

    async def send(*args: Any, **kwargs: Any) -> bool:
        return True

    async def request() -> None:
        await limiter.process_request(send, (), {}, "sendMessage", {"chat_id": 1}, None)

    await a.open()
    await request()
    assert limiter.per_second == SENDS_PER_SECOND  # alone
    await b.open()
    assert await a.replicas.beat() == 2
    await request()
    assert limiter.per_second == SENDS_PER_SECOND / 2
    await b.queue.close()  # B stops: A spends the whole budget again
    assert await a.replicas.beat() == 1
    await request()
    assert limiter.per_second == SENDS_PER_SECOND
