"""Streamed replies (telegram.stream_replies): the reply shows while the model writes it, then
is sent exactly as it would have been without streaming.

In a private chat the text so far goes out as a message draft (Bot API 9 `sendMessageDraft`,
`telegram.stream_drafts`): an ephemeral preview that Telegram animates and drops after 30
seconds, so it is sent again before then while the model still writes; the reply itself then
goes out as one ordinary message. No message is edited, so the chat's message budget is spent
on the reply alone. A server that refuses drafts (an older self-hosted Bot API) switches this
process to the other way, which groups always use (drafts are for private chats only): the
first text sends a plain message (no parse_mode: half-written Markdown must never be rejected)
and later text edits it, at most once per interval and only when the text changed; when the
turn ends the preview is edited into the reply's first chunk.

Previews go out from a task of their own, so a slow Bot API never holds up the model's stream,
and every call goes through the bot's rate limiter like any other. When the turn ends, `finish`
waits for a call already on its way (nothing older may land after the final text). A preview
that Telegram refuses ("not modified" aside) only stops the preview; the reply itself is never
lost.
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
DRAFT_EVERY = 1.0  # seconds between two drafts of a reply (drafts are not messages)
DRAFT_REFRESH = 20.0  # a draft lives 30 s: one unchanged for this long is sent again
MORE = " …"  # ends a preview cut at Telegram's length limit


def preview(text: str) -> str:
    """What the growing message shows for the text so far: stripped, and cut to fit one
    message (the rest follows in the final rendering)."""
    text = text.strip()
    if tg_len(text) <= MAX_TEXT:
        return text
    return text[: prefix_fits(text, MAX_TEXT - len(MORE))].rstrip() + MORE


class Drafts:
    """Whether this process streams through drafts: until the Bot API refuses one."""

    refused = False


class ReplyStream:
    """The preview of one reply. `update` is the engine's on_delta callback."""

    def __init__(
        self,
        message: Message,
        *,
        quote: bool = False,
        interval: float = EDIT_EVERY,
        on_start: Callable[[], None] | None = None,
        drafts: bool = False,
    ) -> None:
        self.message = message  # the learner's message being answered
        self.quote = quote
        self.drafts = drafts and not Drafts.refused  # else one message, edited
        self.edit_interval = interval
        self.interval = DRAFT_EVERY if self.drafts else interval
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
            try:
                await asyncio.wait_for(self._wake.wait(), DRAFT_REFRESH if self.drafts else None)
            except TimeoutError:  # no new text for a while: the draft must not expire
                self._shown = ""
            self._wake.clear()
            text = preview(self._latest)
            if text != self._shown:
                self._inflight = asyncio.ensure_future(self._show(text))
                if not await asyncio.shield(self._inflight):
                    self.stopped = True
                    return
            await asyncio.sleep(self.interval)

    async def _show(self, text: str) -> bool:
        """Show `text` as the draft, or as the first part and then its edits; False when it
        could not be shown (the previews stop; the reply itself is never lost over one)."""
        shown = self.drafts and await self._draft(text)
        if not shown and not self.drafts:  # no drafts, or the server has just refused them
            shown = await (self._send(text) if self.sent is None else self._edit(text))
        if shown:
            self._shown = text
        return shown

    async def _draft(self, text: str) -> bool:
        """Send the text so far as the reply's draft; a server that does not take drafts turns
        them off for the process (the preview is then sent and edited instead)."""
        try:
            await self.message.get_bot().send_message_draft(
                self.message.chat_id,
                draft_id=self.message.message_id,  # one draft per reply; never 0
                text=text,
                message_thread_id=self.message.message_thread_id,
                parse_mode=None,
            )
        except BadRequest as exc:
            if not_modified(exc):
                return True
            log.warning("drafts refused (%s): previews are edited messages from now on", exc)
            Drafts.refused, self.drafts, self.interval = True, False, self.edit_interval
            return False
        except Exception as exc:  # never lose the reply over a preview
            log.warning("streaming stopped: a draft could not be sent: %s", exc)
            return False
        return True

    async def _send(self, text: str) -> bool:
        try:
            self.sent = await self.message.reply_text(
                text, parse_mode=None, **quoting(self.message, self.quote)
            )
        except Exception as exc:  # never lose the reply over a preview
            log.warning("streaming stopped: the first part could not be sent: %s", exc)
            return False
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
        """No more previews; the preview message (to become the reply's first), if any: none
        for a draft, which the reply's own message replaces."""
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
    drafts: bool = True,
) -> None:
    """Run one turn with its reply streamed into the chat, "typing…" shown until the first text;
    then `deliver` the reply: a new message after drafts (private chats, `drafts`), else the
    preview becomes its first message (send_reply's `edit`)."""
    async with typing as stop_typing:
        stream = ReplyStream(
            message,
            quote=group,
            interval=GROUP_EDIT_EVERY if group else EDIT_EVERY,
            on_start=stop_typing,
            drafts=drafts and not group,
        )
        try:
            reply = await turn(stream.update)
        except BaseException as exc:
            await stream.abort(delete=isinstance(exc, Exception))
            raise
    await deliver(reply, await stream.finish())
