"""Commands: a known /command runs in the core (memora.commands) and its answer is rendered; an
unknown one gets a pointer to /help."""

from __future__ import annotations

from telegram import Message, Update

from memora.commands import COMMANDS, CommandContext, run_command
from memora.i18n import _
from memora.types import ChatRef, UserRef

from ...inputs import split_command
from ..bodies import Answer
from ..context import Context
from ..learner import needs_learner_rendering, send_learner_reply
from ..messages import incoming_text, maybe_typing
from ..webapp import BUTTON_COMMANDS, button


async def on_command(update: Update, context: Context) -> None:
    """A known command → run_command in the core → the rendered answer."""
    incoming = incoming_text(update)
    if incoming is None:
        return
    message, text, chat, user = incoming
    await run_and_render(update, context, message, chat, user, text)


async def run_and_render(
    update: Update, context: Context, message: Message, chat: ChatRef, user: UserRef, line: str
) -> None:
    """Run the command `line` in the core as `user` in `chat` and deliver its answer under
    `message`: the learner's own command, or the menu whose button they tapped."""
    state = context.bot_data
    name, _target, arg = split_command(line)
    ctx = CommandContext(
        chat,
        user,
        arg,
        is_admin=user.id in state.telegram.admin_ids,
        message_id=message.message_id,
    )
    command = COMMANDS.get(name.lower())
    async with maybe_typing(message, command is not None and command.runs_turn and bool(arg)):
        reply = await run_command(state.need_engine(), name, ctx)
    if command is not None and command.name == "language" and not chat.is_group:
        lang = await state.need_engine().language(user)  # the menu follows at once
        await state.menus.follow(context.bot, chat.id, lang, user.language)
    if needs_learner_rendering(reply):  # review cards, the progress chart
        await send_learner_reply(update, message, reply, context, name=name, who=user)
        return
    page = None  # one person's page: offered in their private chat only
    if command is not None and command.name in BUTTON_COMMANDS and not chat.is_group:
        page = button(state.web_app.url)
    answer = Answer(
        message,
        reply,
        markdown=reply.markdown,
        name=name,
        quote=chat.is_group,
        user_id=user.id,
        web_app=page,
    )
    await state.answer(update, answer)


async def on_unknown_command(update: Update, context: Context) -> None:
    """A /foo the bot doesn't have: a short pointer to /help (in groups only when addressed)."""
    incoming = incoming_text(update)
    if incoming is None:
        return
    message, text, chat, _user = incoming
    name, target, _arg = split_command(text)
    if chat.is_group and target.lower() != context.bot.username.lower():
        return  # "/foo" or "/foo@otherbot" in a group may be meant for another bot
    text = _("I don't know /{name}. Try /help for the list of commands.").format(name=name)
    await context.bot_data.notice(update, message, text)
