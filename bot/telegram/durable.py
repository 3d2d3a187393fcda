"""Telegram's side of the durable inbox and outbox (memora/durable.py keeps the rows).

Inbox: PTB's Updater (long polling) and its webhook handler both `await update_queue.put(update)`
before they acknowledge the update — the next getUpdates offset moves on only after the puts
(`Updater._start_polling`), and the webhook answers 200 only when its `post` returns
(`WebhookHandler.post`). So `DurableQueue.put` persists the update first: once Telegram is told
an update arrived, it is on disk. The update processor marks it handled when its handlers are
done; what a crash left pending is queued again first at the next start.

Outbox: every answer a handler produces goes through `Deliverer.answer`: kept first, then sent in
the chat's order. A send that fails for a while (429s beyond the rate limiter's own retries, a
network outage) stays kept and is retried with backoff by a background task, across restarts;
one Telegram refuses for good (blocked by the user, chat gone) is dropped and logged, and the
row's kind decides who else hears of it (`on_refused`: a refused reminder switches the learner's
reminders off). Rows other than answers (whose body is an `Answer`: text, a file or a photo
under the learner's message): a reminder or a plain message (text and inline buttons: the next
review card, a group greeting), an edit of a message already sent (a button tap's result) and a
spoken answer (a voice note); one past its `expires` (a reminder whose day is over) is dropped
unsent and recorded.

Replicas share the outbox (PostgreSQL): a chat's answers are sent by whoever holds its lease in
the store (`Outbox.lease`), never by two senders at once, so each answer goes out once and in
the order the answers were kept, whichever replica made them. A sender that finds the chat held
leaves it: the holder looks again after letting go, so nothing waits for the background sender.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
import uuid
import warnings
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, Update
from telegram.error import BadRequest, Forbidden, RetryAfter, TelegramError

from memora.secretfilter import mask_secrets
from memora.storage.durable import ANSWER, EDIT, VOICE, Inbox, Kept, Outbox, Outgoing, Replicas
from memora.views import Document, Reply

from .privacy import masked_update
from .processor import chat_key
from .render import not_modified, quoting, send_reply

log = logging.getLogger(__name__)

FIRST_RETRY = 1.0  # seconds; doubled per failed attempt
LAST_RETRY = 300.0  # at most this long between attempts
IDLE_CHECK = 5.0  # the background sender looks at the outbox at least this often
LEASE = 30.0  # seconds a chat's sending is held without renewal (a dead sender's, at most)
RENEW = LEASE / 3  # a live sender renews this often, however long Telegram takes
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
        payload = json.dumps(update.to_dict())  # ASCII: a lone surrogate survives
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
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
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


# -- the outbox -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """One answer as kept in the outbox: the learner's message (to quote and to reply in its
    chat and topic), the Reply with how to render it, and the streamed preview (if any) to edit
    into its first message, whoever sends it and whenever."""

    message: Message
    reply: Reply
    markdown: bool
    name: str = "reply"
    quote: bool = False
    edit: Message | None = None

    def encode(self) -> str:
        doc = self.reply.document
        return json.dumps(
            {
                "message": self.message.to_dict(),
                "text": mask_secrets(self.reply.text),  # kept on disk: no secret in it
                "note": mask_secrets(self.reply.note),
                "ok": self.reply.ok,
                "reply_markdown": self.reply.markdown,
                "document": None
                if doc is None
                else [doc.filename, base64.b64encode(doc.content).decode(), doc.caption],
                "markdown": self.markdown,
                "name": self.name,
                "quote": self.quote,
                "edit": None if self.edit is None else self.edit.to_dict(),
                "photo": None
                if self.reply.photo is None
                else base64.b64encode(self.reply.photo).decode(),
            }  # ASCII escapes: a lone surrogate in the learner's message is stored, not fatal
        )

    @classmethod
    def decode(cls, body: str, bot: Bot) -> Answer:
        data: dict[str, Any] = json.loads(body)
        doc = data["document"]
        document = None if doc is None else Document(doc[0], base64.b64decode(doc[1]), doc[2])
        return cls(
            Message.de_json(data["message"], bot),
            Reply(
                data["text"],
                ok=data["ok"],
                document=document,
                markdown=data["reply_markdown"],
                note=data["note"],
                photo=None if data.get("photo") is None else base64.b64decode(data["photo"]),
            ),
            markdown=data["markdown"],
            name=data["name"],
            quote=data["quote"],
            edit=None if data.get("edit") is None else Message.de_json(data["edit"], bot),
        )


Buttons = list[list[tuple[str, str]]]  # rows of (label, callback data), as kept in a body


def message_body(text: str, buttons: Buttons | None = None, message_id: int | None = None) -> str:
    """The body of a MESSAGE row (or an EDIT row, with the message to edit)."""
    body: dict[str, Any] = {"text": mask_secrets(text), "buttons": buttons or []}
    if message_id is not None:
        body["message_id"] = message_id
    return json.dumps(body)


def voice_body(message: Message, speech: bytes, *, quote: bool) -> str:
    """The body of a VOICE row: the spoken answer, under the learner's message."""
    audio = base64.b64encode(speech).decode()
    return json.dumps({"message": message.to_dict(), "voice": audio, "quote": quote})


