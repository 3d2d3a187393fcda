"""A fake Telegram Bot API server (stdlib only) that real python-telegram-bot talks to over HTTP.

It binds 127.0.0.1 on a free port and serves from a daemon thread, so a bot in the test process
*or in a subprocess* (`memora run`) can use it::

    with FakeTelegram() as tg:
        # Application.builder().token(tg.token).base_url(tg.base_url)
        #     .base_file_url(tg.base_file_url)...
        update = tg.user_sends("/start")
        (reply,) = tg.wait_messages(count=1, after=update)

It speaks only what the product uses, the way Telegram answers it (form and multipart bodies,
as PTB sends them): ``getMe``, ``setWebhook`` / ``deleteWebhook``, ``getUpdates`` with real
long polling (``offset`` confirms older updates, ``timeout`` blocks until one arrives),
``sendMessage``, ``editMessageText``, ``deleteMessage``, ``sendChatAction``, ``sendDocument``
and ``sendVoice`` and ``sendPhoto`` (uploads), ``getFile`` with the file's download under
``base_file_url``, ``answerCallbackQuery`` (inline keyboards: ``user_taps`` presses a button
of a bot message; ``reply_markup`` is kept on the message), ``setMyCommands`` and
``sendMessageDraft`` (Bot API 9: private chats only, a non-zero ``draft_id``; ``draft`` shows
what the learner sees: the draft until it is 30 s old or the bot's next message replaces it).
With ``limits=True`` it answers 429 (``retry_after``) as Telegram does past its flood limits:
about 30 messages a second for the bot, one a second in a private chat and 20 a minute in a
group, each with a short burst (sends and edits count; chat actions do not). Drafts are not
messages; Telegram documents no limit for them, and the fake assumes 4 a second in a chat.
A getUpdates that arrives while another waits ends the older one with 409 Conflict, as
Telegram does with two bot instances on one token. HTML ``parse_mode`` becomes plain text +
entities, so ``sent_messages()`` shows what the learner sees. Failures are injected with
``fail_next`` (500, any status, or 429 flood control); ``hold`` keeps a method's calls waiting
(recorded, not answered) until ``release``, to make senders overlap; every request but
``getUpdates`` is in ``calls``, every non-OK answer in ``errors``.

To grow it: a Bot API method is one ``_m_<methodName>(self, params, files)`` (found by name);
a kind of user input is one ``user_*`` helper that builds the update and calls ``push_update``.
"""

# ruff: noqa: ASYNC109  (await_* take a polling deadline, not a cancel scope)
from __future__ import annotations

import asyncio
import copy
import html.parser
import json
import math
import re
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, TypeVar

from tests.support.local_server import LocalHTTPServer, LocalServer

__all__ = ["ApiError", "FakeTelegram", "MarkupError", "WaitTimeout", "parse_html"]

JSON = dict[str, Any]
Files = dict[str, JSON]
T = TypeVar("T")

# PTB sends str parameters as they are and everything else JSON-encoded: these stay strings.
_STRING_PARAMS = frozenset(
    "text caption parse_mode action url secret_token document callback_query_id".split()
)
_MAX_TEXT = 4096
DRAFT_LIFE = 30.0  # seconds a message draft shows after its last update
# Methods that count against Telegram's message limits (with limits=True)
_COUNTED = frozenset(
    {"sendMessage", "editMessageText", "sendDocument", "sendPhoto", "sendVoice", "sendAudio"}
)


@dataclass
class _Bucket:
    """A token bucket: `rate` calls a second, `burst` at once."""

    rate: float
    burst: float
    tokens: float
    at: float

    def wait(self, now: float) -> float:
        """Seconds until one call is allowed (0: now)."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self) -> None:
        self.tokens -= 1


def _u16(s: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram entity offsets."""
    return len(s.encode("utf-16-le")) // 2


class ApiError(Exception):
    """An error answer of the Bot API: HTTP status + description (+ parameters)."""

    def __init__(self, status: int, description: str, parameters: JSON | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters

    def payload(self) -> JSON:
        body: JSON = {"ok": False, "error_code": self.status, "description": self.description}
        if self.parameters:
            body["parameters"] = self.parameters
        return body


class MarkupError(ValueError):
    """Text cannot be parsed in its parse_mode (Telegram: "can't parse entities")."""


class WaitTimeout(AssertionError):
    """A wait_* / await_* helper ran past its deadline."""


# -- HTML parse_mode -------------------------------------------------------------------------------
_HTML_TYPES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "s": "strikethrough",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
}


class _HtmlEntities(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.pos = 0
        self.stack: list[tuple[str, dict[str, str | None], int]] = []
        self.entities: list[JSON] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)
        self.pos += _u16(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _HTML_TYPES:
            raise MarkupError(f'Unsupported start tag "{tag}"')
        self.stack.append((tag, dict(attrs), self.pos))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raise MarkupError(f'Unsupported start tag "{tag}"')

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1][0] != tag:
            raise MarkupError(f'Unexpected end tag "{tag}"')
        _, attrs, start = self.stack.pop()
        if self.pos == start or (tag == "code" and self.stack and self.stack[-1][0] == "pre"):
            return
        entity: JSON = {"type": _HTML_TYPES[tag], "offset": start, "length": self.pos - start}
        if tag == "a":
            entity["url"] = attrs.get("href") or ""
        self.entities.append(entity)


