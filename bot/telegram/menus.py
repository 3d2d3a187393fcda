"""The command menu in the learner's language.

Telegram picks a bot's menu by the app's language: one menu per two-letter code (MENUS) and a
default. A learner whose language is another than that menu's — a 繁體 learner under the `zh`
menu, anyone after /language — gets a menu of their own in their private chat
(BotCommandScopeChat), set once per chat and process; back on their app's menu, it is deleted.
"""

from __future__ import annotations

import logging
from typing import Any

from telegram import Bot, BotCommand, BotCommandScopeChat
from telegram.error import TelegramError
from telegram.ext import Application

from memora.commands import COMMANDS
from memora.i18n import translator

log = logging.getLogger(__name__)

MENUS: dict[str | None, str] = {None: "en", "zh": "zh_Hans"}
"""The command menu per Telegram language_code (None: everyone else) → the catalog it is in.
The menu's language_code is a two-letter ISO 639-1 code, so one `zh` menu serves both scripts;
it is 简体, as a bare `zh` is everywhere in Memora (memora.i18n.from_platform): Telegram's own
apps have no Chinese interface, and the community language packs send "zh-hans" more often than
"zh-hant". A 繁體 learner gets a 繁體 menu in their private chat (ChatMenus)."""


def commands(lang: str) -> list[BotCommand]:
    """Every command with its help line in `lang`."""
    gettext = translator(lang)
    return [BotCommand(c.name, c.described(gettext)[:256]) for c in COMMANDS.values()]


def app_menu(language_code: str | None) -> str:
    """The language of the menu Telegram shows a user with this app language."""
    code = (language_code or "").lower()[:2]
    return MENUS.get(code, MENUS[None])


async def set_menus(app: Application[Any, Any, Any, Any, Any, Any]) -> None:
    """Register the command menu once per language in MENUS."""
    for code, lang in MENUS.items():
        try:
            await app.bot.set_my_commands(commands(lang), language_code=code)
        except TelegramError as exc:  # the menu is a convenience; the bot works without it
            log.warning("could not set the command menu (%s): %s", code or "default", exc)


class ChatMenus:
    """Private chats whose menu this process has set to the learner's language."""

    def __init__(self) -> None:
        self._shown: dict[int, str] = {}  # chat id → the language of the menu it shows

    async def follow(self, bot: Bot, chat_id: int, lang: str, language_code: str | None) -> None:
        """Make the private chat's menu `lang`: a chat menu when the app's menu is another
        language, none when the app's menu already is `lang`."""
        app_lang = app_menu(language_code)
        if self._shown.get(chat_id, app_lang) == lang:
            return
        scope = BotCommandScopeChat(chat_id)
        try:
            if lang == app_lang:
                await bot.delete_my_commands(scope=scope)
            else:
                await bot.set_my_commands(commands(lang), scope=scope)
        except TelegramError as exc:  # the menu is a convenience; the answer goes on
            log.warning("could not set the command menu of chat %s: %s", chat_id, exc)
            return
        self._shown[chat_id] = lang
