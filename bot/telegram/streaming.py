"""Streamed replies (telegram.stream_replies): one message that grows while the model writes, then
becomes the reply exactly as it would have been sent without streaming.

The first text sends a plain message (no parse_mode: half-written Markdown must never be rejected);
later text edits it, at most once per interval and only when the text changed. The messages go
out from a task of their own, so a slow Bot API never holds up the model's stream, and every call
goes through the bot's rate limiter like any other. When the turn ends, `finish` waits for an
edit already on its way (nothing older may land after the final text) and then renders the reply
with send_reply, editing the preview into the first chunk. An edit that Telegram refuses ("not
modified" aside) only stops the preview; the reply itself is never lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

from telegram import Message
from telegram.error import BadRequest

from memora.llm import OnDelta
from memora.views import Reply

from .render import MAX_TEXT, not_modified, prefix_fits, quoting, tg_len

log = logging.getLogger(__name__)

EDIT_EVERY = 1.5  # seconds between two edits of a preview in a private chat
GROUP_EDIT_EVERY = 3.0  # in groups Telegram allows a bot about 20 messages a minute
MORE = " …"  # ends a preview cut at Telegram's length limit


def preview(text: str) -> str:
    """What the growing message shows for the text so far: stripped, and cut to fit one
    message (the rest follows in the final rendering)."""
    text = text.strip()
    if tg_len(text) <= MAX_TEXT:
        return text
    return text[: prefix_fits(text, MAX_TEXT - len(MORE))].rstrip() + MORE


class ReplyStream:
    """The growing message for one reply. `update` is the engine's on_delta callback."""

    def __init__(
        self,
        message: Message,
        *,
        quote: bool = False,
        interval: float = EDIT_EVERY,
        on_start: Callable[[], None] | None = None,
    ) -> None:
        self.message = message  # the learner's message being answered
        self.quote = quote
        self.interval = interval
        self.on_start = on_start  # called once, when the first text arrives (stops "typing…")
        self.sent: Message | None = None  # the preview message, once Telegram has it
        self.stopped = False  # Telegram refused an edit (or the send): no more previews
        self._latest = ""
        self._shown = ""
        self._closed = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._inflight: asyncio.Future[bool] | None = None

    async def update(self, text: str) -> None:
        """The reply so far. Never blocks on Telegram and never raises."""
        if self._closed or self.stopped:
            return
        self._latest = text
        if self._task is None:
            if not preview(text):
                return  # nothing visible yet: Telegram refuses empty messages
            if self.on_start is not None:
                self.on_start()
            self._task = asyncio.create_task(self._run(), name=f"stream-{self.message.chat_id}")
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            text = preview(self._latest)
            if text != self._shown:
                call = self._send(text) if self.sent is None else self._edit(text)
                self._inflight = asyncio.ensure_future(call)
                if not await asyncio.shield(self._inflight):
                    self.stopped = True
                    return
            await asyncio.sleep(self.interval)

    async def _send(self, text: str) -> bool:
        try:
            self.sent = await self.message.reply_text(
                text, parse_mode=None, **quoting(self.message, self.quote)
            )
        except Exception as exc:  # never lose the reply over a preview
            log.warning("streaming stopped: the first part could not be sent: %s", exc)
            return False
        self._shown = text
        return True

    async def _edit(self, text: str) -> bool:
        assert self.sent is not None
        try:
            await self.sent.edit_text(text, parse_mode=None)
        except BadRequest as exc:
            if not not_modified(exc):
                log.warning("streaming stopped: an edit was refused: %s", exc)
                return False
        except Exception as exc:
            log.warning("streaming stopped: an edit failed: %s", exc)
            return False
        self._shown = text
        return True

    async def _stop(self, *, wait: bool = True) -> None:
        """No more previews; with `wait`, let a call already on its way land first."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if wait and self._inflight is not None:
            await asyncio.gather(self._inflight, return_exceptions=True)

    async def finish(self) -> Message | None:
        """No more previews; the preview message (to become the reply's first), if any."""
        await self._stop()
        return self.sent

    async def abort(self, *, delete: bool) -> None:
        """The turn failed unexpectedly: stop, and (with `delete`) take the preview back, since
        the error handler answers on its own."""
        await self._stop(wait=delete)
        if delete and self.sent is not None:
            try:
                await self.sent.delete()
            except Exception as exc:
                log.warning("could not delete the preview of a failed turn: %s", exc)


async def answer_streamed(
    message: Message,
    turn: Callable[[OnDelta], Awaitable[Reply]],
    typing: AbstractAsyncContextManager[Callable[[], None]],
    deliver: Callable[[Reply, Message | None], Awaitable[None]],
    *,
    group: bool,
) -> None:
    """Run one turn with its reply streamed into the chat, "typing…" shown until the first text;
    then `deliver` the reply, the preview becoming its first message (send_reply's `edit`)."""
    async with typing as stop_typing:
        stream = ReplyStream(
            message,
            quote=group,
            interval=GROUP_EDIT_EVERY if group else EDIT_EVERY,
            on_start=stop_typing,
        )
        try:
            reply = await turn(stream.update)
        except BaseException as exc:
            await stream.abort(delete=isinstance(exc, Exception))
            raise
    await deliver(reply, await stream.finish())
