"""Telegram rendering for the learner model: inline keyboards, the progress photo, private review.

The core decides everything (what a button does, whose card it is); this module only turns a
Reply's buttons into an InlineKeyboardMarkup, its PNG into a photo, and delivers a `private`
reply to the caller's private chat when the command came from a group.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from telegram import (
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    Update,
)
from telegram.error import BadRequest, Forbidden, TelegramError

from memora.commands import press_button
from memora.engine import UserRef
from memora.views import Reply

from .render import MAX_CAPTION, not_modified, quoting, send_reply, split_text, tg_len

if TYPE_CHECKING:
    from .handlers import Context

log = logging.getLogger(__name__)

SENT_PRIVATELY = "📬 {name}, I sent your review to our private chat."
CANNOT_DM = (
    "{name}, I can't message you privately yet: open a chat with me (@{bot}), press Start, "
    "then send /review there. Review cards are personal, so I don't show them in the group."
)
NOT_ALLOWED = "Sorry, this bot is private and you are not on its list of learners."


def keyboard(reply: Reply) -> InlineKeyboardMarkup | None:
    if not reply.buttons:
        return None
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(b.label, callback_data=b.data) for b in row]
            for row in reply.buttons
        ]
    )


def needs_learner_rendering(reply: Reply) -> bool:
    return bool(reply.buttons or reply.photo is not None or reply.private)


async def send_learner_reply(
    message: Message, reply: Reply, context: Context, *, name: str
) -> None:
    """A reply with buttons, a photo, or for the caller's private chat only."""
    if reply.private and message.chat.type != "private" and message.from_user is not None:
        who = message.from_user
        try:
            await _send_to(context, who.id, reply)
        except (Forbidden, BadRequest) as exc:
            log.info("cannot message user %s privately: %s", who.id, exc)
            await message.reply_text(
                CANNOT_DM.format(name=who.first_name, bot=context.bot.username),
                **quoting(message, True),
            )
            return
        await message.reply_text(
            SENT_PRIVATELY.format(name=who.first_name), **quoting(message, True)
        )
        return
    group = message.chat.type != "private"  # in a group the answer quotes the question
    if reply.photo is not None:
        caption = reply.text if tg_len(reply.text) <= MAX_CAPTION else ""
        await message.reply_photo(
            photo=reply.photo, caption=caption or None, parse_mode=None, **quoting(message, group)
        )
        if not caption:
            await send_reply(message, Reply(reply.text, ok=reply.ok), markdown=False, name=name)
        return
    if reply.buttons:
        await message.reply_text(
            reply.text, reply_markup=keyboard(reply), parse_mode=None, **quoting(message, group)
        )
        return
    await send_reply(message, reply, markdown=False, name=name, quote=group)


async def _send_to(context: Context, chat_id: int, reply: Reply) -> None:
    chunks = split_text(reply.text)
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        await context.bot.send_message(
            chat_id, chunk, parse_mode=None, reply_markup=keyboard(reply) if last else None
        )


async def on_button(update: Update, context: Context) -> None:
    """A tap on an inline button → the core checks and acts → answer, edit, then the next card."""
    from .handlers import allowed

    query = update.callback_query
    if query is None:
        return
    state = context.bot_data
    tapper = query.from_user
    if not allowed(state, tapper.id):
        await query.answer(NOT_ALLOWED, show_alert=True)
        return
    answer = await press_button(
        state.need_engine(), UserRef(tapper.id, tapper.first_name), query.data or ""
    )
    await query.answer(answer.notice or None, show_alert=answer.alert)
    shown = query.message if isinstance(query.message, Message) else None
    if answer.edit is not None and shown is not None:
        try:
            await query.edit_message_text(
                answer.edit.text, reply_markup=keyboard(answer.edit), parse_mode=None
            )
        except BadRequest as exc:
            if not not_modified(exc):
                raise
    if answer.then is not None:
        target = shown.chat.id if shown is not None else tapper.id
        try:
            await _send_to(context, target, answer.then)
        except TelegramError as exc:
            log.warning("could not send the next card to chat %s: %s", target, exc)
