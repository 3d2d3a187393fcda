"""Thin handlers, one module per kind of update: translate it, call the core, render the result.
No memory logic here. `install` adds them all, in the order PTB tries them."""

from __future__ import annotations

from typing import Any

from telegram import Update
from telegram.ext import (
    Application,
    CallbackQueryHandler,
    ChatMemberHandler,
    CommandHandler,
    MessageHandler,
    TypeHandler,
    filters,
)

from memora.commands import COMMANDS
from memora.config import Settings
from memora.engine import Engine

from ..context import BotState
from ..webapp import WebApp
from .buttons import on_button
from .commands import on_command, on_unknown_command
from .errors import on_error
from .gate import gate
from .members import on_my_chat_member
from .text import on_edited, on_not_text, on_text
from .voice import on_voice

__all__ = ["install"]


def install(
    app: Application[Any, Any, Any, Any, Any, Any], settings: Settings, engine: Engine | None
) -> None:
    """Fill the application's BotState and add every handler, in the order they are tried (an
    application built with `.context_types(CONTEXT_TYPES)`)."""
    state: BotState = app.bot_data
    state.settings, state.engine = settings, engine
    state.web_app = WebApp(settings)
    app.add_handler(TypeHandler(Update, gate), group=-1)
    new_messages = filters.UpdateType.MESSAGE
    app.add_handler(CommandHandler(list(COMMANDS), on_command, filters=new_messages))
    app.add_handler(MessageHandler(new_messages & filters.COMMAND, on_unknown_command))
    app.add_handler(MessageHandler(new_messages & filters.TEXT, on_text))
    app.add_handler(MessageHandler(new_messages & (filters.VOICE | filters.AUDIO), on_voice))
    app.add_handler(
        MessageHandler(new_messages & ~filters.TEXT & ~filters.StatusUpdate.ALL, on_not_text)
    )
    app.add_handler(MessageHandler(filters.UpdateType.EDITED_MESSAGE, on_edited))
    app.add_handler(ChatMemberHandler(on_my_chat_member, ChatMemberHandler.MY_CHAT_MEMBER))
    app.add_handler(CallbackQueryHandler(on_button))  # review grades; the core checks the data
    app.add_error_handler(on_error)
