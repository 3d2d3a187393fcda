"""Before every handler (PTB group -1): the allow-list, one place that decides who may talk to the
bot, for every kind of update (messages, edits, button taps, the bot added to a group, and any
kind a later handler may take); and the language the handlers' notices are in."""

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
    """The allow-list, before every handler (group -1). An update goes further only when it has
    a sender (`effective_user`) whom the allow-list admits: anything else stops here, whatever
    its kind (a stranger adding the bot to a group, a chat-member change, a poll, an inline
    query: silence). A stranger's message is answered with one line where the bot would have
    answered, a stranger's button tap with an alert. The rest of this update speaks the sender's
    language (their app's for a stranger; a learner's own, from the core, otherwise), and a
    learner's private chat gets the command menu in it."""
    state = context.bot_data
    sender = update.effective_user
    switch(from_platform(sender.language_code if sender else None) or DEFAULT)
    if sender is None or not state.allows(sender.id):
        await _refuse(update, context, sender)
        raise ApplicationHandlerStop
    lang = await _learner_language(state.engine, sender)
    message = update.message
    if message is not None and message.chat.type == ChatType.PRIVATE and not sender.is_bot:
        await state.menus.follow(context.bot, message.chat.id, lang, sender.language_code)
        await state.web_app.follow(context.bot, message.chat.id, lang)  # the page's button


async def _refuse(update: Update, context: Context, sender: User | None) -> None:
    """What a stranger hears: an alert for a tap, one line for a message meant for the bot,
    nothing for the rest (an edit, the bot added to a group, any other kind of update)."""
    query = update.callback_query
    if query is not None:
        await query.answer(_(NOT_ALLOWED_TAP), show_alert=True)
        return
    kind = next(iter(update.to_dict().keys() - {"update_id"}), "unknown")
    who = sender.id if sender else "nobody"
    log.info("update %s (%s) from %s: not on the allow-list; ignored", update.update_id, kind, who)
    message = update.message
    if sender is None or sender.is_bot or message is None:
        return
    if answers(message, context.bot.username, context.bot.id):
        await context.bot_data.notice(update, message, _(NOT_ALLOWED).format(user_id=sender.id))


async def _learner_language(engine: Engine | None, user: User) -> str:
    """The learner's language (their choice, profile, app) for this update's notices."""
    if engine is not None:
        switch(await engine.language(UserRef(user.id, user.first_name, user.language_code or "")))
    return current()
