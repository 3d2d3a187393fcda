"""The bot's state as the handlers see it (`BotState`, PTB's `bot_data` typed through
ContextTypes), the handlers' `Context` type, and how an answer leaves: through the outbox."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any, TypeAlias

from telegram import Message, Update
from telegram.ext import CallbackContext, ContextTypes, ExtBot

from memora.config import Settings, TelegramConfig
from memora.engine import Engine
from memora.views import Reply

from .durable import Answer, Deliverer
from .messages import is_group
from .reminders import ReminderJobs


class BotState:
    """What the handlers need: the application's `bot_data`, typed through ContextTypes. PTB
    creates it empty; `install` fills it before anything runs."""

    settings: Settings

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.exit_stack: AsyncExitStack | None = None  # owns an engine opened in post_init
        self.reminder_jobs: ReminderJobs | None = None  # after post_init
        self.deliverer: Deliverer | None = None  # the outbox's sender, from post_init

    @property
    def telegram(self) -> TelegramConfig:
        return self.settings.telegram

    def allows(self, user_id: int) -> bool:
        """The allow-list (telegram.allowed_user_ids; empty: everyone), admins always."""
        return self.telegram.allows(user_id)

    def need_engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("the engine is not open (post_init has not run)")
        return self.engine

    def need_deliverer(self) -> Deliverer:
        if self.deliverer is None:
            raise RuntimeError("the outbox is not open (post_init has not run)")
        return self.deliverer

    async def answer(self, update: Update, answer: Answer, edit: Message | None = None) -> None:
        """Deliver an update's answer through the outbox (kept until Telegram has it)."""
        await self.need_deliverer().answer(answer, update_id=update.update_id, edit=edit)

    async def notice(self, update: Update, message: Message, text: str) -> None:
        """A short plain answer under `message` (quoting it in groups), through the outbox like
        any answer: an unknown command, a sticker, an edited message, a bare mention."""
        answer = Answer(message, Reply(text), markdown=False, quote=is_group(message.chat))
        await self.answer(update, answer)


Context: TypeAlias = CallbackContext[ExtBot[None], dict[Any, Any], dict[Any, Any], BotState]
CONTEXT_TYPES = ContextTypes(bot_data=BotState)
