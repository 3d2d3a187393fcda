"""Telegram's side of the durable inbox (memora/storage/durable.py keeps the rows).

Inbox: PTB's Updater (long polling) and its webhook handler both `await update_queue.put(update)`
before they acknowledge the update — the next getUpdates offset moves on only after the puts
(`Updater._start_polling`), and the webhook answers 200 only when its `post` returns
(`WebhookHandler.post`). So `DurableQueue.put` persists the update first: once Telegram is told
an update arrived, it is on disk. The update processor marks it handled when its handlers are
done; what a crash left pending is queued again first at the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from telegram import Bot, Update

from memora.storage.durable import Inbox, Replicas

from .privacy import masked_update
from .processor import chat_key
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

PARKED_POLL = 0.1  # seconds between looks at updates waiting for another replica's


class DurableQueue(asyncio.Queue[object]):
    """The application's update queue: an update is in the inbox before `put` returns, and one
    seen before is dropped (Telegram delivers again what it was not told we have).

    Alone on its store (SQLite) it takes every pending update at start. Among replicas
    (PostgreSQL) it beats in the store, takes over the pending updates of replicas gone silent
    (at start, at each beat, and when Telegram delivers one of them again), and holds back
    ("parks") an update while an older one of its chat is pending at another replica, queueing
    it when that one is handled: a chat's updates are handled in order whichever replica got
    them."""

    def __init__(self) -> None:
        super().__init__()
        self.inbox: Inbox | None = None  # set once the store is open (post_init)
        self.replicas: Replicas | None = None
        self._bot: Bot | None = None
        self._sole = True  # the only process on its store (SQLite)
        self._parked: dict[int, int | None] = {}  # update_id → chat: ours, waiting for another
        self._kick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def put(self, item: object) -> None:
        if isinstance(item, Update):
            item = masked_update(item)  # before any byte of it is written (or handled)
        if isinstance(item, Update) and self.inbox is not None:
            if not await self._keep(item):
                return
            chat = chat_key(item)
            if await self._held_up(chat, item.update_id):
                self._parked[item.update_id] = chat
                self._kick.set()
                return
        await super().put(item)

    async def _keep(self, update: Update) -> bool:
        """In the inbox as ours: new, or pending at a replica that is gone."""
        inbox, replicas = self._opened()
        user = update.effective_user
        payload = json.dumps(kept_form(update))  # ASCII: a lone surrogate survives
        if await inbox.add(
            update.update_id, chat_key(update), user.id if user else None, payload, replicas.id
        ):
            return True
        if not self._sole:  # Telegram retries what a killed replica had not answered 200 to
            for update_id, old, _ in await inbox.orphans(replicas.alive_after(), update.update_id):
                if await inbox.take(update_id, old, replicas.id):
                    log.info("update %s arrived again, left by a gone replica: ours", update_id)
                    return True
        log.info("update %s arrived again; it was handled or is queued", update.update_id)
        return False

    async def _held_up(self, chat: int | None, update_id: int) -> bool:
        """Whether an older update of the chat waits elsewhere (another replica, or parked)."""
        if self._sole or chat is None:
            return False
        if chat in self._parked.values():
            return True
        inbox, replicas = self._opened()
        return await inbox.behind_others(chat, update_id, replicas.id)

    def _opened(self) -> tuple[Inbox, Replicas]:
        if self.inbox is None or self.replicas is None:
            raise RuntimeError("the inbox is not open")
        return self.inbox, self.replicas

    async def open(self, inbox: Inbox, bot: Bot, replicas: Replicas, *, sole: bool) -> int:
        """Attach the inbox and take over what earlier runs (or gone replicas) left unhandled:
        queued now when `sole` (nothing else can hold it), else as the chats' order allows.
        Returns how many updates were taken over."""
        self.inbox, self._bot, self.replicas, self._sole = inbox, bot, replicas, sole
        await inbox.prune()
        if sole:
            taken = await self._take_over(float("inf"))
            for incoming in await inbox.pending(replicas.id):
                await super().put(Update.de_json(json.loads(incoming.payload), bot))
                self._parked.pop(incoming.update_id, None)
        else:
            await replicas.beat()
            taken = await self._take_over(replicas.alive_after())
            await self._release()
            self._task = asyncio.create_task(self._run(), name="replica")
        if taken:
            log.info("handling %d update(s) received before a stop", taken)
        return taken

    async def close(self) -> None:
        """Stop beating and leave: what is still ours is taken over by the others at once."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
            if self.replicas is not None:
                await self.replicas.leave()

    async def _take_over(self, alive_after: float) -> int:
        """Make ours the pending updates of owners with no beat since `alive_after` (parked
        until `_release`); how many we got."""
        inbox, replicas = self._opened()
        taken = 0
        for update_id, old, chat in await inbox.orphans(alive_after):
            if old != replicas.id and await inbox.take(update_id, old, replicas.id):
                self._parked[update_id] = chat
                taken += 1
        return taken

    async def _release(self) -> None:
        """Queue the parked updates no other replica's older update holds up, oldest first."""
        if not self._parked:
            return
        inbox, replicas = self._opened()
        assert self._bot is not None
        for incoming in await inbox.ready(replicas.id):
            if incoming.update_id in self._parked:
                del self._parked[incoming.update_id]
                await super().put(Update.de_json(json.loads(incoming.payload), self._bot))

    async def _run(self) -> None:
        """Beat (and take over from the gone) every interval; while updates are parked, look
        for them to be free often."""
        _, replicas = self._opened()
        next_beat = time.monotonic() + replicas.interval
        while True:
            try:
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + replicas.interval
                    await replicas.beat()
                    await self._take_over(replicas.alive_after())
                await self._release()
            except Exception:
                log.exception("the replica's inbox upkeep failed; trying again")
            wait = max(0.0, next_beat - time.monotonic())
            if self._parked:
                wait = min(wait, PARKED_POLL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), wait)
            self._kick.clear()


async def handled(inbox: Inbox, update: object) -> None:
    """The processor's hook: an update whose handlers are done leaves the inbox."""
    if isinstance(update, Update):
        await inbox.done(update.update_id)


def kept_form(update: Update) -> dict[str, Any]:
    """The update as the inbox writes it: whole, except the text of a tapped message. A question may
    quote a memory that its Yes deletes (memora.privacy.confirmations), and the tap's handler needs
    only the message's ids; the words would otherwise outlive the deletion on disk."""
    data = update.to_dict()
    query = data.get("callback_query")
    if isinstance(query, dict) and isinstance(query.get("message"), dict):
        shown = query["message"]
        query["message"] = {
            k: shown[k] for k in ("message_id", "date", "chat", "from") if k in shown
        }
    return data
