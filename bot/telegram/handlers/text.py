"""A learner's words: a text message becomes one engine turn (streamed into one message when
telegram.stream_replies is on); stickers, photos and edits get one short line."""

from __future__ import annotations

from collections.abc import Awaitable

from telegram import Message, Update
from telegram.constants import ChatType

from memora.engine import EMPTY
from memora.i18n import N_, _
from memora.llm import OnDelta
from memora.views import Reply

from ...inputs import clean
from ..bodies import Answer
from ..context import Context
from ..messages import addressed_text, incoming_text, refs, typing
from ..streaming import answer_streamed

NOT_TEXT = N_("I can read text and listen to voice messages — please type or say your message.")
EDITED = N_(
    "I only read new messages, so I didn't see your edit. "
    "Send it again as a new message if you'd like me to answer it."
)
BARE_MENTION = N_("Yes? Write your question after my name, or reply to one of my messages. /help")


async def on_text(update: Update, context: Context) -> None:
    """A learner's message → one engine turn, with "typing…" shown while it runs (with
    telegram.stream_replies, until the reply starts growing in one message)."""
    incoming = incoming_text(update)
    if incoming is None:
        return
    message, raw, chat, user = incoming
    text: str | None = raw
    if chat.is_group:
        text = addressed_text(message, context.bot.username, context.bot.id)
        if text is None:
            return  # not for us: stay quiet, store nothing
        text = clean(text)
    state = context.bot_data
    if not text:  # a bare mention, or nothing visible at all
        await state.notice(update, message, _(BARE_MENTION if chat.is_group else EMPTY))
        return
    engine, question = state.need_engine(), text

    # A forwarded message is someone else's words: answered, never mined for the forwarder's
    # memories. (A quote of another message is not part of `message.text`, so never read.)
    forwarded = message.forward_origin is not None

    async def turn(on_delta: OnDelta | None = None) -> Reply:
        return await engine.handle_turn(
            chat,
            user,
            question,
            message_id=message.message_id,
            update_id=update.update_id,
            on_delta=on_delta,
            forwarded=forwarded,
            unlimited=user.id in state.telegram.admin_ids,  # [limits] spare the bot's admins
        )

    def deliver(reply: Reply, preview: Message | None = None) -> Awaitable[None]:
        answer = Answer(message, reply, markdown=reply.markdown, quote=chat.is_group)
        return state.answer(update, answer, edit=preview)

    if state.telegram.stream_replies:
        await answer_streamed(
            message,
            turn,
            typing(message),
            deliver,
            group=chat.is_group,
            drafts=state.telegram.stream_drafts,
        )
        return
    async with typing(message):
        reply = await turn()
    await deliver(reply)


async def on_not_text(update: Update, context: Context) -> None:
    """Stickers, photos, files…: one short line (in groups only when addressed)."""
    message = update.message
    who = refs(message) if message else None
    if message is None or who is None:
        return
    if who[0].is_group and addressed_text(message, context.bot.username, context.bot.id) is None:
        return
    await context.bot_data.notice(update, message, _(NOT_TEXT))


async def on_edited(update: Update, context: Context) -> None:
    """An edited message changes nothing stored; say so in private chats, stay quiet in groups."""
    message = update.edited_message
    if message is None or message.chat.type != ChatType.PRIVATE or message.text is None:
        return
    await context.bot_data.notice(update, message, _(EDITED))
