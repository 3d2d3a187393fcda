"""Telegram rendering for the learner model: inline keyboards, the progress photo, private review.
(The tap on a button is handlers/buttons.py.)

The core decides everything (what a button does, whose card it is); this module only turns a
Reply's buttons into an InlineKeyboardMarkup, its PNG into a photo, and delivers a `private`
reply to the caller's private chat when the command came from a group.
"""

from __future__ import annotations

import logging

from telegram import InlineKeyboardMarkup, Message, Update
from telegram.error import BadRequest, Forbidden

from memora.i18n import N_, _
from memora.storage.durable import MESSAGE, Kept
from memora.types import UserRef
from memora.views import Reply

from .bodies import Answer, Buttons, markup_of, message_body
from .context import Context
from .render import split_text

log = logging.getLogger(__name__)

SENT_PRIVATELY = N_("📬 {name}, I sent your review to our private chat.")
CANNOT_DM = N_(
    "{name}, I can't message you privately yet: open a chat with me (@{bot}), press Start, "
    "then send /review there. Review cards are personal, so I don't show them in the group."
)


def buttons_of(reply: Reply) -> Buttons:
    """A reply's buttons as an outbox body keeps them: rows of (label, callback data)."""
    return [[(b.label, b.data) for b in row] for row in reply.buttons]


def keyboard(reply: Reply) -> InlineKeyboardMarkup | None:
    return markup_of(buttons_of(reply))


def needs_learner_rendering(reply: Reply) -> bool:
    return bool(reply.buttons or reply.photo is not None or reply.private)


async def send_learner_reply(
    update: Update, message: Message, reply: Reply, context: Context, *, name: str, who: UserRef
) -> None:
    """A reply for `who` with buttons, a photo, or for their private chat only. Through the
    outbox except the review sent privately from a group (whether Telegram lets the bot write
    to the caller decides what the group is told)."""
    state = context.bot_data
    if reply.private and message.chat.type != "private":
        try:
            await _send_to(context, who.id, reply)
        except (Forbidden, BadRequest) as exc:
            log.info("cannot message user %s privately: %s", who.id, exc)
            text = _(CANNOT_DM).format(name=who.name, bot=context.bot.username)
            await state.notice(update, message, text)
            return
        await state.notice(update, message, _(SENT_PRIVATELY).format(name=who.name))
        return
    group = message.chat.type != "private"  # in a group the answer quotes the question
    if reply.buttons:
        rows = message_rows(reply, reply_to=message.message_id if group else None)
        await state.need_deliverer().keep(message.chat_id, who.id, rows, update_id=update.update_id)
        return
    answer = Answer(message, reply, markdown=False, name=name, quote=group, user_id=who.id)
    await state.answer(update, answer)


async def _send_to(context: Context, chat_id: int, reply: Reply) -> None:
    chunks = split_text(reply.text)
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        await context.bot.send_message(
            chat_id, chunk, parse_mode=None, reply_markup=keyboard(reply) if last else None
        )


def message_rows(reply: Reply, *, reply_to: int | None = None) -> list[Kept]:
    """A plain reply as outbox rows: its chunks in order, the buttons under the last; the first
    quotes `reply_to` (the learner's message, in a group)."""
    chunks = split_text(reply.text)
    return [
        Kept(
            message_body(
                chunk,
                buttons_of(reply) if i == len(chunks) - 1 else None,
                reply_to=reply_to if i == 0 else None,
            ),
            MESSAGE,
        )
        for i, chunk in enumerate(chunks)
    ]
