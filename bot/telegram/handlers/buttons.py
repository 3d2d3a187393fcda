"""A tap on an inline button (review grades, role-play scene suggestions): the core checks and
acts; the answer to the tap goes at once, the edit and what follows through the outbox."""

from __future__ import annotations

from telegram import Message, Update

from memora.commands import press_button
from memora.i18n import N_, _, speaking
from memora.storage.durable import EDIT, Kept
from memora.types import UserRef

from ..bodies import message_body
from ..context import Context
from ..learner import buttons_of, message_rows
from ..messages import chat_ref
from .commands import run_and_render

TOO_OLD = N_("That message is too old for its buttons: send the command again.")


async def on_button(update: Update, context: Context) -> None:
    """A tap on an inline button → the core checks and acts → answer, edit, then what follows.

    The answer to the tap (answerCallbackQuery) goes at once: it is not a chat message, and
    Telegram shows a spinner on the button until it comes. The edit of the tapped message and
    the card after it are kept in the outbox, in that order, like any answer: a 429 or an outage
    delays them, never loses them. A button that stands for a command (a suggested scene) then
    runs it as if the tapper had typed it, its answer under the tapped message."""
    query = update.callback_query
    if query is None or query.message is None:
        return
    state = context.bot_data
    tapper = query.from_user  # on the allow-list: the gate (gate.py) turned everyone else away
    user = UserRef(tapper.id, tapper.first_name, tapper.language_code or "")
    chat = chat_ref(query.message.chat)
    engine = state.need_engine()
    answer = await press_button(engine, chat, user, query.data or "")
    shown = query.message if isinstance(query.message, Message) else None
    if answer.command and shown is None:  # Telegram no longer shows the menu's text to us
        with speaking(await engine.language(user)):
            await query.answer(_(TOO_OLD), show_alert=True)
        return
    await query.answer(answer.notice or None, show_alert=answer.alert)
    rows: list[Kept] = []
    if answer.edit is not None and shown is not None:
        body = message_body(answer.edit.text, buttons_of(answer.edit), shown.message_id)
        rows.append(Kept(body, EDIT))
    if answer.then is not None:
        rows += message_rows(answer.then)
    target = shown.chat.id if shown is not None else tapper.id
    if answer.command and shown is not None:  # the command's answer is the tap's one answer
        await state.need_deliverer().keep(target, tapper.id, rows)
        await run_and_render(update, context, shown, chat, user, answer.command)
    elif rows:
        await state.need_deliverer().keep(target, tapper.id, rows, update_id=update.update_id)