def parse_html(text: str) -> tuple[str, list[JSON]]:
    """Telegram's HTML parse_mode: plain text and entities; MarkupError on broken markup."""
    parser = _HtmlEntities()
    parser.feed(text)
    parser.close()
    if parser.stack:
        raise MarkupError(f'Can\'t find end tag corresponding to start tag "{parser.stack[-1][0]}"')
    return "".join(parser.parts), sorted(parser.entities, key=lambda e: (e["offset"], -e["length"]))


# -- request bodies --------------------------------------------------------------------------------
def _decode_value(key: str, value: str) -> Any:
    if key in _STRING_PARAMS:
        return value
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    return value if isinstance(decoded, str) else decoded


def _most_in_a_second(times: list[float]) -> int:
    """The most of these (sorted) moments that fall within any one second."""
    most, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= 1.0:
            start += 1
        most = max(most, end - start + 1)
    return most


def _parse_multipart(body: bytes, content_type: str) -> tuple[JSON, Files]:
    """PTB's multipart/form-data (uploads): form fields, and files as {filename, content}."""
    boundary = re.search(r'boundary="?([^";]+)"?', content_type)
    if boundary is None:
        raise ApiError(400, "Bad Request: multipart boundary is missing")
    params: JSON = {}
    files: Files = {}
    for part in body.split(b"--" + boundary.group(1).encode())[1:]:
        head, sep, content = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            continue
        content = content.removesuffix(b"\r\n")
        disposition = head.decode("utf-8", "replace")
        name = re.search(r'name="([^"]*)"', disposition)
        filename = re.search(r'filename="([^"]*)"', disposition)
        key = name.group(1) if name else ""
        if filename is None:
            params[key] = _decode_value(key, content.decode())
        else:
            files[key] = {"filename": filename.group(1), "content": content}
    return params, files


