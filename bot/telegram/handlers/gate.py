"""The allow-list, before every handler (PTB group -1): one place decides who may talk to the bot,
for messages and button taps alike."""

from __future__ import annotations

import logging

from telegram import Update
from telegram.ext import ApplicationHandlerStop

from ..context import Context
from ..messages import answers

log = logging.getLogger(__name__)

NOT_ALLOWED = (
    "Sorry, this bot is private and you are not on its list of learners. "
    "Ask its operator to add your user id ({user_id})."
)
NOT_ALLOWED_TAP = "Sorry, this bot is private and you are not on its list of learners."


async def gate(update: Update, context: Context) -> None:
    """The allow-list, before every handler (group -1): a message from anyone else is answered
    with one line where the bot would have answered, a button tap with an alert, and neither
    goes any further."""
    state = context.bot_data
    query = update.callback_query
    if query is not None:
        if state.allows(query.from_user.id):
            return
        await query.answer(NOT_ALLOWED_TAP, show_alert=True)
        raise ApplicationHandlerStop
    message = update.message or update.edited_message
    user = message.from_user if message else None
    if message is None or user is None or user.is_bot or state.allows(user.id):
        return
    log.info("user %s is not allowed; ignored their message", user.id)
    if update.message is not None and answers(message, context.bot.username, context.bot.id):
        await state.notice(update, message, NOT_ALLOWED.format(user_id=user.id))
    raise ApplicationHandlerStop
