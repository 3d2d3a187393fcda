"""Updates of one chat strictly in order, different chats in parallel."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from telegram import Update
from telegram.ext import BaseUpdateProcessor

_WIDE = 1 << 20
log = logging.getLogger(__name__)


@dataclass
class _ChatLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # updates holding or waiting for the lock; the entry goes away at zero


def _close_unawaited(coroutine: Awaitable[Any]) -> None:
    """A coroutine cancelled while waiting for its turn must not warn "never awaited"."""
    if inspect.iscoroutine(coroutine) and inspect.getcoroutinestate(coroutine) == "CORO_CREATED":
        coroutine.close()


def chat_key(update: object) -> int | None:
    """The chat an update belongs to (the user for chat-less updates); None for neither."""
    if not isinstance(update, Update):
        return None
    if update.effective_chat is not None:
        return update.effective_chat.id
    if update.effective_user is not None:
        return update.effective_user.id
    return None


class PerChatUpdateProcessor(BaseUpdateProcessor):
    """One asyncio.Lock per chat: a chat's updates run one at a time in arrival order (asyncio
    locks wake waiters first-in, first-out), other chats run concurrently up to
    `max_concurrent_updates`. A chat's lock exists only while one of its updates is in flight,
    so idle chats cost no memory.

    `on_done`, when set, is awaited with each update whose handlers have finished (not with one
    cancelled by shutdown): the durable inbox's "handled" mark."""

    on_done: Callable[[object], Awaitable[None]] | None = None

    def __init__(self, max_concurrent_updates: int = 256) -> None:
        # PTB's own semaphore (taken in its final `process_update`, before we know the chat)
        # stays wide: updates queued behind a busy chat must not use up the slots other chats
        # need. The real limit is ours, taken once the chat's lock is held.
        super().__init__(max(max_concurrent_updates, _WIDE))
        self.limit = max_concurrent_updates
        self._slots = asyncio.Semaphore(max_concurrent_updates)
        self._chats: dict[int, _ChatLock] = {}

    @property
    def active_chats(self) -> int:
        """Chats with an update running or waiting (the number of locks held in memory)."""
        return len(self._chats)

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        """Wait for the update's chat (in arrival order), then for a free slot, then run it."""
        key = chat_key(update)
        if key is None:
            await self._run(coroutine)
            await self._done(update)
            return
        entry = self._chats.get(key)
        if entry is None:
            entry = self._chats[key] = _ChatLock()
        entry.users += 1
        try:
            async with entry.lock:
                await self._run(coroutine)
                await self._done(update)  # still in the chat's turn: marks go in order
        finally:
            entry.users -= 1
            if entry.users == 0 and self._chats.get(key) is entry:
                del self._chats[key]
            _close_unawaited(coroutine)

    async def _done(self, update: object) -> None:
        if self.on_done is None:
            return
        try:
            await self.on_done(update)
        except Exception:  # it was handled; at worst it is handled again after a restart
            log.exception("could not mark an update as handled")

    async def _run(self, coroutine: Awaitable[Any]) -> None:
        try:
            async with self._slots:
                await coroutine
        finally:
            _close_unawaited(coroutine)

    async def initialize(self) -> None:
        """Nothing to set up: locks are made on demand."""

    async def shutdown(self) -> None:
        """Nothing to free: locks go away with their last update."""
