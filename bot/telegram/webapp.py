"""The bot's side of the learner's page (bot/web): serving it from `memora run`'s own event loop,
and the buttons that open it.

python-telegram-bot's `run_polling`/`run_webhook` own the event loop (`loop.run_forever()` between
the Application's start and stop): the web server is started in post_init, on that loop, and
stopped in post_shutdown, so the page, its API and the bot share one loop and one engine.

The page is one person's: the menu button exists only in private chats, and the inline "Open my
memory" button is added to /start and /memories in private chats only. Without a public HTTPS
address (`[webapp] public_url`, or in webhook mode the webhook's own origin) no button is offered,
and the log says so once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from telegram import Bot, MenuButtonWebApp, WebAppInfo
from telegram.error import TelegramError
from telegram.ext import Application

from memora.config import Settings
from memora.engine import Engine
from memora.i18n import DEFAULT, N_, _, translator

if TYPE_CHECKING:
    from bot.web import WebServer

log = logging.getLogger(__name__)

OPEN = N_("Open my memory")
BUTTON_COMMANDS = frozenset({"start", "memories"})  # their private answers carry the button


def page_url(settings: Settings) -> str:
    """The page's public address ("" when there is none to offer)."""
    cfg = settings.webapp
    if not cfg.enabled:
        return ""
    if cfg.public_url:
        return cfg.public_url
    hook = settings.telegram.webhook_url
    if settings.telegram.mode == "webhook" and hook:  # behind the same reverse proxy
        parts = urlsplit(hook)
        return f"{parts.scheme}://{parts.netloc}/app/"
    return ""


def button(url: str) -> tuple[str, str] | None:
    """The page's (label, url) button for an answer, in the current language; None without a
    public address."""
    return (_(OPEN), url) if url else None


class WebApp:
    """The page's server and its menu button, for the life of the Application."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.url = page_url(settings)
        self.server: WebServer | None = None
        self._labelled: dict[int, str] = {}  # private chat → its menu button's language

    async def start(self, app: Application[Any, Any, Any, Any, Any, Any], engine: Engine) -> None:
        if not self.settings.webapp.enabled:
            return
        from bot.web import WebServer  # imported lazily: Starlette and uvicorn, when enabled

        self.server = WebServer(engine, self.settings)
        await self.server.start()
        cfg = self.settings.webapp
        log.info("web app: the learner's page on http://%s:%s/app/", cfg.host, self.server.port)
        if not self.url:
            log.warning(
                "web app: [webapp] public_url is empty, so the bot offers no 'Open my memory' "
                "button (Telegram opens only a public https address); `memora app-url USER_ID` "
                "prints a signed link for testing"
            )
            return
        try:  # the default menu button: Telegram shows it in private chats only
            await app.bot.set_chat_menu_button(menu_button=self._menu_button(DEFAULT))
        except TelegramError as exc:  # a convenience: /start and /memories still offer it
            log.warning("web app: could not set the menu button: %s", exc)

    def _menu_button(self, lang: str) -> MenuButtonWebApp:
        return MenuButtonWebApp(translator(lang)(OPEN), WebAppInfo(self.url))

    async def follow(self, bot: Bot, chat_id: int, lang: str) -> None:
        """The private chat's menu button in its learner's language (the default one is
        English), set once per chat and language in this process."""
        if not self.url or self._labelled.get(chat_id, DEFAULT) == lang:
            return
        button = None if lang == DEFAULT else self._menu_button(lang)  # None: the default
        try:
            await bot.set_chat_menu_button(chat_id=chat_id, menu_button=button)
        except TelegramError as exc:  # a convenience, like the command menu
            log.warning("web app: could not set the menu button of chat %s: %s", chat_id, exc)
            return
        self._labelled[chat_id] = lang

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
            self.server = None
