"""A tap on an inline button (review grades): the core checks and acts; the answer to the tap goes
at once, the edit and the next card through the outbox."""

from __future__ import annotations

from telegram import Message, Update

from memora.commands import press_button
from memora.storage.durable import EDIT, Kept
from memora.types import UserRef

from ..bodies import message_body
from ..context import Context
from ..learner import buttons_of, message_rows


async def on_button(update: Update, context: Context) -> None:
    """A tap on an inline button → the core checks and acts → answer, edit, then the next card.

    The answer to the tap (answerCallbackQuery) goes at once: it is not a chat message, and
    Telegram shows a spinner on the button until it comes. The edit of the tapped message and
    the card after it are kept in the outbox, in that order, like any answer: a 429 or an outage
    delays them, never loses them."""
    query = update.callback_query
    if query is None:
        return
    state = context.bot_data
    tapper = query.from_user  # on the allow-list: the gate (gate.py) turned everyone else away
    answer = await press_button(
        state.need_engine(),
        UserRef(tapper.id, tapper.first_name, tapper.language_code or ""),
        query.data or "",
    )
    await query.answer(answer.notice or None, show_alert=answer.alert)
    shown = query.message if isinstance(query.message, Message) else None
    rows: list[Kept] = []
    if answer.edit is not None and shown is not None:
        body = message_body(answer.edit.text, buttons_of(answer.edit), shown.message_id)
        rows.append(Kept(body, EDIT))
    if answer.then is not None:
        rows += message_rows(answer.then)
    if rows:
        target = shown.chat.id if shown is not None else tapper.id
        await state.need_deliverer().keep(target, tapper.id, rows, update_id=update.update_id)