def markup_of(buttons: Buttons) -> InlineKeyboardMarkup | None:
    """Rows of (label, data) as Telegram's inline keyboard (None without buttons)."""
    if not buttons:
        return None
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(label, callback_data=data) for label, data in row]
            for row in buttons
        ]
    )


def _retry_after(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 warns when the int form is read
        warnings.simplefilter("ignore")
        wait = exc.retry_after
    return wait.total_seconds() if isinstance(wait, timedelta) else float(wait)


def backoff(attempts: int) -> float:
    return float(min(LAST_RETRY, FIRST_RETRY * 2**attempts))


class Deliverer:
    """Sends kept answers, one chat at a time in order, and retries what could not go yet."""

    def __init__(self, outbox: Outbox, bot: Bot, holder: str | None = None) -> None:
        self.outbox = outbox
        self.bot = bot
        self.holder = holder or uuid.uuid4().hex  # this sender's name on the chats it holds
        # A chat's lock lives while a flush holds or awaits it (as the engine's chat locks do).
        self._locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # kind → what to do when Telegram refuses such a row for good (Forbidden, BadRequest)
        self.on_refused: dict[str, Callable[[Outgoing, TelegramError], Awaitable[None]]] = {}
        # What "now" is for a row's expiry (unix time): the product's clock, which tests set.
        self.clock: Callable[[], float] = time.time

    async def keep(
        self,
        chat_id: int,
        user_id: int | None,
        rows: list[Kept],
        *,
        update_id: int | None = None,
    ) -> None:
        """Keep rows other than answers (an edit, a plain message, a voice note) and deliver
        the chat's rows in order."""
        await self.outbox.put_all(chat_id, user_id, rows, update_id)
        await self.flush(chat_id)

    async def answer(
        self, answer: Answer, *, update_id: int | None = None, edit: Message | None = None
    ) -> None:
        """Keep the answer, then deliver the chat's answers in order (this one among them, with
        `edit`, a streamed preview, becoming its first message)."""
        if edit is not None:
            answer = replace(answer, edit=edit)
        user = answer.message.from_user
        chat_id = answer.message.chat_id
        await self.outbox.put(
            chat_id, user.id if user else None, answer.encode(), update_id=update_id
        )
        await self.flush(chat_id)

    async def flush(self, chat_id: int) -> None:
        """Send the chat's due answers in order, unless another sender (replica) holds the chat:
        then it sends them, as it looks again after letting go."""
        lock = self._locks.get(chat_id)
        if lock is None:
            lock = self._locks[chat_id] = asyncio.Lock()
        async with lock:
            while True:
                async with self._holding(chat_id) as held:
                    if held is None:
                        return
                    if not await self._drain(chat_id, lost=held):
                        self._wake.set()  # the background sender comes back for the rest
                        return
                # Let go. An answer kept meanwhile by a sender that found the chat held is
                # ours to send: look again, now that the chat is free.
                pending = await self.outbox.pending(chat_id)
                if not pending or pending[0].next_at > time.time():
                    return

    async def _drain(self, chat_id: int, *, lost: asyncio.Event) -> bool:
        """Send what is pending; False when the chat must wait (or the lease was lost)."""
        for item in await self.outbox.pending(chat_id):
            if lost.is_set() or item.next_at > time.time() or not await self._send(item):
                return False
        return True

    @contextlib.asynccontextmanager
    async def _holding(self, chat_id: int) -> AsyncIterator[asyncio.Event | None]:
        """The chat's lease for the block, renewed meanwhile: None when another holds it; else
        an event set if the lease was lost (this process stalled past it: stop sending)."""
        if not await self.outbox.lease(chat_id, self.holder, LEASE):
            yield None
            return
        lost = asyncio.Event()

        async def renew() -> None:
            while not lost.is_set():
                await asyncio.sleep(RENEW)
                try:
                    kept = await self.outbox.lease(chat_id, self.holder, LEASE)
                except Exception:  # the store is away: the lease may run out, so stop
                    log.exception("chat %s: could not renew the outbox lease", chat_id)
                    kept = False
                if not kept:
                    log.warning("chat %s: outbox lease lost; no more sending here", chat_id)
                    lost.set()

        keeper = asyncio.create_task(renew(), name=f"outbox-lease-{chat_id}")
        try:
            yield lost
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            try:
                await self.outbox.unlease(chat_id, self.holder)
            except Exception:  # it expires by itself
                log.exception("chat %s: could not let go of the outbox lease", chat_id)

    async def _send(self, item: Outgoing) -> bool:
        """One attempt; False when the chat must wait (its later answers stay behind this one)."""
        if item.expired(self.clock()):
            log.warning(
                "chat %s: a %s kept past its time was dropped unsent (%d attempts)",
                item.chat_id,
                item.kind,
                item.attempts,
            )
            await self.outbox.expired(item)
            return True
        try:
            await self._perform(item)
        except RetryAfter as exc:
            delay = max(_retry_after(exc), backoff(item.attempts))
            log.warning(
                "chat %s: flood control, %s kept, retry in %.0f s", item.chat_id, item.kind, delay
            )
            await self.outbox.retry_later(item, str(exc), delay)
            return False
        except (Forbidden, BadRequest) as exc:
            log.warning(
                "chat %s: Telegram refused the %s for good: %s", item.chat_id, item.kind, exc
            )
            await self.outbox.failed(item, str(exc))
            await self._refused(item, exc)
            return True
        except TelegramError as exc:  # network trouble, Telegram down: keep it and wait
            delay = backoff(item.attempts)
            log.warning(
                "chat %s: %s not sent (%s), retry in %.0f s", item.chat_id, item.kind, exc, delay
            )
            await self.outbox.retry_later(item, str(exc), delay)
            return False
        await self.outbox.sent(item)
        return True

    async def _perform(self, item: Outgoing) -> None:
        """Send one row as its kind says."""
        if item.kind == ANSWER:
            answer = Answer.decode(item.body, self.bot)
            await send_reply(
                answer.message,
                answer.reply,
                markdown=answer.markdown,
                name=answer.name,
                quote=answer.quote,
                edit=answer.edit,
            )
            return
        data: dict[str, Any] = json.loads(item.body)
        if item.kind == VOICE:
            message = Message.de_json(data["message"], self.bot)
            speech = base64.b64decode(data["voice"])
            await message.reply_voice(
                speech, filename="answer.ogg", **quoting(message, bool(data["quote"]))
            )
            return
        markup = markup_of(data.get("buttons") or [])
        if item.kind == EDIT:
            try:
                await self.bot.edit_message_text(
                    data["text"],
                    chat_id=item.chat_id,
                    message_id=int(data["message_id"]),
                    reply_markup=markup,
                    parse_mode=None,
                )
            except BadRequest as exc:
                if not not_modified(exc):  # showing it already is what was wanted
                    raise
            return
        await self.bot.send_message(
            item.chat_id, data["text"], parse_mode=None, reply_markup=markup
        )

    async def _refused(self, item: Outgoing, exc: TelegramError) -> None:
        """Tell whoever cares about this kind (reminders: the learner blocked the bot)."""
        hook = self.on_refused.get(item.kind)
        if hook is None:
            return
        try:
            await hook(item, exc)
        except Exception:
            log.exception("chat %s: handling a refused %s failed", item.chat_id, item.kind)

    # -- the background sender -------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="outbox")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                for chat_id in await self.outbox.chats_due():
                    await self.flush(chat_id)
                due = await self.outbox.next_due()
            except Exception:
                log.exception("the outbox sender failed; trying again")
                due = None
            wait = IDLE_CHECK if due is None else min(IDLE_CHECK, max(0.05, due - time.time()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            self._wake.clear()
