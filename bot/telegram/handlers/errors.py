"""PTB's error handler: log the failure (the logging filter keeps secrets out), then tell the
learner something short, through the outbox like any answer."""

from __future__ import annotations

import logging

from telegram import Update
from telegram.error import BadRequest, Conflict, Forbidden

from memora.i18n import N_, _
from memora.views import Reply

from ..bodies import Answer
from ..context import Context

log = logging.getLogger(__name__)

ERROR = N_("Sorry — something went wrong on my side and I couldn't finish that. Please try again.")


def _stale_tap(error: object) -> bool:
    """A button tap Telegram no longer takes an answer for (handled again after a restart):
    nothing went wrong that the learner needs to hear about."""
    return isinstance(error, BadRequest) and "query is too old" in str(error).lower()


async def on_error(update: object, context: Context) -> None:
    """Log first (the logging filter keeps secrets out), then tell the user something short."""
    error = context.error
    if isinstance(error, Conflict) and update is None:  # from getUpdates: a second instance
        context.bot_data.conflicted(context.application)
        return
    update_id = update.update_id if isinstance(update, Update) else None
    if _stale_tap(error):
        log.info("update %s: a button tap Telegram no longer takes an answer for", update_id)
        return
    log.error("failed to handle update %s", update_id, exc_info=error)
    if not isinstance(update, Update) or isinstance(error, Forbidden):
        return
    message = update.effective_message
    if message is None or update.edited_message is not None or update.channel_post is not None:
        return
    try:  # kept like any answer; ignored if this update's answer is already kept
        await context.bot_data.answer(update, Answer(message, Reply(_(ERROR), ok=False), False))
    except Exception as exc:
        log.warning("could not tell chat %s about the error: %s", message.chat_id, exc)
