"""Telegram's side of the durable outbox (memora/storage/durable.py keeps the rows).

Outbox: every answer a handler produces goes through `Deliverer.answer`: kept first, then sent in
the chat's order. A send that fails for a while (429s beyond the rate limiter's own retries, a
network outage) stays kept and is retried with backoff by a background task, across restarts;
one Telegram refuses for good (blocked by the user, chat gone) is dropped and logged, and the
row's kind decides who else hears of it (`on_refused`: a refused reminder switches the learner's
reminders off). Rows other than answers (whose body is an `Answer`: text, a file or a photo
under the learner's message): a reminder or a plain message (text and inline buttons: the next
review card, a group greeting), the weekly report (a photo, its text the caption), an edit
of a message already sent (a button tap's result) and a spoken answer (a voice note); one
past its `expires` (a reminder whose day is over) is dropped unsent and recorded.

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
from dataclasses import replace
from datetime import timedelta
from typing import Any

from telegram import Bot, Message, ReplyParameters
from telegram.error import BadRequest, Forbidden, RetryAfter, TelegramError

from memora.storage.durable import ANSWER, EDIT, VOICE, WEEKLY, Kept, Outbox, Outgoing

from .bodies import Answer, markup_of, web_app_markup
from .render import not_modified, quoting, send_reply
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

FIRST_RETRY = 1.0  # seconds; doubled per failed attempt
LAST_RETRY = 300.0  # at most this long between attempts
IDLE_CHECK = 5.0  # the background sender looks at the outbox at least this often
LEASE = 30.0  # seconds a chat's sending is held without renewal (a dead sender's, at most)
RENEW = LEASE / 3  # a live sender renews this often, however long Telegram takes


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
        chat_id = answer.message.chat_id
        await self.outbox.put(chat_id, answer.learner_id, answer.encode(), update_id=update_id)
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
            await cancel_and_wait(keeper)
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
                markup=web_app_markup(answer.web_app),
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
        if item.kind == WEEKLY and data.get("photo"):  # the chart, the report as its caption
            photo = base64.b64decode(data["photo"])
            await self.bot.send_photo(item.chat_id, photo, caption=data["text"], parse_mode=None)
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
        quoted = data.get("reply_to")
        await self.bot.send_message(
            item.chat_id,
            data["text"],
            parse_mode=None,
            reply_markup=markup,
            reply_parameters=None
            if quoted is None
            else ReplyParameters(int(quoted), allow_sending_without_reply=True),
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
            await cancel_and_wait(self._task)
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
