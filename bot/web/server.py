"""The web app's HTTP side (Starlette under uvicorn, on the bot's own event loop): the routes, the
check of every API call's signed initData, a per-learner rate limit, strict security headers,
and `WebServer`, which serves it until stopped.

Nothing here logs a request: uvicorn's access log is off, and a refusal is logged without the
initData or anything of the learner's.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memora.config import ConfigError, Settings
from memora.engine import Engine
from memora.i18n import _, from_platform, speaking
from memora.types import UserRef

from .api import LearnerApi, body_text, error
from .auth import Refused, from_header
from .labels import LABELS

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
TELEGRAM_SCRIPT = "https://telegram.org/js/telegram-web-app.js"
# The page's own files and Telegram's script, nothing else; Telegram Web shows the page in a frame.
CSP = (
    "default-src 'none'; script-src 'self' https://telegram.org; style-src 'self'; "
    "img-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'self' https://web.telegram.org"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
]


class SecurityHeaders:
    """Every response gets the headers above; an API answer is never cached."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = str(scope.get("path", "")).startswith("/app/api/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", [])) + HEADERS
                if api:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


class RateLimit:
    """At most `per_minute` API calls a minute per learner (in this process)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._calls: dict[int, deque[float]] = {}

    def allow(self, user_id: int, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        calls = self._calls.setdefault(user_id, deque())
        while calls and calls[0] <= now - 60:
            calls.popleft()
        if len(calls) >= self.per_minute:
            return False
        calls.append(now)
        if len(self._calls) > 10_000:  # forget learners idle for a minute
            for uid in [u for u, c in self._calls.items() if not c or c[-1] <= now - 60]:
                del self._calls[uid]
        return True


Handler = Callable[[Request, UserRef], Awaitable[Response]]


def build_web_app(engine: Engine, settings: Settings) -> Starlette:
    """The page, its static files and its JSON API over `engine`."""
    api = LearnerApi(engine, settings.telegram.admin_ids)
    cfg, token = settings.webapp, settings.telegram.token
    limit = RateLimit(cfg.requests_per_minute)

    def signed(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """The handler, given the learner from the Authorization header, in their language."""

        async def endpoint(request: Request) -> Response:
            header = request.headers.get("authorization", "")
            try:
                opened = from_header(header, token, max_age=cfg.max_age)
            except Refused as exc:
                log.info("web app: refused a request (%s)", exc)
                wanted = request.headers.get("accept-language", "").split(",")[0].split(";")[0]
                with speaking(from_platform(wanted.strip()) or "en"):
                    return error(401, _reopen())
            user = opened.user
            if not settings.telegram.allows(user.id):
                return error(403, "not allowed")
            if not limit.allow(user.id):
                return error(429, "too many requests")
            with speaking(await engine.language(user)):
                return await handler(request, user)

        return endpoint

    async def me(request: Request, user: UserRef) -> Response:
        return JSONResponse(await api.me(user, await engine.language(user)))

    async def memory(request: Request, user: UserRef) -> Response:
        memory_id = request.path_params["memory_id"]
        if request.method == "DELETE":
            return await api.delete_memory(user, memory_id)
        return await api.edit_memory(user, memory_id, await body_text(request, "text"))

    async def undo(request: Request, user: UserRef) -> Response:
        return await api.undo_memory(user, request.path_params["memory_id"])

    async def pin(request: Request, user: UserRef) -> Response:
        return await api.pin_memory(user, request.path_params["memory_id"], request.method == "PUT")

    async def profile(request: Request, user: UserRef) -> Response:
        field = request.path_params["field"]
        if request.method == "DELETE":
            return await api.set_profile(user, field, None)
        value = await body_text(request, "value")
        if value is None or not value.strip():
            return error(400, "a JSON body with 'value' is needed")
        return await api.set_profile(user, field, value.strip())

    def entry(kind: str) -> Handler:
        async def delete(request: Request, user: UserRef) -> Response:
            return await api.delete_entry(user, kind, request.path_params["entry_id"])

        return delete

    async def chart(request: Request, user: UserRef) -> Response:
        return await api.progress_chart(user)

    async def export(request: Request, user: UserRef) -> Response:
        return await api.export(user)

    async def forget_me(request: Request, user: UserRef) -> Response:
        return await api.forget_me(user, await body_text(request, "confirm") == "forget me")

    async def usage(request: Request, user: UserRef) -> Response:
        if user.id not in settings.telegram.admin_ids:
            return error(403, "admins only")
        days = request.query_params.get("days", "14")
        return await api.usage(user, int(days) if days.isdigit() and 1 <= int(days) <= 92 else 14)

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def to_page(request: Request) -> Response:
        return RedirectResponse("/app/", status_code=308)

    return Starlette(
        routes=[
            Route("/app", to_page),
            Route("/app/", page),
            Route("/app/api/me", signed(me)),
            Route("/app/api/memories/{memory_id}", signed(memory), methods=["DELETE", "PATCH"]),
            Route("/app/api/memories/{memory_id}/undo", signed(undo), methods=["POST"]),
            Route("/app/api/memories/{memory_id}/pin", signed(pin), methods=["PUT", "DELETE"]),
            Route("/app/api/profile/{field}", signed(profile), methods=["PUT", "DELETE"]),
            Route("/app/api/mistakes/{entry_id:int}", signed(entry("mistake")), methods=["DELETE"]),
            Route("/app/api/words/{entry_id:int}", signed(entry("word")), methods=["DELETE"]),
            Route("/app/api/progress.png", signed(chart)),
            Route("/app/api/export", signed(export)),
            Route("/app/api/forget-me", signed(forget_me), methods=["POST"]),
            Route("/app/api/usage", signed(usage)),
            Mount("/app/static", StaticFiles(directory=STATIC)),
        ],
        middleware=[Middleware(SecurityHeaders)],
    )


def _reopen() -> str:
    return _(LABELS["reopen"])


class _Server(uvicorn.Server):
    """uvicorn without its own SIGINT/SIGTERM handlers: the bot's loop owns the signals."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class WebServer:
    """uvicorn serving the web app on the running event loop, until `stop`."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.cfg = settings.webapp
        config = uvicorn.Config(
            build_web_app(engine, settings),
            access_log=False,  # a path is nobody's business; initData is never in one anyway
            log_config=None,  # Memora's logging, not uvicorn's own
            lifespan="off",
        )
        self.server = _Server(config)
        self._socket: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Listening when this returns; a ConfigError if the address cannot be had."""
        host, port = self.cfg.host, self.cfg.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            self._socket = socket.create_server((host, port), family=family)
        except OSError as exc:
            raise ConfigError(
                f"[webapp] cannot listen on {host}:{port} ({exc.strerror or exc}): "
                "set webapp.host and webapp.port to a free address"
            ) from None
        self._task = asyncio.create_task(self.server.serve(sockets=[self._socket]))
        while not self.server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the web app's server stopped at start")
            await asyncio.sleep(0.02)

    @property
    def port(self) -> int:
        """The port it listens on (the configured one, or the one the system gave for 0)."""
        return int(self.server.servers[0].sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._task is not None:
            self.server.should_exit = True
            await self._task
            self._task = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
