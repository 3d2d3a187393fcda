"""Before every handler (PTB group -1): the allow-list, one place that decides who may talk to the
bot, for messages and button taps alike; and the language the handlers' notices are in."""

from __future__ import annotations

import logging

from telegram import Update, User
from telegram.constants import ChatType
from telegram.ext import ApplicationHandlerStop

from memora.engine import Engine
from memora.i18n import DEFAULT, N_, _, current, from_platform, switch
from memora.types import UserRef

from ..context import Context
from ..messages import answers

log = logging.getLogger(__name__)

NOT_ALLOWED = N_(
    "Sorry, this bot is private and you are not on its list of learners. "
    "Ask its operator to add your user id ({user_id})."
)
NOT_ALLOWED_TAP = N_("Sorry, this bot is private and you are not on its list of learners.")


async def gate(update: Update, context: Context) -> None:
    """The allow-list, before every handler (group -1): a message from anyone else is answered
    with one line where the bot would have answered, a button tap with an alert, and neither
    goes any further. The rest of this update speaks the sender's language (their app's for a
    stranger; a learner's own, from the core, otherwise), and a learner's private chat gets the
    command menu in it."""
    state = context.bot_data
    sender = update.effective_user
    switch(from_platform(sender.language_code if sender else None) or DEFAULT)
    query = update.callback_query
    if query is not None:
        if state.allows(query.from_user.id):
            await _learner_language(state.engine, query.from_user)
            return
        await query.answer(_(NOT_ALLOWED_TAP), show_alert=True)
        raise ApplicationHandlerStop
    message = update.message or update.edited_message
    user = message.from_user if message else None
    if message is None or user is None or user.is_bot:
        return
    if state.allows(user.id):
        lang = await _learner_language(state.engine, user)
        if message.chat.type == ChatType.PRIVATE and update.message is not None:
            await state.menus.follow(context.bot, message.chat.id, lang, user.language_code)
        return
    log.info("user %s is not allowed; ignored their message", user.id)
    if update.message is not None and answers(message, context.bot.username, context.bot.id):
        await state.notice(update, message, _(NOT_ALLOWED).format(user_id=user.id))
    raise ApplicationHandlerStop


async def _learner_language(engine: Engine | None, user: User) -> str:
    """The learner's language (their choice, profile, app) for this update's notices."""
    if engine is not None:
        switch(await engine.language(UserRef(user.id, user.first_name, user.language_code or "")))
    return current()
