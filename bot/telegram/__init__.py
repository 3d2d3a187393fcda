"""The Telegram bot: python-telegram-bot v22 on top of the Memora engine.

`build_application` is the one place the Application is composed; `run_bot` runs it with long
polling (or a webhook when configured) until SIGINT/SIGTERM and returns the exit status.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeAlias
from urllib.parse import urlsplit

from telegram import Update
from telegram.error import InvalidToken, RetryAfter, TelegramError
from telegram.ext import (
    Application,
    BaseRateLimiter,
    BaseUpdateProcessor,
    Defaults,
)
from telegram.request import BaseRequest

from memora.app import open_engine
from memora.config import ConfigError, Settings, require_llm, require_telegram
from memora.engine import Engine
from memora.storage.durable import Inbox, Outbox, Replicas
from memora.storage.keys import WEBHOOK_SECRET
from memora.types import ChatRef, UserRef
from memora.views import Reply

from .context import CONTEXT_TYPES, BotState
from .handlers import install
from .inbox import DurableQueue, handled
from .learner import message_rows
from .limits import ReplyFirstRateLimiter
from .menus import set_menus
from .outbox import Deliverer
from .processor import PerChatUpdateProcessor
from .reminders import ReminderJobs, WeeklyJobs

__all__ = [
    "ALLOWED_UPDATES",
    "CONTEXT_TYPES",
    "BotState",
    "build_application",
    "install",
    "run_bot",
]

log = logging.getLogger(__name__)

App: TypeAlias = Application[Any, Any, Any, Any, Any, Any]

# What the handlers use; channel posts and the rest are not even fetched.
ALLOWED_UPDATES = [
    Update.MESSAGE,
    Update.EDITED_MESSAGE,
    Update.MY_CHAT_MEMBER,
    Update.CALLBACK_QUERY,  # review grades (inline keyboard)
]
MAX_CONCURRENT_UPDATES = 256


def check_config(settings: Settings, *, need_llm: bool = True) -> None:
    """Every configuration problem as one ConfigError line, before anything starts."""
    require_telegram(settings)
    if need_llm:
        require_llm(settings)
    cfg = settings.telegram
    if cfg.mode == "webhook":
        if not cfg.webhook_url:
            raise ConfigError("telegram.mode is 'webhook' but 'telegram.webhook_url' is empty")
        if urlsplit(cfg.webhook_url).scheme not in ("http", "https"):
            raise ConfigError(
                f"invalid config value for 'telegram.webhook_url': not an http(s) URL "
                f"(got {cfg.webhook_url!r})"
            )
        if importlib.util.find_spec("tornado") is None:
            raise ConfigError(
                "telegram.mode is 'webhook' but the webhook server is not installed: "
                "pip install 'memora[webhooks]'"
            )
        from .webhook import check_secret  # imported lazily: tornado, known to be there by now

        check_secret(cfg.webhook_secret)


async def _post_init(app: App) -> None:
    """Open the engine (unless one was given), then the inbox (queueing what the last run left
    unhandled, before polling starts) and the outbox, and publish the command list."""
    state: BotState = app.bot_data
    if state.engine is None:
        stack = AsyncExitStack()
        try:
            state.engine = await stack.enter_async_context(open_engine(state.settings))
        except BaseException:
            await stack.aclose()
            raise
        state.exit_stack = stack
    db = state.engine.db
    # This process among the replicas on the store (one, on SQLite): its id names what it holds.
    replicas = Replicas(db.connection, interval=state.settings.storage.replica_heartbeat)
    if isinstance(app.update_queue, DurableQueue):
        inbox = Inbox(db.connection)
        await app.update_queue.open(
            inbox, app.bot, replicas, sole=db.connection.dialect == "sqlite"
        )
        if isinstance(app.update_processor, PerChatUpdateProcessor):
            app.update_processor.on_done = lambda update: handled(inbox, update)
    state.deliverer = Deliverer(Outbox(db.connection), app.bot, holder=replicas.id)
    state.need_engine().state.notify = _notices_to(state.deliverer)
    state.reminder_jobs = ReminderJobs(app, state.need_engine().reminders, state.deliverer)
    await state.reminder_jobs.restore()
    state.weekly_jobs = WeeklyJobs(app, state.need_engine().weekly, state.deliverer)
    await state.weekly_jobs.restore()
    limiter = app.bot.rate_limiter
    if isinstance(limiter, ReplyFirstRateLimiter):  # Telegram's budget is the bot's, not ours
        limiter.share = lambda: replicas.live
    await set_menus(app)  # before the outbox sends: a kept answer waits a moment, not the menus
    await state.web_app.start(app, state.need_engine())  # on this loop, until post_shutdown
    state.deliverer.start()
    state.started = time.monotonic()  # polling (or the webhook) starts now
    if state.telegram.mode == "webhook":
        await _say_whose_webhook(app, state.telegram.webhook_url)
    log.info("bot @%s ready (replica %s)", app.bot.username, replicas.id)


async def _say_whose_webhook(app: App, ours: str) -> None:
    """A webhook start replaces whatever URL the token had: if it was another one, say what
    that means (Telegram sends one token's updates to one URL)."""
    try:
        info = await app.bot.get_webhook_info()
    except TelegramError as exc:
        log.warning("could not read the current webhook: %s", exc)
        return
    if info.url and info.url != ours:
        log.warning(
            "this bot token's webhook pointed at %s and now points here (%s): if another "
            "instance served that URL it gets no more updates; stop it, or put the replicas "
            "behind one URL",
            info.url,
            ours,
        )


def _notices_to(deliverer: Deliverer) -> Callable[[ChatRef, UserRef, Reply], Awaitable[None]]:
    """The engine's after-reply notices (a question with its buttons too), kept in the outbox
    and sent like any message."""

    async def notify(chat: ChatRef, user: UserRef, notice: Reply) -> None:
        await deliverer.keep(chat.id, user.id, message_rows(notice))

    return notify


async def _post_shutdown(app: App) -> None:
    """Stop the outbox sender (what it holds waits for the next start), wait for after-reply
    work, then close whatever post_init opened."""
    state: BotState = app.bot_data
    await state.web_app.stop()
    if state.reminder_jobs is not None:
        state.reminder_jobs.close()
        state.reminder_jobs = None
    if state.weekly_jobs is not None:
        state.weekly_jobs.close()
        state.weekly_jobs = None
    if state.deliverer is not None:
        await state.deliverer.stop()
    if isinstance(app.update_queue, DurableQueue):
        await app.update_queue.close()
    stack, state.exit_stack = state.exit_stack, None
    if stack is not None:
        state.engine = None
        await stack.aclose()  # drains the engine, then closes store, database and clients
    elif state.engine is not None:
        await state.engine.drain()


def build_application(
    settings: Settings,
    engine: Engine | None = None,
    *,
    request: BaseRequest | None = None,
    rate_limiter: BaseRateLimiter[Any] | None = None,
    update_processor: BaseUpdateProcessor | None = None,
) -> App:
    """The one composition function. With `engine` the caller owns it; without, it is opened in
    post_init from `settings` and closed in post_shutdown. `request` replaces the HTTP layer
    (tests); `update_processor` the per-chat one (the benchmark compares others)."""
    check_config(settings, need_llm=engine is None)
    # python-telegram-bot 22 warns on every duration it reads as an int (RetryAfter, voice
    # durations) until this opt-in to the timedelta values that become its default; it reads
    # the variable each time, so setting it before the bot runs is enough.
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    cfg = settings.telegram
    builder = (
        Application.builder()
        .token(cfg.token)
        .base_url(cfg.base_url)
        .base_file_url(cfg.base_file_url)
        .rate_limiter(rate_limiter or ReplyFirstRateLimiter(max_retries=3))
        # A learner may delete their message while the model answers: reply anyway.
        .defaults(Defaults(allow_sending_without_reply=True))
        .concurrent_updates(update_processor or PerChatUpdateProcessor(MAX_CONCURRENT_UPDATES))
        .update_queue(DurableQueue())
        .context_types(CONTEXT_TYPES)
        .post_init(_post_init)
        .post_shutdown(_post_shutdown)
    )
    if request is not None:
        builder = builder.request(request).get_updates_request(request)
    app: App = builder.build()
    install(app, settings, engine)
    if cfg.mode == "webhook":
        from .webhook import SecretUpdater  # imported lazily: tornado is optional

        state: BotState = app.bot_data

        async def secret() -> str:  # the configured one, else the store's (post_init opened it)
            return cfg.webhook_secret or await state.need_engine().db.keys.server_key(
                WEBHOOK_SECRET
            )

        app.updater = SecretUpdater(app.bot, app.update_queue, secret)
    return app


def _fast_event_loop() -> None:
    """uvloop's event loop where it is installed (Linux, macOS): the same asyncio API, its
    sockets and callbacks cost the turn less CPU (benchmarks/turn_cpu.py)."""
    try:
        import uvloop  # imported lazily: optional (absent on Windows; the default loop works too)
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.set_event_loop(asyncio.new_event_loop())


class _NoTracebackFor(logging.Filter):
    """PTB logs some expected failures with a full traceback: a rejected token (run_bot reports
    it as one line), and flood control beyond the rate limiter's retries (the outbox keeps the
    message and says so in one line). One line each, without the traceback."""

    def __init__(self, *errors: type[BaseException]) -> None:
        super().__init__()
        self.errors = errors

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], self.errors):
            record.exc_info, record.exc_text = None, None
        return True


