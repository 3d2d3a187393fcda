"""The bot's state as the handlers see it (`BotState`, PTB's `bot_data` typed through
ContextTypes), the handlers' `Context` type, and how an answer leaves: through the outbox."""

from __future__ import annotations

import logging
import math
import time
from contextlib import AsyncExitStack
from typing import Any, TypeAlias

from telegram import Message, Update
from telegram.ext import Application, CallbackContext, ContextTypes, ExtBot

from memora.config import Settings, TelegramConfig
from memora.engine import Engine
from memora.views import Reply

from .bodies import Answer
from .menus import ChatMenus
from .messages import is_group
from .outbox import Deliverer
from .reminders import ReminderJobs, WeeklyJobs
from .webapp import WebApp

log = logging.getLogger(__name__)

ANOTHER_INSTANCE = (
    "another bot instance is polling with this token (Telegram answered 409 Conflict): this "
    "one stops. Run one `memora run` per bot token (several replicas: webhook mode behind one URL)."
)
# Telegram ends the older of two waiting getUpdates with 409, so both instances see conflicts.
# The one that started polling within this many seconds is the newcomer and stops; one that
# has polled for longer goes on (and says so, at most once a minute).
NEWCOMER_SECONDS = 10.0


class BotState:
    """What the handlers need: the application's `bot_data`, typed through ContextTypes. PTB
    creates it empty; `install` fills it before anything runs."""

    settings: Settings
    web_app: WebApp  # the learner's page (bot/web), from `install`

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.exit_stack: AsyncExitStack | None = None  # owns an engine opened in post_init
        self.reminder_jobs: ReminderJobs | None = None  # after post_init
        self.weekly_jobs: WeeklyJobs | None = None  # after post_init
        self.deliverer: Deliverer | None = None  # the outbox's sender, from post_init
        self.menus = ChatMenus()  # private chats' command menus in their learner's language
        self.conflict = False  # stopped: another instance was polling with this token first
        self.started = time.monotonic()  # reset when polling starts (post_init)
        self._conflict_said = -math.inf

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

    def conflicted(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Telegram answered a getUpdates with 409 Conflict: a newcomer stops, in one line."""
        now = time.monotonic()
        if now - self.started < NEWCOMER_SECONDS:
            if not self.conflict:
                self.conflict = True
                log.error(ANOTHER_INSTANCE)
                app.stop_running()
        elif now - self._conflict_said > 60:
            self._conflict_said = now
            log.warning(
                "another bot instance polls with this token (409 Conflict); this one started "
                "first and goes on: stop the other"
            )

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