# -- HTTP plumbing ---------------------------------------------------------------------------------
class _Server(LocalHTTPServer):
    def __init__(self, fake: FakeTelegram) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a cancelled long poll, a killed bot) is not an error."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        """File downloads: /file/bot<token>/<file_path>, as getFile told the bot."""
        fake = self.server.fake
        match = re.fullmatch(r"/file/bot([^/]*)/(.+)", urllib.parse.unquote(self.path))
        content = fake._file_content(match.group(2)) if match and match[1] == fake.token else None
        data = content if content is not None else b'{"ok":false,"error_code":404}'
        try:
            self.send_response(200 if content is not None else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def do_POST(self) -> None:
        started = time.thread_time()
        try:
            self._post()
        finally:
            self.server.fake._add_cpu(time.thread_time() - started)

    def _post(self) -> None:
        fake = self.server.fake
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        match = re.fullmatch(r"/bot([^/]*)/([A-Za-z0-9_]+)", urllib.parse.unquote(self.path))
        if match is None:
            status, payload = 404, ApiError(404, "Not Found").payload()
        elif match.group(1) != fake.token:
            status, payload = 401, ApiError(401, "Unauthorized").payload()
        else:
            try:
                params, files = self._params(body)
                status, payload = fake._handle(match.group(2), params, files)
            except ApiError as exc:
                status, payload = exc.status, exc.payload()
        data = json.dumps(payload, ensure_ascii=False).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def _params(self, body: bytes) -> tuple[JSON, Files]:
        content_type = self.headers.get("Content-Type", "")
        if content_type.startswith("multipart/form-data"):
            return _parse_multipart(body, content_type)
        pairs = urllib.parse.parse_qsl(body.decode(), keep_blank_values=True)
        return {k: _decode_value(k, v) for k, v in pairs}, {}


# -- the fake --------------------------------------------------------------------------------------
class FakeTelegram(LocalServer):
    """In-process fake of api.telegram.org; see the module docstring."""

    DEFAULT_USER_ID = 1001
    DEFAULT_GROUP_ID = -1001234567890

    def __init__(
        self,
        token: str = "123:TEST",
        bot_username: str = "memora_test_bot",
        *,
        limits: bool = False,
    ) -> None:
        super().__init__()
        self.limits = limits
        self._buckets: dict[tuple[str, int | None], _Bucket] = {}
        self.token = token
        self.bot_username = bot_username
        self.bot_id = int(token.split(":", 1)[0])
        self._cond = threading.Condition(threading.RLock())
        self._stopping = False
        self._next_update_id = 1
        self._next_message_id: dict[int, int] = {}
        self._methods = {name[3:]: getattr(self, name) for name in dir(self) if name[:3] == "_m_"}
        self._gates: dict[str, threading.Event] = {}  # held methods (see hold)
        self._clear()

    # -- lifecycle ---------------------------------------------------------------------------------
    def open_server(self) -> _Server:
        self._stopping = False
        return _Server(self)

    def wake(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self.release()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeTelegram is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """What to pass as PTB's ``base_url`` (PTB appends the token, then ``/method``)."""
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        """What to pass as PTB's ``base_file_url``."""
        return f"http://127.0.0.1:{self.port}/file/bot"

    def reset(self) -> None:
        """Forget everything recorded and queued. Update and message ids keep increasing, so a
        bot that is still polling (its offset is past the old ids) sees new updates."""
        with self._cond:
            self._clear()
            self._cond.notify_all()

    def _clear(self) -> None:
        self.reject_markup = False  # answer broken HTML with 400 "can't parse entities"
        self.poll_count = 0
        self._updates: list[JSON] = []
        self._delivered_max = 0
        self._webhook_url = ""
        self._messages: dict[tuple[int, int], JSON] = {}  # every message, users' and the bot's
        self._bot_messages: list[tuple[int, int]] = []
        self._deleted: set[tuple[int, int]] = set()
        self._drafts: dict[int, tuple[int, str, float]] = {}  # chat → (draft_id, text, when)
        self._poll_generation = 0  # bumped by each getUpdates: older waiting ones get 409
        self._calls: list[tuple[str, JSON]] = []
        self._call_times: list[tuple[str, float, Any]] = []  # (method, monotonic, chat_id)
        self._cpu = 0.0  # CPU seconds spent answering requests (see cpu_seconds)
        self._counts: dict[str, int] = {}  # calls per method (see call_count)
        self._errors: list[tuple[str, JSON, int, str]] = []
        self._documents: list[JSON] = []
        self._files: dict[str, JSON] = {}  # file_id → {file_id, file_unique_id, file_path, …}
        self._voices: list[JSON] = []
        self._photos: list[JSON] = []
        self._answers: list[JSON] = []  # answerCallbackQuery calls: {id, text, show_alert}
        self._open_queries: set[str] = set()
        self._chat_actions: list[tuple[int, str]] = []
        self._commands: dict[str, list[JSON]] = {}  # by language_code ("" for the default)
        self._chat_commands: dict[int, list[JSON]] = {}  # BotCommandScopeChat menus by chat
        self._failures: dict[str, deque[ApiError]] = {}

    def fail_next(
        self, method: str, n: int = 1, status: int | None = None, *, retry_after: int | None = None
    ) -> None:
        """Make the next ``n`` calls of ``method`` fail: flood control (429 with
        ``parameters.retry_after``) when ``retry_after`` is given, else ``status`` (500)."""
        status = status or (429 if retry_after is not None else 500)
        if status == 429:
            retry_after = retry_after or 1
            error = ApiError(
                429, f"Too Many Requests: retry after {retry_after}", {"retry_after": retry_after}
            )
        else:
            described = {
                403: "Forbidden: bot was blocked by the user",
                500: "Internal Server Error",
            }
            error = ApiError(status, described.get(status, f"Bad Request: error {status}"))
        with self._cond:
            self._failures.setdefault(method, deque()).extend([error] * n)

    def hold(self, method: str) -> None:
        """Calls of `method` are recorded (``calls``) but not answered until ``release``: a send
        that takes as long as the test needs."""
        with self._cond:
            self._gates.setdefault(method, threading.Event())

    def release(self, method: str | None = None) -> None:
        """Answer the held calls of `method` (of every method without one), and hold no more."""
        with self._cond:
            names = list(self._gates) if method is None else [method]
            gates = [g for g in (self._gates.pop(n, None) for n in names) if g is not None]
        for gate in gates:
            gate.set()

    def stop_failing(self) -> None:
        """Forget the failures still queued by fail_next (the outage is over)."""
        with self._cond:
            self._failures.clear()

    # -- request handling --------------------------------------------------------------------------
    def _add_cpu(self, seconds: float) -> None:
        with self._cond:
            self._cpu += seconds

    def _handle(self, method: str, params: JSON, files: Files) -> tuple[int, JSON]:
        recorded = {**params, **files}
        with self._cond:
            if method == "getUpdates":
                self.poll_count += 1
            else:
                self._calls.append((method, recorded))
                self._call_times.append((method, time.monotonic(), params.get("chat_id")))
                self._counts[method] = self._counts.get(method, 0) + 1
            self._cond.notify_all()
            queue = self._failures.get(method)
            injected = queue.popleft() if queue else None
            gate = self._gates.get(method)
        if gate is not None:
            gate.wait(60.0)
        try:
            handler = self._methods.get(method)
            if handler is None:
                raise ApiError(404, "Not Found: method not found")
            if injected is not None:
                raise injected
            if self.limits:
                self._check_limits(method, params.get("chat_id"))
            return 200, {"ok": True, "result": handler(params, files)}
        except ApiError as exc:
            with self._cond:
                self._errors.append((method, recorded, exc.status, exc.description))
                self._cond.notify_all()
            return exc.status, exc.payload()

    def _bot_user(self) -> JSON:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Memora",
            "username": self.bot_username,
        }

    def _m_getMe(self, p: JSON, f: Files) -> JSON:
        return {**self._bot_user(), "can_join_groups": True, "can_read_all_group_messages": False}

    def _m_setWebhook(self, p: JSON, f: Files) -> bool:
        with self._cond:
            self._webhook_url = str(p.get("url", ""))
        return True

    def _m_getWebhookInfo(self, p: JSON, f: Files) -> JSON:
        with self._cond:
            return {
                "url": self._webhook_url,
                "has_custom_certificate": False,
                "pending_update_count": len(self._updates),
            }

    def _m_deleteWebhook(self, p: JSON, f: Files) -> bool:
        with self._cond:
            self._webhook_url = ""
            if p.get("drop_pending_updates") is True:
                self._updates.clear()
        return True

    def _m_getUpdates(self, p: JSON, f: Files) -> list[JSON]:
        """Long polling: an offset confirms (drops) every older update; wait up to `timeout`."""
        offset = int(p.get("offset") or 0)
        deadline = time.monotonic() + float(p.get("timeout") or 0)
        with self._cond:
            if self._webhook_url:
                raise ApiError(
                    409,
                    "Conflict: can't use getUpdates method while webhook is active; use "
                    "deleteWebhook to delete the webhook first",
                )
            # As Telegram: a newer getUpdates ends one still waiting (a second bot instance)
            self._poll_generation += 1
            mine = self._poll_generation
            self._cond.notify_all()
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            while not self._updates and not self._stopping:
                if self._poll_generation != mine:
                    raise ApiError(
                        409,
                        "Conflict: terminated by other getUpdates request; make sure that "
                        "only one bot instance is running",
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch = copy.deepcopy(self._updates[: int(p.get("limit") or 100)])
            if batch:
                self._delivered_max = max(self._delivered_max, batch[-1]["update_id"])
            return batch

    def _new_message_id(self, chat_id: int) -> int:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def _text(self, p: JSON) -> tuple[str, list[JSON]]:
        """What the learner would see of `text` in its parse_mode (HTML or none)."""
        text = str(p.get("text") or "")
        entities: list[JSON] = []
        if p.get("parse_mode") == "HTML":
            try:
                text, entities = parse_html(text)
            except MarkupError as exc:
                if self.reject_markup:
                    raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from exc
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if _u16(text) > _MAX_TEXT:
            raise ApiError(400, "Bad Request: message is too long")
        return text, entities

    def _check_limits(self, method: str, chat: Any) -> None:
        """429 past Telegram's flood limits (see the module docstring)."""
        chat_id = None if chat is None else int(chat)
        if method == "sendMessageDraft":
            buckets = [("draft", chat_id, 4.0, 4.0)]
        elif method in _COUNTED and chat_id is not None:
            per_chat = (1.0, 3.0) if chat_id > 0 else (20 / 60, 3.0)
            buckets = [("all", None, 30.0, 30.0), ("chat", chat_id, *per_chat)]
        else:
            return
        with self._cond:
            now = time.monotonic()
            waits = []
            for kind, key, rate, burst in buckets:
                bucket = self._buckets.setdefault((kind, key), _Bucket(rate, burst, burst, now))
                waits.append(bucket.wait(now))
            if max(waits) > 0:
                retry = max(1, math.ceil(max(waits)))
                raise ApiError(
                    429, f"Too Many Requests: retry after {retry}", {"retry_after": retry}
                )
            for kind, key, _, _ in buckets:
                self._buckets[(kind, key)].take()

    def _m_sendMessageDraft(self, p: JSON, f: Files) -> bool:
        chat_id = int(p["chat_id"])
        if chat_id <= 0:
            raise ApiError(400, "Bad Request: message drafts can be sent to private chats only")
        draft_id = int(p.get("draft_id") or 0)
        if draft_id == 0:
            raise ApiError(400, "Bad Request: draft_id must be non-zero")
        text = str(p.get("text") or "")
        if _u16(text) > _MAX_TEXT:
            raise ApiError(400, "Bad Request: message is too long")
        with self._cond:
            self._drafts[chat_id] = (draft_id, text, time.monotonic())
            self._cond.notify_all()
        return True

    def draft(self, chat_id: int) -> str | None:
        """The draft the learner sees in the chat now, if any."""
        with self._cond:
            found = self._drafts.get(chat_id)
            if found is None or time.monotonic() - found[2] > DRAFT_LIFE:
                return None
            return found[1]

    def _bot_message(self, p: JSON, body: JSON) -> JSON:
        """Record a message the bot sends to p["chat_id"] (quoting a message when asked)."""
        chat_id = int(p["chat_id"])
        self._drafts.pop(chat_id, None)  # the message takes the draft's place
        chat = {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"}
        message: JSON = {
            "message_id": self._new_message_id(chat_id),
            "from": self._bot_user(),
            "chat": chat,
            "date": int(time.time()),
            **body,
        }
        quoted = (p.get("reply_parameters") or {}).get("message_id")
        if (chat_id, quoted) in self._messages:
            message["reply_to_message"] = self._public(self._messages[(chat_id, quoted)])
        key = (chat_id, message["message_id"])
        self._messages[key] = message
        self._bot_messages.append(key)
        self._cond.notify_all()
        return copy.deepcopy(message)

    def _m_sendMessage(self, p: JSON, f: Files) -> JSON:
        with self._cond:
            text, entities = self._text(p)
            body: JSON = {"text": text, "entities": entities} if entities else {"text": text}
            if p.get("reply_markup"):
                body["reply_markup"] = p["reply_markup"]
            message = self._bot_message(p, body)
            self._messages[(message["chat"]["id"], message["message_id"])].update(
                parse_mode=p.get("parse_mode"), edits=0
            )
            return message

    def _m_editMessageText(self, p: JSON, f: Files) -> JSON:
        with self._cond:
            key = (int(p["chat_id"]), int(p["message_id"]))
            message = self._messages.get(key)
            if message is None or key in self._deleted or key not in self._bot_messages:
                raise ApiError(400, "Bad Request: message to edit not found")
            text, entities = self._text(p)
            markup = p.get("reply_markup")
            if (
                message.get("text") == text
                and message.get("entities", []) == entities
                and message.get("reply_markup") == markup
            ):
                raise ApiError(400, "Bad Request: message is not modified")
            message.update(text=text, entities=entities, edit_date=int(time.time()))
            if markup:
                message["reply_markup"] = markup
            else:  # an edit without reply_markup removes the keyboard
                message.pop("reply_markup", None)
            message.update(parse_mode=p.get("parse_mode"), edits=message.get("edits", 0) + 1)
            self._cond.notify_all()
            return copy.deepcopy(
                {k: v for k, v in message.items() if k not in ("parse_mode", "edits")}
            )

    def _m_deleteMessage(self, p: JSON, f: Files) -> bool:
        with self._cond:
            key = (int(p["chat_id"]), int(p["message_id"]))
            if key not in self._messages or key in self._deleted:
                raise ApiError(400, "Bad Request: message to delete not found")
            self._deleted.add(key)
            return True

    def _m_sendChatAction(self, p: JSON, f: Files) -> bool:
        with self._cond:
            self._chat_actions.append((int(p["chat_id"]), str(p["action"])))
            return True

    def _m_sendDocument(self, p: JSON, f: Files) -> JSON:
        upload = f.get("document")
        if upload is None:
            raise ApiError(400, "Bad Request: there is no document in the request")
        with self._cond:
            n = len(self._documents) + 1
            document = {
                "file_id": f"BQAC{n:06d}",
                "file_unique_id": f"AgAD{n:06d}",
                "file_name": upload["filename"],
                "file_size": len(upload["content"]),
            }
            message = self._bot_message(p, {"document": document})
            self._documents.append(
                {
                    "chat_id": message["chat"]["id"],
                    "filename": upload["filename"],
                    "content": upload["content"],
                    "caption": p.get("caption"),
                }
            )
            return message

    def _m_sendVoice(self, p: JSON, f: Files) -> JSON:
        upload = f.get("voice")
        if upload is None:
            raise ApiError(400, "Bad Request: there is no voice in the request")
        with self._cond:
            entry = self._add_file(upload["content"], upload["filename"], "audio/ogg")
            voice = {k: entry[k] for k in ("file_id", "file_unique_id", "file_size")}
            message = self._bot_message(p, {"voice": {**voice, "duration": 1}})
            self._voices.append({"chat_id": message["chat"]["id"], **entry})
            return message

    def _m_getFile(self, p: JSON, f: Files) -> JSON:
        with self._cond:
            entry = self._files.get(str(p.get("file_id")))
            if entry is None:
                raise ApiError(400, "Bad Request: invalid file_id")
            return {k: entry[k] for k in ("file_id", "file_unique_id", "file_size", "file_path")}

    def _add_file(self, content: bytes, filename: str | None, mime_type: str | None) -> JSON:
        n = len(self._files) + 1
        entry: JSON = {
            "file_id": f"AwACAgIAAxkB{n:06d}",
            "file_unique_id": f"AgAD{n:06d}",
            "file_size": len(content),
            "file_path": f"voice/file_{n}.{(filename or 'x.oga').rsplit('.', 1)[-1]}",
            "file_name": filename,
            "mime_type": mime_type,
            "content": bytes(content),
        }
        self._files[entry["file_id"]] = entry
        return entry

    def _file_content(self, file_path: str) -> bytes | None:
        with self._cond:
            found = [e for e in self._files.values() if e["file_path"] == file_path]
            return bytes(found[0]["content"]) if found else None

    def _m_sendPhoto(self, p: JSON, f: Files) -> JSON:
        upload = f.get("photo")
        if upload is None:
            raise ApiError(400, "Bad Request: there is no photo in the request")
        if not upload["content"].startswith(b"\x89PNG") and upload["content"][:2] != b"\xff\xd8":
            raise ApiError(400, "Bad Request: IMAGE_PROCESS_FAILED")
        with self._cond:
            n = len(self._photos) + 1
            size = {"file_id": f"AgAC{n:06d}", "file_unique_id": f"AQAD{n:06d}", "width": 800}
            size.update(height=550, file_size=len(upload["content"]))
            body: JSON = {"photo": [size]}
            if p.get("caption"):
                body["caption"] = p["caption"]
            message = self._bot_message(p, body)
            self._photos.append(
                {
                    "chat_id": message["chat"]["id"],
                    "content": upload["content"],
                    "caption": p.get("caption"),
                }
            )
            return message

    def _m_answerCallbackQuery(self, p: JSON, f: Files) -> bool:
        with self._cond:
            query_id = str(p.get("callback_query_id"))
            if query_id not in self._open_queries:
                raise ApiError(
                    400,
                    "Bad Request: query is too old and response timeout expired or query ID is "
                    "invalid",
                )
            self._open_queries.discard(query_id)
            self._answers.append(
                {
                    "id": query_id,
                    "text": p.get("text"),
                    "show_alert": bool(p.get("show_alert")),
                }
            )
            self._cond.notify_all()
            return True

    def _m_setMyCommands(self, p: JSON, f: Files) -> bool:
        commands = p.get("commands")
        if not isinstance(commands, list) or not all(
            re.fullmatch(r"[a-z0-9_]{1,32}", str(c.get("command"))) for c in commands
        ):
            raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        code, chat = self._menu_of(p)
        with self._cond:
            if chat is None:
                self._commands[code] = copy.deepcopy(commands)
            else:
                self._chat_commands[chat] = copy.deepcopy(commands)
        return True

    def _m_setChatMenuButton(self, p: JSON, f: Files) -> bool:
        """The menu button (a Mini App's): recorded as a call, nothing else to keep."""
        return True

    def _m_deleteMyCommands(self, p: JSON, f: Files) -> bool:
        code, chat = self._menu_of(p)
        with self._cond:
            if chat is None:
                self._commands.pop(code, None)
            else:
                self._chat_commands.pop(chat, None)
        return True

    @staticmethod
    def _menu_of(p: JSON) -> tuple[str, int | None]:
        """Which menu a set/deleteMyCommands means: its language_code ("" for none) and the
        chat of a BotCommandScopeChat (None for the default scope; other scopes are refused)."""
        code = str(p.get("language_code") or "")
        if code and not re.fullmatch(r"[a-z]{2}", code):  # two-letter ISO 639-1, or none
            raise ApiError(400, "Bad Request: invalid language code specified")
        scope = p.get("scope") or {"type": "default"}
        if scope.get("type") == "chat" and not code:
            return code, int(scope["chat_id"])
        if scope.get("type") != "default":
            raise ApiError(400, f"Bad Request: the fake has no menus for scope {scope}")
        return code, None

    # -- playing users -----------------------------------------------------------------------------
    def push_update(self, update: JSON) -> JSON:
        """Queue an Update for the bot (an ``update_id`` is given when missing); returns it."""
        update = copy.deepcopy(update)
        with self._cond:
            update.setdefault("update_id", self._next_update_id)
            self._next_update_id = int(update["update_id"]) + 1
            message = update.get("message")
            if message is not None:
                self._messages[(message["chat"]["id"], message["message_id"])] = message
            self._updates.append(update)
            self._cond.notify_all()
        return copy.deepcopy(update)

    @staticmethod
    def make_user(
        user_id: int = DEFAULT_USER_ID, first_name: str = "Alice", language_code: str = "en"
    ) -> JSON:
        return {
            "id": user_id,
            "is_bot": False,
            "first_name": first_name,
            "language_code": language_code,
        }

    @staticmethod
    def text_entities(text: str) -> list[JSON]:
        """What Telegram would detect: a leading /command (with @bot suffix) and @mentions."""
        entities: list[JSON] = []
        command = re.match(r"/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?", text)
        if command:
            entities.append({"type": "bot_command", "offset": 0, "length": _u16(command[0])})
        for mention in re.finditer(r"(?<![\w@])@[A-Za-z][A-Za-z0-9_]{3,31}\b", text):
            if command is None or mention.start() >= command.end():
                offset = _u16(text[: mention.start()])
                entities.append({"type": "mention", "offset": offset, "length": _u16(mention[0])})
        return entities

    def user_sends(self, text: str, forward_origin: JSON | None = None, **where: Any) -> JSON:
        """Queue a text message from a user; returns the Update. ``forward_origin`` (a
        MessageOrigin object) makes it a forwarded message; ``where`` says who sends it where
        (see :meth:`_user_message`)."""
        body: JSON = {"text": text}
        if forward_origin is not None:
            body["forward_origin"] = forward_origin
        if entities := self.text_entities(text):
            body["entities"] = entities
        return self._user_message(body, **where)

    def add_user_file(
        self, content: bytes, filename: str | None = None, mime_type: str | None = None
    ) -> JSON:
        """A file a user uploaded, downloadable with getFile (for Update objects a test builds
        itself): {file_id, file_unique_id, file_size, file_path, …}."""
        with self._cond:
            return copy.deepcopy(self._add_file(content, filename, mime_type))

    def user_sends_voice(
        self, content: bytes, duration: int = 2, user_id: int = DEFAULT_USER_ID, **where: Any
    ) -> JSON:
        """A voice note (Ogg/Opus ``content``); the bot downloads it with getFile."""
        entry = self.add_user_file(content, None, "audio/ogg")
        voice = {k: entry[k] for k in ("file_id", "file_unique_id", "file_size")}
        voice.update(duration=duration, mime_type="audio/ogg")
        return self._user_message({"voice": voice}, user_id=user_id, **where)

    def user_sends_audio(
        self,
        content: bytes,
        filename: str,
        mime_type: str = "audio/ogg",
        duration: int = 2,
        user_id: int = DEFAULT_USER_ID,
        **where: Any,
    ) -> JSON:
        """An audio file (Telegram's ``audio``, not a voice note), downloadable like any file."""
        entry = self.add_user_file(content, filename, mime_type)
        audio = {k: entry[k] for k in ("file_id", "file_unique_id", "file_size", "mime_type")}
        audio.update(duration=duration, file_name=filename)
        return self._user_message({"audio": audio}, user_id=user_id, **where)

    def user_sends_sticker(self, emoji: str = "👍", user_id: int = DEFAULT_USER_ID) -> JSON:
        """A sticker (no text): the bot answers with a short notice."""
        sticker = {
            "file_id": f"sticker-{emoji}",
            "file_unique_id": f"u-sticker-{emoji}",
            "type": "regular",
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
            "emoji": emoji,
        }
        return self._user_message({"sticker": sticker}, user_id=user_id)

    def _user_message(
        self,
        body: JSON,
        chat_id: int | None = None,
        user_id: int = DEFAULT_USER_ID,
        first_name: str = "Alice",
        chat_type: str = "private",
        chat_title: str | None = None,
        reply_to_bot_message_id: int | None = None,
        language_code: str = "en",
    ) -> JSON:
        """Queue a message with this `body` from a user; returns the Update. ``chat_id``
        defaults to the user's id in a private chat and to DEFAULT_GROUP_ID otherwise;
        ``language_code`` is the user's app language ("zh-TW", "zh-hans", ...)."""
        user = self.make_user(user_id, first_name, language_code)
        if chat_type == "private":
            chat: JSON = {"id": user_id if chat_id is None else chat_id, "type": "private"}
            chat["first_name"] = first_name
        else:
            chat = {"id": chat_id or self.DEFAULT_GROUP_ID, "type": chat_type}
            chat["title"] = chat_title or "Test group"
        with self._cond:
            message: JSON = {
                "message_id": self._new_message_id(chat["id"]),
                "from": user,
                "chat": chat,
                "date": int(time.time()),
                **body,
            }
            if reply_to_bot_message_id is not None:
                original = self._messages[(chat["id"], reply_to_bot_message_id)]
                message["reply_to_message"] = self._public(original)
        return self.push_update({"message": message})

    def user_taps(
        self,
        message: JSON,
        data: str,
        user_id: int = DEFAULT_USER_ID,
        first_name: str = "Alice",
    ) -> JSON:
        """Queue a tap on an inline button of a bot message (``data`` is what the button
        carries; any string, so a forged one too); returns the Update."""
        with self._cond:
            query_id = f"cq-{self._next_update_id}-{user_id}"
            self._open_queries.add(query_id)
            shown = self._public(self._messages[(message["chat"]["id"], message["message_id"])])
            query: JSON = {
                "id": query_id,
                "from": self.make_user(user_id, first_name),
                "message": shown,
                "chat_instance": str(message["chat"]["id"]),
                "data": data,
            }
        return self.push_update({"callback_query": query})

    # -- recordings --------------------------------------------------------------------------------
    @staticmethod
    def _public(message: JSON) -> JSON:
        """A message as a quote shows it (without the fake's own bookkeeping keys)."""
        skip = ("parse_mode", "edits", "reply_to_message")  # a quote never nests another
        return copy.deepcopy({k: v for k, v in message.items() if k not in skip})

    @property
    def calls(self) -> list[tuple[str, JSON]]:
        """(method, params) of every request except getUpdates, retries and failures included."""
        with self._cond:
            return copy.deepcopy(self._calls)

    def calls_to(self, method: str) -> list[JSON]:
        return [params for m, params in self.calls if m == method]

    def call_count(self, *methods: str) -> int:
        """How many calls (of these methods; all but getUpdates if none) so far: cheap to poll,
        unlike the copies that ``calls`` and ``sent_messages`` make."""
        with self._cond:
            if not methods:
                return len(self._call_times)
            return sum(self._counts.get(m, 0) for m in methods)

    def max_per_second(self, *methods: str, per_chat: bool = False) -> int:
        """The most calls (of these methods; all but getUpdates if none) in any one second;
        with ``per_chat``, the most any one chat got (Telegram allows about one a second)."""
        with self._cond:
            calls = [(t, c) for m, t, c in self._call_times if not methods or m in methods]
        if not per_chat:
            return _most_in_a_second([t for t, _ in calls])
        chats: dict[Any, list[float]] = {}
        for t, chat in calls:
            chats.setdefault(chat, []).append(t)
        return max((_most_in_a_second(times) for times in chats.values()), default=0)

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds the fake spent answering requests, in its own threads: a benchmark that
        runs the bot in the same process takes this off the process's CPU time."""
        with self._cond:
            return self._cpu

    @property
    def errors(self) -> list[tuple[str, JSON, int, str]]:
        """(method, params, status, description) of every non-OK answer (injected ones too)."""
        with self._cond:
            return copy.deepcopy(self._errors)

    @property
    def chat_actions(self) -> list[tuple[int, str]]:
        with self._cond:
            return list(self._chat_actions)

    @property
    def pending_updates(self) -> list[JSON]:
        """Updates the bot has not confirmed yet (by a later getUpdates offset)."""
        with self._cond:
            return copy.deepcopy(self._updates)

    def commands(self, language_code: str = "") -> list[JSON]:
        """The command menu set for users of this language ("": the default menu)."""
        with self._cond:
            return copy.deepcopy(self._commands.get(language_code, []))

    def chat_commands(self, chat_id: int) -> list[JSON]:
        """The command menu set for this one chat (BotCommandScopeChat), [] if none."""
        with self._cond:
            return copy.deepcopy(self._chat_commands.get(chat_id, []))

    def menu_languages(self) -> list[str]:
        """The language codes a command menu was set for ("" for the default), in order."""
        with self._cond:
            return list(self._commands)

    def sent_messages(self, chat_id: int | None = None) -> list[JSON]:
        """Messages the bot sent, in order, deleted ones left out, as the learner sees them now
        (after edits, parse_mode applied), with ``parse_mode`` (of the last edit) and ``edits``."""
        with self._cond:
            return [
                copy.deepcopy(self._messages[key])
                for key in self._bot_messages
                if key not in self._deleted and chat_id in (None, key[0])
            ]

    def texts(self, chat_id: int | None = None) -> list[str]:
        """The text of every message the bot sent (documents give "")."""
        return [str(m.get("text", "")) for m in self.sent_messages(chat_id)]

    def documents(self, chat_id: int | None = None) -> list[JSON]:
        """Documents the bot sent: {chat_id, filename, content, caption}."""
        with self._cond:
            return [copy.deepcopy(d) for d in self._documents if chat_id in (None, d["chat_id"])]

    def voices(self, chat_id: int | None = None) -> list[JSON]:
        """Voice notes the bot sent: {chat_id, content, file_id, …}."""
        with self._cond:
            return [copy.deepcopy(v) for v in self._voices if chat_id in (None, v["chat_id"])]

    def photos(self, chat_id: int | None = None) -> list[JSON]:
        """Photos the bot sent: {chat_id, content, caption}."""
        with self._cond:
            return [copy.deepcopy(d) for d in self._photos if chat_id in (None, d["chat_id"])]

    @property
    def callback_answers(self) -> list[JSON]:
        """Every answerCallbackQuery: {id, text, show_alert}, in order."""
        with self._cond:
            return copy.deepcopy(self._answers)

    # -- waiting -----------------------------------------------------------------------------------
    def _check(
        self, predicate: Callable[[], T | None], deadline: float, timeout: float, what: str
    ) -> tuple[T | None, float]:
        """One poll: the predicate's value if truthy, else the time left (WaitTimeout at 0)."""
        result = predicate()
        if result:
            return result, 0.0
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            with self._cond:
                last = [(m, {k: repr(v)[:120] for k, v in p.items()}) for m, p in self._calls[-8:]]
                errors = [(m, status, text) for m, _, status, text in self._errors[-4:]]
            raise WaitTimeout(
                f"timed out after {timeout}s waiting for {what or predicate!r}; "
                f"last calls: {last!r}; errors: {errors!r}"
            )
        return None, remaining

    def wait_for(
        self, predicate: Callable[[], T | None], timeout: float = 10.0, what: str = ""
    ) -> T:
        """Poll ``predicate`` (outside the lock) until truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            result, remaining = self._check(predicate, deadline, timeout, what)
            if result:
                return result
            with self._cond:
                self._cond.wait(min(0.05, remaining))

    async def await_for(
        self, predicate: Callable[[], T | None], timeout: float = 10.0, what: str = ""
    ) -> T:
        """Like wait_for, but sleeps with asyncio so the event loop keeps running."""
        deadline = time.monotonic() + timeout
        while True:
            result, remaining = self._check(predicate, deadline, timeout, what)
            if result:
                return result
            await asyncio.sleep(min(0.02, remaining))

    def wait_messages(
        self,
        chat_id: int | None = None,
        count: int = 1,
        timeout: float = 10.0,
        *,
        after: JSON | None = None,
    ) -> list[JSON]:
        """Block until the bot has sent >= ``count`` messages to ``chat_id`` (any chat if None);
        with ``after`` (an Update that user_sends returned), only later messages in its chat."""
        after_id = 0
        if after is not None:
            after_id = after["message"]["message_id"]
            chat_id = after["message"]["chat"]["id"] if chat_id is None else chat_id

        def ready() -> list[JSON] | None:
            found = [m for m in self.sent_messages(chat_id) if m["message_id"] > after_id]
            return found if len(found) >= count else None

        return self.wait_for(ready, timeout, f"{count} message(s) to chat {chat_id}")

    def wait_documents(
        self, chat_id: int | None = None, count: int = 1, timeout: float = 10.0
    ) -> list[JSON]:
        def ready() -> list[JSON] | None:
            found = self.documents(chat_id)
            return found if len(found) >= count else None

        return self.wait_for(ready, timeout, f"{count} document(s) to chat {chat_id}")

    async def await_calls(self, method: str, count: int = 1, timeout: float = 10.0) -> list[JSON]:
        def ready() -> list[JSON] | None:
            found = self.calls_to(method)
            return found if len(found) >= count else None

        return await self.await_for(ready, timeout, f"{count} call(s) to {method}")
