"""Webhook mode's door: Telegram's POSTs get in only with the deployment's secret token, and this
module, not the library, checks it (in constant time).

The secret is `[telegram] webhook_secret` when one is set (`check_secret` refuses a short one or
a placeholder at start), else the one made once and kept in the store
(`Database.keys.server_key(WEBHOOK_SECRET)`): every replica on the store registers and checks the
same.

The python-telegram-bot 22 internals this relies on (telegram.ext._updater and
telegram.ext._utils.webhookhandler):
- `Updater.start_webhook` calls `Updater._start_webhook(listen, port, url_path,
  bootstrap_retries, allowed_updates, ..., ready, ..., secret_token, unix)`, which builds a
  tornado application (`WebhookAppClass`) around `TelegramHandler`, registers the URL with
  `Updater._bootstrap` (setWebhook, retried) and serves it with `WebhookServer`, kept in
  `Updater._httpd` for `Updater.stop`. `SecretUpdater._start_webhook` does the same around
  `SecretCheckedHandler`.
- `TelegramHandler.post` first calls `self._validate_post()`, which raises tornado's
  HTTPError(403) to refuse, and only then puts the update on the (durable) queue. PTB's own
  compares the header with `!=`; `SecretCheckedHandler._validate_post` replaces it.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from http import HTTPStatus
from pathlib import Path
from socket import socket
from types import TracebackType

import tornado.web
from telegram import Bot
from telegram.ext import Updater
from telegram.ext._utils.webhookhandler import TelegramHandler, WebhookAppClass, WebhookServer

from memora.app import redact
from memora.config import ConfigError

log = logging.getLogger(__name__)

HEADER = "X-Telegram-Bot-Api-Secret-Token"
MIN_SECRET = 32  # characters; a generated one has 43
_ALLOWED = re.compile(r"[A-Za-z0-9_-]{1,256}")  # what Telegram accepts as secret_token
# What deploy/.env.example and docs once suggested, and their like: known to anyone who reads them.
_PLACEHOLDER = re.compile(
    r"change.?me|example|placeholder|replace.?me|your.?secret|random.?string|secret.?token",
    re.IGNORECASE,
)


def check_secret(secret: str) -> None:
    """A configured webhook secret Telegram takes, long and not a known placeholder; else a
    ConfigError in one line (that never repeats the value). Empty is fine: one is generated."""
    if not secret:
        return
    key = "invalid config value for 'telegram.webhook_secret'"
    hint = "or leave it empty and Memora makes one and keeps it in the database"
    if not _ALLOWED.fullmatch(secret):
        raise ConfigError(f"{key}: 1-256 characters of A-Z, a-z, 0-9, _ and - only")
    if _PLACEHOLDER.search(secret):
        raise ConfigError(
            f"{key}: it is a placeholder; set a long random one (openssl rand -hex 32), {hint}"
        )
    if len(secret) < MIN_SECRET:
        raise ConfigError(
            f"{key}: too short ({len(secret)} characters, at least {MIN_SECRET}); "
            f"set a long random one (openssl rand -hex 32), {hint}"
        )


def same_secret(given: str | None, secret: str) -> bool:
    """Whether the header holds the secret, compared in constant time."""
    return bool(secret) and hmac.compare_digest((given or "").encode(), secret.encode())


class SecretCheckedHandler(TelegramHandler):
    """PTB's webhook request handler with our own check: a request without the secret header,
    or with a wrong one, is answered 403 before the update in it is parsed, so nothing is queued."""

    def _validate_post(self) -> None:
        if self.request.headers.get("Content-Type") != "application/json":  # as PTB's own
            raise tornado.web.HTTPError(HTTPStatus.FORBIDDEN)
        if not same_secret(self.request.headers.get(HEADER), self.secret_token):
            log.info("a webhook request from %s without the secret: 403", self.request.remote_ip)
            raise tornado.web.HTTPError(HTTPStatus.FORBIDDEN)

    def log_exception(
        self,
        typ: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """A refusal is the info line above, without PTB's DEBUG traceback of it."""
        if not isinstance(value, tornado.web.HTTPError):
            super().log_exception(typ, value, tb)


class _WebhookApp(WebhookAppClass):
    """PTB's webhook application (no access log line per update) around our handler."""

    def __init__(self, path: str, shared: dict[str, object]) -> None:
        self.shared_objects = shared
        handlers = [(rf"{re.escape(path)}/?", SecretCheckedHandler, shared)]
        tornado.web.Application.__init__(self, handlers)  # as WebhookAppClass does, our handler


class SecretUpdater(Updater):
    """PTB's Updater whose webhook is served by SecretCheckedHandler, with the secret from
    `secret()` (asked when the webhook starts: after post_init has opened the store)."""

    __slots__ = ("_secret",)

    def __init__(
        self, bot: Bot, update_queue: asyncio.Queue[object], secret: Callable[[], Awaitable[str]]
    ) -> None:
        super().__init__(bot, update_queue)
        self._secret = secret

    async def _start_webhook(
        self,
        listen: str,
        port: int,
        url_path: str,
        bootstrap_retries: int,
        allowed_updates: Sequence[str] | None,
        cert: str | Path | None = None,
        key: str | Path | None = None,
        drop_pending_updates: bool | None = None,
        webhook_url: str | None = None,
        ready: asyncio.Event | None = None,
        ip_address: str | None = None,
        max_connections: int = 40,
        secret_token: str | None = None,
        unix: str | Path | socket | None = None,
    ) -> None:
        if cert is not None or key is not None or unix is not None:
            raise ValueError("the webhook serves plain HTTP on a TCP port (TLS ends at a proxy)")
        secret = await self._secret()  # the configured one, else the store's (not secret_token)
        redact(secret)  # setWebhook's parameters are in PTB's DEBUG log
        shared = {"bot": self.bot, "update_queue": self.update_queue, "secret_token": secret}
        path = "/" + url_path.lstrip("/")
        self._httpd = WebhookServer(listen, port, _WebhookApp(path, shared), None)
        await self._bootstrap(
            max_retries=bootstrap_retries,
            webhook_url=webhook_url,
            allowed_updates=allowed_updates,
            drop_pending_updates=drop_pending_updates,
            ip_address=ip_address,
            max_connections=max_connections,
            secret_token=secret,
        )
        await self._httpd.serve_forever(ready=ready)
