"""The order of work: one lock per chat, the chat's after-reply work (the next turn waits for it)
and each user's extractions (one after another, no reply waits for them)."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager

from memora.blocking import background
from memora.storage import Database, SharedChatLock

log = logging.getLogger(__name__)


class Lanes:
    """Per-chat locks and the two lanes of work after a reply."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # Weak values: a chat's lock lives while some turn holds or awaits it, then goes away.
        self.locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
        # After-reply work in two lanes. Folding the window is per chat, and the chat's next
        # turn waits for it (it must see the window the fold left). Extraction is per user, one
        # after another (each sees the memories the last one stored), and no reply waits for it.
        self.after: dict[int, asyncio.Task[None]] = {}
        self.extracting: dict[int, asyncio.Task[None]] = {}
        # The shared store's hold on a chat, from the start of a turn to the end of its
        # after-reply work (nothing to hold on SQLite, which one process owns).
        self.held: dict[int, SharedChatLock] = {}

    def lock(self, chat_id: int) -> asyncio.Lock:
        lock = self.locks.get(chat_id)
        if lock is None:
            lock = self.locks[chat_id] = asyncio.Lock()
        return lock

    @asynccontextmanager
    async def exclusive(self, chat_id: int, user_id: int | None = None) -> AsyncIterator[None]:
        """The chat to oneself, in this process and across replicas, its earlier work done (and
        with `user_id`, that user's extractions)."""
        async with self.lock(chat_id):
            await self.settle(chat_id, user_id)
            held = await self.db.connection.lock_chat(chat_id)
            try:
                yield
            finally:
                await held.release()

    async def settle(self, chat_id: int, user_id: int | None = None) -> None:
        """Wait for the chat's fold of the window; with `user_id`, for that user's extractions
        too (views that show memories want them; replies never wait for extraction)."""
        extracting = None if user_id is None else self.extracting.get(user_id)
        for task in (self.after.get(chat_id), extracting):
            if task is not None and not task.done():
                await asyncio.shield(task)

    async def drain(self) -> None:
        """Wait for all after-reply work; used at shutdown and by tests."""
        tasks = [t for t in (*self.after.values(), *self.extracting.values()) if not t.done()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def hold(self, chat_id: int) -> None:
        """Hold the chat in the shared store for a turn (replicas on one PostgreSQL): the hold
        passes to the after-reply work `schedule` starts, or ends with `release`."""
        self.held[chat_id] = await self.db.connection.lock_chat(chat_id)

    async def release(self, chat_id: int) -> None:
        """End the turn's hold on the chat unless after-reply work took it over."""
        unclaimed = self.held.pop(chat_id, None)
        if unclaimed is not None:
            await unclaimed.release()

    def extract_later(self, user_id: int, job: Awaitable[None]) -> None:
        """Run an extraction in the user's lane: after their previous one; no reply waits."""
        before = self.extracting.get(user_id)

        async def run() -> None:
            if before is not None:
                await asyncio.gather(before, return_exceptions=True)
            try:
                with background():  # its embedding and Chroma writes never queue ahead of a reply's
                    await job
            except Exception:
                log.exception("memory extraction failed for user %s", user_id)

        _track(self.extracting, user_id, asyncio.create_task(run(), name=f"extract-{user_id}"))

    def schedule(self, chat_id: int, job: Awaitable[None]) -> None:
        held = self.held.pop(chat_id, None)  # the turn's hold on the chat ends with this work

        async def run() -> None:
            try:
                await job
            except Exception:
                log.exception("after-reply work failed for chat %s", chat_id)
            finally:
                if held is not None:
                    await held.release()

        _track(self.after, chat_id, asyncio.create_task(run(), name=f"after-reply-{chat_id}"))


def _track(lane: dict[int, asyncio.Task[None]], key: int, task: asyncio.Task[None]) -> None:
    """`task` is the lane's latest for `key` until it is done (unless a later one replaced it)."""
    lane[key] = task

    def forget(done: asyncio.Task[None]) -> None:
        if lane.get(key) is done:
            del lane[key]

    task.add_done_callback(forget)