def run_bot(settings: Settings) -> int:
    """Run until SIGINT/SIGTERM; the exit status for the CLI. A token the Bot API rejects is a
    ConfigError; any other Bot API failure at start is logged in one line and returns 1."""
    app = build_application(settings)
    logging.getLogger("telegram.ext").addFilter(_NoTracebackFor(InvalidToken))
    logging.getLogger("telegram.ext.AIORateLimiter").addFilter(_NoTracebackFor(RetryAfter))
    try:
        _run(app, settings)
        if app.bot_data.conflict:  # said in one line by the error handler
            return 3
    except InvalidToken:
        raise ConfigError(
            "the Bot API rejected 'telegram.token' (Unauthorized): check the token from @BotFather"
        ) from None
    except TelegramError as exc:
        log.error("the Telegram Bot API failed: %s", exc)
        return 1
    log.info("bot stopped")
    return 0


def _run(app: App, settings: Settings) -> None:
    cfg = settings.telegram
    _fast_event_loop()
    if cfg.mode == "webhook":
        log.info("starting webhook on %s:%s", cfg.webhook_listen, cfg.webhook_port)
        app.run_webhook(
            listen=cfg.webhook_listen,
            port=cfg.webhook_port,
            url_path=urlsplit(cfg.webhook_url).path.lstrip("/"),
            webhook_url=cfg.webhook_url,  # and the secret: SecretUpdater's
            allowed_updates=ALLOWED_UPDATES,
            drop_pending_updates=False,
        )
    else:
        log.info("starting long polling (timeout %ss)", cfg.poll_timeout)
        app.run_polling(
            timeout=cfg.poll_timeout,
            allowed_updates=ALLOWED_UPDATES,
            drop_pending_updates=False,
        )
