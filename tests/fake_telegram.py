"""A fake Telegram Bot API server (stdlib only) that real python-telegram-bot talks to over HTTP.

The server binds 127.0.0.1 on a free port and runs in a daemon thread, so a bot in the test
process *or in a subprocess* can use it::

    with FakeTelegram() as tg:
        app = (
            Application.builder()
            .token(tg.token)
            .base_url(tg.base_url)            # "http://127.0.0.1:PORT/bot"
            .base_file_url(tg.base_file_url)  # "http://127.0.0.1:PORT/file/bot"
            .build()
        )
        ...
        tg.user_sends("/start")
        replies = tg.wait_messages(chat_id=tg.DEFAULT_USER_ID, count=1)

What it speaks (JSON, x-www-form-urlencoded and multipart/form-data bodies, GET query strings):

- ``getMe``, ``logOut``, ``close``, ``deleteWebhook`` (honours ``drop_pending_updates``),
  ``setWebhook``, ``getWebhookInfo``
- ``getUpdates`` with real long polling: ``offset`` confirms (drops) older updates, ``limit``,
  ``timeout`` blocks on a condition until an update arrives, ``allowed_updates`` is remembered
  like Telegram does. A second concurrent ``getUpdates`` makes the first one answer 409 Conflict.
- ``sendMessage``, ``editMessageText``, ``editMessageReplyMarkup``, ``deleteMessage``,
  ``sendChatAction``, ``sendDocument`` (upload or file_id), ``getFile`` (+ file download under
  ``base_file_url``), ``setMyCommands`` / ``getMyCommands`` / ``deleteMyCommands``,
  ``answerCallbackQuery``, ``getChat``
- anything else: 404 ``Not Found: method not found``; a wrong token: 401 ``Unauthorized``.

``parse_mode`` (HTML, MarkdownV2, Markdown) is parsed into plain text + entities like Telegram
does, so ``sent_messages()`` show what the user sees (``raw_text`` keeps what the bot sent).
Broken markup is tolerated (raw text is kept) unless ``reject_markup = True``, in which case it
answers 400 ``Bad Request: can't parse entities: ...``. Errors can be injected with
``fail_next`` (500 by default, or 429 flood control with ``retry_after``).

Every request except ``getUpdates`` is recorded in ``calls``; every non-OK answer in ``errors``.
"""

# ruff: noqa: ASYNC109  (await_* take a polling deadline, not a cancel scope)
from __future__ import annotations

import asyncio
import copy
import html.parser
import json
import re
import socket
import sys
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeVar

__all__ = [
    "ApiError",
    "FakeTelegram",
    "MarkupError",
    "WaitTimeout",
    "parse_html",
    "parse_markdown",
    "parse_markdown_v2",
]

JSON = dict[str, Any]
T = TypeVar("T")

# Telegram's default when allowed_updates was never set (or set to []).
_NOT_DELIVERED_BY_DEFAULT = frozenset({"chat_member", "message_reaction", "message_reaction_count"})

# Form fields that are always plain strings (PTB sends str values un-JSON-encoded, everything
# else json.dumps'ed), so they must never be JSON-decoded: "123" stays "123" here.
_STRING_PARAMS = frozenset(
    """
    text caption callback_query_id parse_mode action url inline_message_id language_code
    business_connection_id message_effect_id title description short_description name
    query emoji file_id secret_token ip_address payload currency document photo voice
    audio video sticker animation thumbnail question explanation custom_title invite_link
    """.split()
)

_MAX_TEXT = 4096
_MAX_CAPTION = 1024


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


class _Superseded(ApiError):
    """A long poll cut short by a newer getUpdates (its client is usually gone already)."""


class MarkupError(ValueError):
    """Text cannot be parsed in its parse_mode (Telegram: "can't parse entities")."""


class WaitTimeout(AssertionError):
    """A wait_* / await_* helper ran past its deadline."""


# -- markup parsing --------------------------------------------------------------------------------
_HTML_TYPES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}


class _HtmlEntities(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.pos = 0
        self.stack: list[tuple[str, dict[str, str | None], int]] = []
        self.entities: list[JSON] = []

    def _where(self) -> str:
        line, col = self.getpos()
        return f"line {line}, column {col}"

    def handle_data(self, data: str) -> None:
        self.parts.append(data)
        self.pos += _u16(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag not in _HTML_TYPES or (tag == "span" and attributes.get("class") != "tg-spoiler"):
            raise MarkupError(f'Unsupported start tag "{tag}" at {self._where()}')
        self.stack.append((tag, attributes, self.pos))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raise MarkupError(f'Unsupported start tag "{tag}" at {self._where()}')

    def handle_endtag(self, tag: str) -> None:
        if not self.stack:
            raise MarkupError(f'Unexpected end tag "{tag}" at {self._where()}')
        open_tag, attrs, start = self.stack.pop()
        if open_tag != tag:
            raise MarkupError(
                f'Can\'t find end tag corresponding to start tag "{open_tag}" '
                f'(found "</{tag}>" at {self._where()})'
            )
        length = self.pos - start
        if tag == "code" and self.stack and self.stack[-1][0] == "pre":
            language = (attrs.get("class") or "").removeprefix("language-")
            if language:
                self.stack[-1][1]["\0language"] = language
            return
        if length <= 0:
            return
        entity: JSON = {"type": _HTML_TYPES[tag], "offset": start, "length": length}
        if tag == "a":
            href = attrs.get("href")
            if not href:
                return
            entity["url"] = href
        elif tag == "pre" and attrs.get("\0language"):
            entity["language"] = attrs["\0language"]
        elif tag == "blockquote" and "expandable" in attrs:
            entity["type"] = "expandable_blockquote"
        elif tag == "tg-emoji":
            entity["custom_emoji_id"] = attrs.get("emoji-id") or ""
        self.entities.append(entity)


def _sorted(entities: list[JSON]) -> list[JSON]:
    return sorted(entities, key=lambda e: (e["offset"], -e["length"]))


def parse_html(text: str) -> tuple[str, list[JSON]]:
    """Telegram's HTML parse_mode: plain text and entities; MarkupError on broken markup."""
    parser = _HtmlEntities()
    parser.feed(text)
    parser.close()
    if parser.stack:
        raise MarkupError(f'Can\'t find end tag corresponding to start tag "{parser.stack[-1][0]}"')
    return "".join(parser.parts), _sorted(parser.entities)


_MDV2_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")
_MDV2_NAMES = {
    "*": ("bold", "Bold"),
    "_": ("italic", "Italic"),
    "__": ("underline", "Underline"),
    "~": ("strikethrough", "Strikethrough"),
    "||": ("spoiler", "Spoiler"),
    "[": ("text_link", "TextUrl"),
}


class _Out:
    """Accumulates plain text and tracks the UTF-16 offset."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pos = 0

    def add(self, s: str) -> None:
        self.parts.append(s)
        self.pos += _u16(s)

    def text(self) -> str:
        return "".join(self.parts)


def parse_markdown_v2(text: str) -> tuple[str, list[JSON]]:
    """Telegram's MarkdownV2 parse_mode (close enough for tests); MarkupError when broken."""
    out = _Out()
    entities: list[JSON] = []
    stack: list[tuple[str, int, int]] = []  # (marker, utf16 start, byte offset of marker)
    quote_start: int | None = None
    i, n = 0, len(text)

    def byte_offset(k: int) -> int:
        return len(text[:k].encode())

    def scan_until(start: int, closing: str) -> tuple[str, int]:
        """Unescaped content from start to the closing marker; returns (content, index)."""
        buf: list[str] = []
        k = start
        while k < n:
            if text[k] == "\\" and k + 1 < n:
                buf.append(text[k + 1])
                k += 2
                continue
            if text.startswith(closing, k):
                return "".join(buf), k
            buf.append(text[k])
            k += 1
        return "".join(buf), -1

    while i < n:
        c = text[i]
        at_line_start = i == 0 or text[i - 1] == "\n"
        if c == "\n" and quote_start is not None and not text.startswith(">", i + 1):
            if out.pos > quote_start:
                entities.append(
                    {"type": "blockquote", "offset": quote_start, "length": out.pos - quote_start}
                )
            quote_start = None
        if c == "\\":
            if i + 1 >= n:
                raise MarkupError("Character '\\' is reserved and must be escaped")
            out.add(text[i + 1])
            i += 2
            continue
        if c == ">" and at_line_start:
            if quote_start is None:
                quote_start = out.pos
            i += 1
            continue
        if text.startswith("```", i):
            body_start = i + 3
            newline = text.find("\n", body_start)
            language = ""
            if newline != -1:
                head = text[body_start:newline]
                if head and not any(ch.isspace() for ch in head) and "`" not in head:
                    language, body_start = head, newline + 1
            content, end = scan_until(body_start, "```")
            if end == -1:
                raise MarkupError(f"Can't find end of Pre entity at byte offset {byte_offset(i)}")
            if content:
                entity: JSON = {"type": "pre", "offset": out.pos, "length": _u16(content)}
                if language:
                    entity["language"] = language
                entities.append(entity)
                out.add(content)
            i = end + 3
            continue
        if c == "`":
            content, end = scan_until(i + 1, "`")
            if end == -1:
                raise MarkupError(f"Can't find end of Code entity at byte offset {byte_offset(i)}")
            if content:
                entities.append({"type": "code", "offset": out.pos, "length": _u16(content)})
                out.add(content)
            i = end + 1
            continue
        if c == "]":
            if not stack or stack[-1][0] != "[":
                raise MarkupError(
                    "Character ']' is reserved and must be escaped with the preceding '\\'"
                )
            _, start, _ = stack.pop()
            if not text.startswith("(", i + 1):
                raise MarkupError(f"Can't find end of a URL at byte offset {byte_offset(i)}")
            url, end = scan_until(i + 2, ")")
            if end == -1:
                raise MarkupError(f"Can't find end of a URL at byte offset {byte_offset(i)}")
            if out.pos > start:
                entities.append(
                    {"type": "text_link", "offset": start, "length": out.pos - start, "url": url}
                )
            i = end + 1
            continue
        if c == "[":
            stack.append(("[", out.pos, byte_offset(i)))
            i += 1
            continue
        marker: str | None = None
        if text.startswith("||", i):
            marker = "||"
        elif text.startswith("__", i) and not (stack and stack[-1][0] == "_"):
            marker = "__"
        elif c in "*_~":
            marker = c
        if marker is None:
            if c in _MDV2_RESERVED:
                raise MarkupError(
                    f"Character '{c}' is reserved and must be escaped with the preceding '\\'"
                )
            out.add(c)
            i += 1
            continue
        if stack and stack[-1][0] == marker:
            _, start, _ = stack.pop()
            if out.pos > start:
                entities.append(
                    {"type": _MDV2_NAMES[marker][0], "offset": start, "length": out.pos - start}
                )
        elif any(m == marker for m, _, _ in stack):
            opened = next(b for m, _, b in reversed(stack) if m == marker)
            raise MarkupError(
                f"Can't find end of {_MDV2_NAMES[marker][1]} entity at byte offset {opened}"
            )
        else:
            stack.append((marker, out.pos, byte_offset(i)))
        i += len(marker)

    if stack:
        marker, _, opened = stack[-1]
        raise MarkupError(
            f"Can't find end of {_MDV2_NAMES[marker][1]} entity at byte offset {opened}"
        )
    if quote_start is not None and out.pos > quote_start:
        entities.append(
            {"type": "blockquote", "offset": quote_start, "length": out.pos - quote_start}
        )
    return out.text(), _sorted(entities)


def parse_markdown(text: str) -> tuple[str, list[JSON]]:
    """Telegram's legacy Markdown parse_mode; MarkupError when an entity is not closed."""
    out = _Out()
    entities: list[JSON] = []
    i, n = 0, len(text)
    kinds = {"*": "bold", "_": "italic", "`": "code"}
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "_*`[":
            out.add(text[i + 1])
            i += 2
            continue
        if text.startswith("```", i):
            end = text.find("```", i + 3)
            if end == -1:
                raise MarkupError(
                    f"Can't find end of the entity starting at byte offset {len(text[:i].encode())}"
                )
            content = text[i + 3 : end]
            if content:
                entities.append({"type": "pre", "offset": out.pos, "length": _u16(content)})
                out.add(content)
            i = end + 3
            continue
        if c in kinds:
            end = text.find(c, i + 1)
            if end == -1:
                raise MarkupError(
                    f"Can't find end of the entity starting at byte offset {len(text[:i].encode())}"
                )
            content = text[i + 1 : end]
            if content:
                entities.append({"type": kinds[c], "offset": out.pos, "length": _u16(content)})
                out.add(content)
            i = end + 1
            continue
        if c == "[":
            close = text.find("]", i + 1)
            if close == -1:
                raise MarkupError(
                    f"Can't find end of the entity starting at byte offset {len(text[:i].encode())}"
                )
            if text.startswith("(", close + 1) and (url_end := text.find(")", close + 2)) != -1:
                label = text[i + 1 : close]
                if label:
                    entities.append(
                        {
                            "type": "text_link",
                            "offset": out.pos,
                            "length": _u16(label),
                            "url": text[close + 2 : url_end],
                        }
                    )
                    out.add(label)
                i = url_end + 1
                continue
        out.add(c)
        i += 1
    return out.text(), _sorted(entities)


_PARSERS: dict[str, Callable[[str], tuple[str, list[JSON]]]] = {
    "html": parse_html,
    "markdownv2": parse_markdown_v2,
    "markdown": parse_markdown,
}


# -- form / multipart decoding ---------------------------------------------------------------------
def _decode_value(key: str, value: str) -> Any:
    """PTB sends str params as-is and everything else JSON-encoded; undo that."""
    if key in _STRING_PARAMS:
        return value
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    return value if isinstance(decoded, str) else decoded


_DISPOSITION_PARAM = re.compile(r';\s*([\w*-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))')


def _parse_multipart(body: bytes, content_type: str) -> tuple[JSON, dict[str, JSON]]:
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if not match:
        raise ApiError(400, "Bad Request: multipart boundary is missing")
    delimiter = b"--" + match.group(1).encode("latin-1")
    params: JSON = {}
    files: dict[str, JSON] = {}
    for chunk in body.split(delimiter)[1:]:
        if chunk.startswith(b"--"):
            break
        chunk = chunk.removeprefix(b"\r\n")
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            continue
        content = content.removesuffix(b"\r\n")
        headers: dict[str, str] = {}
        for line in head.decode("utf-8", "replace").split("\r\n"):
            key, _, val = line.partition(":")
            headers[key.strip().lower()] = val.strip()
        disposition: dict[str, str] = {}
        for m in _DISPOSITION_PARAM.finditer(headers.get("content-disposition", "")):
            raw = m.group(2) if m.group(2) is not None else (m.group(3) or "").strip()
            disposition[m.group(1).lower()] = raw.replace('\\"', '"')
        name = disposition.get("name", "")
        filename: str | None = disposition.get("filename")
        if "filename*" in disposition:
            _, _, encoded = disposition["filename*"].partition("''")
            filename = urllib.parse.unquote(encoded)
        if filename is None:
            params[name] = _decode_value(name, content.decode("utf-8"))
        else:
            files[name] = {
                "filename": filename,
                "content": content,
                "mime_type": headers.get("content-type", "application/octet-stream"),
            }
    return params, files


# -- HTTP plumbing ---------------------------------------------------------------------------------
class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, fake: FakeTelegram) -> None:
        self.fake = fake
        self._open: set[socket.socket] = set()
        self._handler_threads: set[threading.Thread] = set()
        self._open_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        me = threading.current_thread()
        with self._open_lock:
            self._handler_threads.add(me)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._handler_threads.discard(me)
                self._open.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # client went away (cancelled long poll)
            return
        super().handle_error(request, client_address)

    def drop_connections(self, join_timeout: float) -> None:
        with self._open_lock:
            sockets, threads = list(self._open), list(self._handler_threads)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + join_timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120  # idle keep-alive connections are dropped after this
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _dispatch(self) -> None:
        fake = self.server.fake
        url = urllib.parse.urlsplit(self.path)
        try:
            body = self._read_body()
        except (OSError, ValueError):
            self.close_connection = True
            return
        path = urllib.parse.unquote(url.path)  # httpx may send the token's ":" as %3A
        file_match = re.fullmatch(r"/file/bot([^/]*)/(.+)", path)
        if file_match:
            content = fake._file_content(file_match.group(1), file_match.group(2))
            if content is None:
                self._send(404, b'{"ok":false,"error_code":404,"description":"Not Found"}')
            else:
                self._send(200, content, "application/octet-stream")
            return
        match = re.fullmatch(r"/bot([^/]*)/([A-Za-z0-9_]*)/?", path)
        if not match:
            payload: JSON = {"ok": False, "error_code": 404, "description": "Not Found"}
            self._send(404, json.dumps(payload).encode())
            return
        if match.group(1) != fake.token:
            payload = {"ok": False, "error_code": 401, "description": "Unauthorized"}
            self._send(401, json.dumps(payload).encode())
            return
        try:
            params, files = self._params(url.query, body)
            status, payload = fake._handle(match.group(2), params, files)
        except ApiError as exc:
            status, payload = exc.status, exc.payload()
        self._send(status, json.dumps(payload, ensure_ascii=False).encode())

    def _params(self, query: str, body: bytes) -> tuple[JSON, dict[str, JSON]]:
        params: JSON = {
            k: _decode_value(k, v) for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True)
        }
        files: dict[str, JSON] = {}
        content_type = self.headers.get("Content-Type", "")
        kind = content_type.split(";")[0].strip().lower()
        if not body:
            return params, files
        if kind == "application/json":
            try:
                decoded = json.loads(body)
            except ValueError as exc:
                raise ApiError(400, "Bad Request: can't parse JSON body") from exc
            if not isinstance(decoded, dict):
                raise ApiError(400, "Bad Request: JSON body must be an object")
            params.update(decoded)
        elif kind == "multipart/form-data":
            form, files = _parse_multipart(body, content_type)
            params.update(form)
        else:  # application/x-www-form-urlencoded (httpx's default for `data=`)
            pairs = urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True)
            params.update({k: _decode_value(k, v) for k, v in pairs})
        return params, files


# -- the fake --------------------------------------------------------------------------------------
class FakeTelegram:
    """In-process fake of api.telegram.org; see the module docstring."""

    DEFAULT_USER_ID = 1001
    DEFAULT_GROUP_ID = -1001234567890

    def __init__(
        self,
        token: str = "123:TEST",
        bot_username: str = "memora_test_bot",
        *,
        bot_first_name: str = "Memora",
        max_poll_timeout: float = 50.0,
    ) -> None:
        self.token = token
        self.bot_username = bot_username
        self.bot_first_name = bot_first_name
        prefix = token.split(":", 1)[0]
        self.bot_id = int(prefix) if prefix.isdigit() else 1
        self.max_poll_timeout = max_poll_timeout
        self.reject_markup = False
        self._cond = threading.Condition(threading.RLock())
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._next_update_id = 1
        self._next_message_id: dict[int, int] = {}
        self._next_file = 1
        self._poll_generation = 0
        names = [attr.removeprefix("_m_") for attr in dir(self) if attr.startswith("_m_")]
        self._methods: dict[str, Callable[[JSON, dict[str, JSON]], Any]] = {
            name.lower(): getattr(self, "_m_" + name) for name in names
        }
        self._canonical = {name.lower(): name for name in names}
        self._clear()

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> FakeTelegram:
        if self._server is not None:
            return self
        self._stopping = False
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-telegram",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        server.shutdown()
        server.drop_connections(join_timeout=5.0)
        server.server_close()
        if thread is not None:
            thread.join(5.0)
        self._server = self._thread = None

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

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

    @property
    def api_url(self) -> str:
        """``base_url`` + token, e.g. for raw HTTP calls: f"{api_url}/getMe"."""
        return f"{self.base_url}{self.token}"

    def reset(self) -> None:
        """Forget everything recorded and queued. Update ids and message ids keep increasing, so a
        bot that is still polling (its offset is past the old ids) sees new updates."""
        with self._cond:
            self._clear()
            self._cond.notify_all()

    def _clear(self) -> None:
        self.reject_markup = False
        self._updates: list[JSON] = []
        self._allowed_updates: list[str] | None = None
        self._chats: dict[int, JSON] = {}
        self._messages: dict[tuple[int, int], JSON] = {}
        self._bot_messages: list[tuple[int, int]] = []
        self._extras: dict[tuple[int, int], JSON] = {}
        self._deleted: set[tuple[int, int]] = set()
        self._calls: list[tuple[str, JSON]] = []
        self._errors: list[tuple[str, JSON, int, str]] = []
        self._documents: list[JSON] = []
        self._chat_actions: list[tuple[int, str]] = []
        self._callback_answers: list[JSON] = []
        self._commands: dict[str, list[JSON]] = {}
        self._files: dict[str, JSON] = {}
        self._failures: dict[str, deque[ApiError]] = {}
        self._webhook_url = ""
        self._delivered_max = 0
        self.poll_count = 0
        self.last_poll: JSON | None = None

    # -- failure injection -------------------------------------------------------------------------
    def fail_next(
        self,
        method: str,
        n: int = 1,
        status: int | None = None,
        *,
        retry_after: int | None = None,
        description: str | None = None,
    ) -> None:
        """Make the next ``n`` calls of ``method`` fail. With ``retry_after`` it is flood control
        (HTTP 429 + ``parameters.retry_after``); otherwise ``status`` (default 500)."""
        if status is None:
            status = 429 if retry_after is not None else 500
        if status == 429 and retry_after is None:
            retry_after = 1
        if description is None:
            description = {
                400: "Bad Request: injected failure",
                403: "Forbidden: bot was blocked by the user",
                429: f"Too Many Requests: retry after {retry_after or 1}",
                500: "Internal Server Error",
                502: "Bad Gateway",
            }.get(status, f"Error {status}")
        parameters = {"retry_after": retry_after} if retry_after is not None else None
        name = self._canonical.get(method.lower(), method)
        with self._cond:
            queue = self._failures.setdefault(name, deque())
            for _ in range(n):
                queue.append(ApiError(status, description, parameters))

    # -- request handling --------------------------------------------------------------------------
    def _handle(self, method: str, params: JSON, files: dict[str, JSON]) -> tuple[int, JSON]:
        name = self._canonical.get(method.lower(), method)
        recorded = dict(params)
        recorded.update(files)
        with self._cond:
            if name == "getUpdates":
                self.poll_count += 1
                self.last_poll = recorded
            else:
                self._calls.append((name, recorded))
            self._cond.notify_all()
        try:
            handler = self._methods.get(method.lower())
            if handler is None:
                raise ApiError(404, "Not Found: method not found")
            with self._cond:
                queue = self._failures.get(name)
                injected = queue.popleft() if queue else None
            if injected is not None:
                raise injected
            result = handler(params, files)
        except ApiError as exc:
            if not isinstance(exc, _Superseded):
                with self._cond:
                    self._errors.append((name, recorded, exc.status, exc.description))
                    self._cond.notify_all()
            return exc.status, exc.payload()
        return 200, {"ok": True, "result": result}

    def _bot_user(self) -> JSON:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": self.bot_first_name,
            "username": self.bot_username,
        }

    def _m_getMe(self, p: JSON, f: dict[str, JSON]) -> JSON:
        return {
            **self._bot_user(),
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    def _m_logOut(self, p: JSON, f: dict[str, JSON]) -> bool:
        return True

    def _m_close(self, p: JSON, f: dict[str, JSON]) -> bool:
        return True

    def _m_deleteWebhook(self, p: JSON, f: dict[str, JSON]) -> bool:
        with self._cond:
            self._webhook_url = ""
            if p.get("drop_pending_updates") in (True, "true", "True", 1):
                self._updates.clear()
        return True

    def _m_setWebhook(self, p: JSON, f: dict[str, JSON]) -> bool:
        with self._cond:
            self._webhook_url = str(p.get("url", ""))
            if p.get("drop_pending_updates") in (True, "true", "True", 1):
                self._updates.clear()
        return True

    def _m_getWebhookInfo(self, p: JSON, f: dict[str, JSON]) -> JSON:
        with self._cond:
            return {
                "url": self._webhook_url,
                "has_custom_certificate": False,
                "pending_update_count": len(self._updates),
            }

    # getUpdates -----------------------------------------------------------------------------------
    def _deliverable(self, update: JSON) -> bool:
        kind = next((k for k in update if k != "update_id"), "")
        if self._allowed_updates:
            return kind in self._allowed_updates
        return kind not in _NOT_DELIVERED_BY_DEFAULT

    def _m_getUpdates(self, p: JSON, f: dict[str, JSON]) -> list[JSON]:
        try:
            offset = int(p.get("offset") or 0)
            limit = min(max(int(p.get("limit") or 100), 1), 100)
            timeout = min(max(float(p.get("timeout") or 0), 0.0), self.max_poll_timeout)
        except (TypeError, ValueError) as exc:
            raise ApiError(400, f"Bad Request: {exc}") from exc
        allowed = p.get("allowed_updates")
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._webhook_url:
                raise ApiError(
                    409,
                    "Conflict: can't use getUpdates method while webhook is active; "
                    "use deleteWebhook to delete the webhook first",
                )
            self._poll_generation += 1
            generation = self._poll_generation
            self._cond.notify_all()  # an older concurrent poll answers 409
            if isinstance(allowed, list):
                self._allowed_updates = [str(a) for a in allowed] or None
            if offset > 0:
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            elif offset < 0:
                self._updates = self._updates[offset:]
            while True:
                self._updates = [u for u in self._updates if self._deliverable(u)]
                if self._updates or self._stopping:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
                if self._poll_generation != generation:
                    raise _Superseded(
                        409,
                        "Conflict: terminated by other getUpdates request; make sure that "
                        "only one bot instance is running",
                    )
            batch = copy.deepcopy(self._updates[:limit])
            if batch:
                self._delivered_max = max(self._delivered_max, batch[-1]["update_id"])
            return batch

    # messages -------------------------------------------------------------------------------------
    def _chat(self, chat_id: Any) -> JSON:
        """Known chat by id (or @username); unknown numeric ids get a plausible chat."""
        if isinstance(chat_id, str) and chat_id.startswith("@"):
            for chat in self._chats.values():
                if chat.get("username", "").lower() == chat_id[1:].lower():
                    return chat
            raise ApiError(400, "Bad Request: chat not found")
        if chat_id is None or chat_id == "":
            raise ApiError(400, "Bad Request: chat_id is empty")
        try:
            cid = int(chat_id)
        except (TypeError, ValueError) as exc:
            raise ApiError(400, "Bad Request: chat not found") from exc
        if cid not in self._chats:
            if cid > 0:
                self._chats[cid] = {"id": cid, "type": "private", "first_name": "User"}
            else:
                kind = "supergroup" if str(cid).startswith("-100") else "group"
                self._chats[cid] = {"id": cid, "type": kind, "title": "Chat"}
        return self._chats[cid]

    def _new_message_id(self, chat_id: int) -> int:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def _format(self, text: Any, parse_mode: Any, entities: Any) -> tuple[str, list[JSON]]:
        text = "" if text is None else str(text)
        if not parse_mode:
            return text, list(entities or [])
        parser = _PARSERS.get(str(parse_mode).lower())
        if parser is None:
            raise ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")
        try:
            return parser(text)
        except MarkupError as exc:
            if self.reject_markup:
                raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from exc
            return text, []

    def _reply_to(self, chat_id: int, p: JSON) -> JSON | None:
        reply = p.get("reply_parameters")
        target = reply.get("message_id") if isinstance(reply, dict) else None
        target = target if target is not None else p.get("reply_to_message_id")
        if target is None:
            return None
        original = self._messages.get((chat_id, int(target)))
        if original is None:
            return None
        original = copy.deepcopy(original)
        original.pop("reply_to_message", None)
        return original

    def _record_bot_message(self, message: JSON, extras: JSON) -> JSON:
        key = (message["chat"]["id"], message["message_id"])
        self._messages[key] = message
        self._bot_messages.append(key)
        self._extras[key] = extras
        self._cond.notify_all()
        return copy.deepcopy(message)

    def _m_sendMessage(self, p: JSON, f: dict[str, JSON]) -> JSON:
        with self._cond:
            chat = self._chat(p.get("chat_id"))
            text, entities = self._format(p.get("text"), p.get("parse_mode"), p.get("entities"))
            if not text.strip():
                raise ApiError(400, "Bad Request: message text is empty")
            if _u16(text) > _MAX_TEXT:
                raise ApiError(400, "Bad Request: message is too long")
            message: JSON = {
                "message_id": self._new_message_id(chat["id"]),
                "from": self._bot_user(),
                "chat": copy.deepcopy(chat),
                "date": int(time.time()),
                "text": text,
            }
            if entities:
                message["entities"] = entities
            markup = p.get("reply_markup")
            if isinstance(markup, dict) and "inline_keyboard" in markup:
                message["reply_markup"] = markup
            reply_to = self._reply_to(chat["id"], p)
            if reply_to is not None:
                message["reply_to_message"] = reply_to
            extras = {
                "raw_text": p.get("text"),
                "parse_mode": p.get("parse_mode"),
                "reply_markup": markup,
                "edits": 0,
            }
            return self._record_bot_message(message, extras)

    def _editable(self, p: JSON) -> tuple[int, int]:
        if p.get("inline_message_id"):
            raise ApiError(400, "Bad Request: inline messages are not supported by the fake")
        chat = self._chat(p.get("chat_id"))
        key = (chat["id"], int(p.get("message_id") or 0))
        if key not in self._messages or key in self._deleted:
            raise ApiError(400, "Bad Request: message to edit not found")
        if self._messages[key].get("from", {}).get("id") != self.bot_id:
            raise ApiError(400, "Bad Request: message can't be edited")
        return key

    def _m_editMessageText(self, p: JSON, f: dict[str, JSON]) -> JSON:
        with self._cond:
            key = self._editable(p)
            message = self._messages[key]
            text, entities = self._format(p.get("text"), p.get("parse_mode"), p.get("entities"))
            if not text.strip():
                raise ApiError(400, "Bad Request: message text is empty")
            if _u16(text) > _MAX_TEXT:
                raise ApiError(400, "Bad Request: message is too long")
            markup = p.get("reply_markup")
            inline = markup if isinstance(markup, dict) and "inline_keyboard" in markup else None
            if (
                message.get("text") == text
                and message.get("entities", []) == entities
                and message.get("reply_markup") == inline
            ):
                raise ApiError(
                    400,
                    "Bad Request: message is not modified: specified new message content and "
                    "reply markup are exactly the same as a current content and reply markup "
                    "of the message",
                )
            message["text"] = text
            message.pop("entities", None)
            if entities:
                message["entities"] = entities
            message.pop("reply_markup", None)
            if inline is not None:
                message["reply_markup"] = inline
            message["edit_date"] = int(time.time())
            extras = self._extras[key]
            extras.update(raw_text=p.get("text"), parse_mode=p.get("parse_mode"))
            extras["reply_markup"] = markup
            extras["edits"] += 1
            self._cond.notify_all()
            return copy.deepcopy(message)

    def _m_editMessageReplyMarkup(self, p: JSON, f: dict[str, JSON]) -> JSON:
        with self._cond:
            key = self._editable(p)
            message = self._messages[key]
            markup = p.get("reply_markup")
            message.pop("reply_markup", None)
            if isinstance(markup, dict) and markup.get("inline_keyboard"):
                message["reply_markup"] = markup
            message["edit_date"] = int(time.time())
            self._extras[key]["reply_markup"] = markup
            self._cond.notify_all()
            return copy.deepcopy(message)

    def _m_deleteMessage(self, p: JSON, f: dict[str, JSON]) -> bool:
        with self._cond:
            chat = self._chat(p.get("chat_id"))
            key = (chat["id"], int(p.get("message_id") or 0))
            if key not in self._messages or key in self._deleted:
                raise ApiError(400, "Bad Request: message to delete not found")
            self._deleted.add(key)
            self._cond.notify_all()
            return True

    def _m_sendChatAction(self, p: JSON, f: dict[str, JSON]) -> bool:
        with self._cond:
            chat = self._chat(p.get("chat_id"))
            action = p.get("action")
            if not action:
                raise ApiError(400, "Bad Request: wrong parameter action in request")
            self._chat_actions.append((chat["id"], str(action)))
            self._cond.notify_all()
            return True

    def _register_file(self, content: bytes, filename: str | None, mime_type: str | None) -> JSON:
        n = self._next_file
        self._next_file += 1
        file_id = f"BQACAgIAAxkFAAI{n:06d}"
        suffix = "_" + re.sub(r"[^A-Za-z0-9._-]", "_", filename) if filename else ""
        entry = {
            "file_id": file_id,
            "file_unique_id": f"AgAD{n:06d}",
            "file_size": len(content),
            "file_path": f"files/file_{n}{suffix}",
            "content": content,
            "file_name": filename,
            "mime_type": mime_type,
        }
        self._files[file_id] = entry
        return entry

    def _m_sendDocument(self, p: JSON, f: dict[str, JSON]) -> JSON:
        with self._cond:
            chat = self._chat(p.get("chat_id"))
            upload = f.get("document")
            if upload is not None:
                entry = self._register_file(
                    upload["content"], upload["filename"], upload["mime_type"]
                )
            else:
                ref = p.get("document")
                if not ref:
                    raise ApiError(400, "Bad Request: there is no document in the request")
                known = self._files.get(str(ref))
                if known is None:
                    raise ApiError(400, "Bad Request: wrong file identifier/HTTP URL specified")
                entry = known
            caption, entities = self._format(
                p.get("caption"), p.get("parse_mode"), p.get("caption_entities")
            )
            if _u16(caption) > _MAX_CAPTION:
                raise ApiError(400, "Bad Request: message caption is too long")
            document: JSON = {
                "file_id": entry["file_id"],
                "file_unique_id": entry["file_unique_id"],
                "file_size": entry["file_size"],
            }
            if entry["file_name"]:
                document["file_name"] = entry["file_name"]
            if entry["mime_type"]:
                document["mime_type"] = entry["mime_type"]
            message: JSON = {
                "message_id": self._new_message_id(chat["id"]),
                "from": self._bot_user(),
                "chat": copy.deepcopy(chat),
                "date": int(time.time()),
                "document": document,
            }
            if caption:
                message["caption"] = caption
            if entities:
                message["caption_entities"] = entities
            reply_to = self._reply_to(chat["id"], p)
            if reply_to is not None:
                message["reply_to_message"] = reply_to
            self._documents.append(
                {
                    "chat_id": chat["id"],
                    "message_id": message["message_id"],
                    "filename": entry["file_name"],
                    "content": entry["content"],
                    "mime_type": entry["mime_type"],
                    "caption": caption or None,
                }
            )
            extras = {
                "raw_text": p.get("caption"),
                "parse_mode": p.get("parse_mode"),
                "reply_markup": p.get("reply_markup"),
                "edits": 0,
            }
            return self._record_bot_message(message, extras)

    def _m_getFile(self, p: JSON, f: dict[str, JSON]) -> JSON:
        with self._cond:
            entry = self._files.get(str(p.get("file_id")))
            if entry is None:
                raise ApiError(400, "Bad Request: invalid file_id")
            return {k: entry[k] for k in ("file_id", "file_unique_id", "file_size", "file_path")}

    def _file_content(self, token: str, file_path: str) -> bytes | None:
        if token != self.token:
            return None
        with self._cond:
            for entry in self._files.values():
                if entry["file_path"] == file_path:
                    return bytes(entry["content"])
        return None

    @staticmethod
    def _commands_key(p: JSON) -> str:
        scope = p.get("scope") or {"type": "default"}
        return json.dumps([scope, p.get("language_code") or ""], sort_keys=True)

    def _m_setMyCommands(self, p: JSON, f: dict[str, JSON]) -> bool:
        commands = p.get("commands")
        if not isinstance(commands, list):
            raise ApiError(400, "Bad Request: can't parse commands JSON object")
        for command in commands:
            if not re.fullmatch(r"[a-z0-9_]{1,32}", str(command.get("command", ""))):
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            if not 1 <= len(str(command.get("description", ""))) <= 256:
                raise ApiError(400, "Bad Request: command description is invalid")
        with self._cond:
            self._commands[self._commands_key(p)] = copy.deepcopy(commands)
        return True

    def _m_getMyCommands(self, p: JSON, f: dict[str, JSON]) -> list[JSON]:
        with self._cond:
            return copy.deepcopy(self._commands.get(self._commands_key(p), []))

    def _m_deleteMyCommands(self, p: JSON, f: dict[str, JSON]) -> bool:
        with self._cond:
            self._commands.pop(self._commands_key(p), None)
        return True

    def _m_answerCallbackQuery(self, p: JSON, f: dict[str, JSON]) -> bool:
        if not p.get("callback_query_id"):
            raise ApiError(400, "Bad Request: query is too old and response timeout expired")
        with self._cond:
            self._callback_answers.append(dict(p))
            self._cond.notify_all()
        return True

    def _m_getChat(self, p: JSON, f: dict[str, JSON]) -> JSON:
        with self._cond:
            chat = copy.deepcopy(self._chat(p.get("chat_id")))
        chat.update(
            accent_color_id=0,
            max_reaction_count=11,
            accepted_gift_types={
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        )
        return chat

    # -- playing users -----------------------------------------------------------------------------
    def push_update(self, update: JSON) -> JSON:
        """Enqueue an arbitrary Update (``update_id`` is assigned when missing)."""
        update = copy.deepcopy(update)
        with self._cond:
            if "update_id" not in update:
                update["update_id"] = self._next_update_id
            self._next_update_id = max(self._next_update_id, int(update["update_id"])) + 1
            for key in ("message", "edited_message", "channel_post", "edited_channel_post"):
                message = update.get(key)
                if isinstance(message, dict) and "chat" in message and "message_id" in message:
                    chat = message["chat"]
                    self._chats.setdefault(int(chat["id"]), copy.deepcopy(chat))
                    self._messages[(int(chat["id"]), int(message["message_id"]))] = copy.deepcopy(
                        message
                    )
                    nxt = self._next_message_id.get(int(chat["id"]), 1)
                    self._next_message_id[int(chat["id"])] = max(
                        nxt, int(message["message_id"]) + 1
                    )
            self._updates.append(update)
            self._cond.notify_all()
        return copy.deepcopy(update)

    @staticmethod
    def make_user(
        user_id: int = DEFAULT_USER_ID,
        first_name: str = "Alice",
        username: str | None = None,
        *,
        language_code: str | None = "en",
        last_name: str | None = None,
    ) -> JSON:
        user: JSON = {"id": user_id, "is_bot": False, "first_name": first_name}
        if last_name:
            user["last_name"] = last_name
        if username:
            user["username"] = username
        if language_code:
            user["language_code"] = language_code
        return user

    def _make_chat(
        self,
        chat_id: int | None,
        user: JSON,
        chat_type: str,
        chat_title: str | None,
    ) -> JSON:
        if chat_type == "private":
            cid = int(user["id"]) if chat_id is None else int(chat_id)
            chat: JSON = {"id": cid, "type": "private", "first_name": user["first_name"]}
            if user.get("last_name"):
                chat["last_name"] = user["last_name"]
            if user.get("username"):
                chat["username"] = user["username"]
        else:
            cid = self.DEFAULT_GROUP_ID if chat_id is None else int(chat_id)
            chat = {"id": cid, "type": chat_type, "title": chat_title or "Test group"}
        with self._cond:
            self._chats[cid] = chat
        return copy.deepcopy(chat)

    def _user_message(
        self,
        chat_id: int | None,
        user_id: int,
        first_name: str,
        username: str | None,
        chat_type: str,
        chat_title: str | None,
        reply_to_bot_message_id: int | None,
        body: JSON,
    ) -> JSON:
        user = self.make_user(user_id, first_name, username)
        chat = self._make_chat(chat_id, user, chat_type, chat_title)
        with self._cond:
            message: JSON = {
                "message_id": self._new_message_id(chat["id"]),
                "from": user,
                "chat": chat,
                "date": int(time.time()),
                **body,
            }
            if reply_to_bot_message_id is not None:
                original = self._messages.get((chat["id"], int(reply_to_bot_message_id)))
                if original is None:
                    original = {
                        "message_id": int(reply_to_bot_message_id),
                        "from": self._bot_user(),
                        "chat": copy.deepcopy(chat),
                        "date": int(time.time()),
                        "text": "…",
                    }
                original = copy.deepcopy(original)
                original.pop("reply_to_message", None)
                message["reply_to_message"] = original
            return message

    def text_entities(self, text: str) -> list[JSON]:
        """What Telegram would detect: a leading /command (with @bot suffix) and @mentions."""
        entities: list[JSON] = []
        command_end = 0
        command = re.match(r"/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?", text)
        if command:
            command_end = command.end()
            entities.append({"type": "bot_command", "offset": 0, "length": _u16(command.group())})
        for mention in re.finditer(r"(?<![\w@])@[A-Za-z][A-Za-z0-9_]{3,31}\b", text):
            if mention.start() < command_end:
                continue
            entities.append(
                {
                    "type": "mention",
                    "offset": _u16(text[: mention.start()]),
                    "length": _u16(mention.group()),
                }
            )
        return entities

    def user_sends(
        self,
        text: str,
        chat_id: int | None = None,
        user_id: int = DEFAULT_USER_ID,
        first_name: str = "Alice",
        username: str | None = None,
        chat_type: str = "private",
        chat_title: str | None = None,
        reply_to_bot_message_id: int | None = None,
    ) -> JSON:
        """Enqueue a text message from a user; returns the Update. ``chat_id`` defaults to the
        user's id in a private chat and to DEFAULT_GROUP_ID otherwise."""
        body: JSON = {"text": text}
        entities = self.text_entities(text)
        if entities:
            body["entities"] = entities
        message = self._user_message(
            chat_id,
            user_id,
            first_name,
            username,
            chat_type,
            chat_title,
            reply_to_bot_message_id,
            body,
        )
        return self.push_update({"message": message})

    def _media(
        self,
        body: JSON,
        chat_id: int | None,
        user_id: int,
        first_name: str,
        username: str | None,
        chat_type: str,
        chat_title: str | None,
        caption: str | None = None,
    ) -> JSON:
        if caption:
            body["caption"] = caption
            entities = self.text_entities(caption)
            if entities:
                body["caption_entities"] = entities
        message = self._user_message(
            chat_id, user_id, first_name, username, chat_type, chat_title, None, body
        )
        return self.push_update({"message": message})

    def _user_file(self, content: bytes, filename: str | None, mime_type: str | None) -> JSON:
        with self._cond:
            return self._register_file(content, filename, mime_type)

    def user_sends_sticker(
        self,
        emoji: str = "👍",
        chat_id: int | None = None,
        user_id: int = DEFAULT_USER_ID,
        first_name: str = "Alice",
        username: str | None = None,
        chat_type: str = "private",
        chat_title: str | None = None,
    ) -> JSON:
        entry = self._user_file(b"RIFF....WEBP", "sticker.webp", "image/webp")
        sticker = {
            "file_id": entry["file_id"],
            "file_unique_id": entry["file_unique_id"],
            "type": "regular",
            "width": 512,
            "height": 512,
            "is_animated": False,
            "is_video": False,
            "emoji": emoji,
            "set_name": "TestStickers",
            "file_size": entry["file_size"],
        }
        return self._media(
            {"sticker": sticker}, chat_id, user_id, first_name, username, chat_type, chat_title
        )

    def user_sends_photo(
        self,
        caption: str | None = None,
        content: bytes = b"\xff\xd8\xff\xe0fake-jpeg",
        chat_id: int | None = None,
        user_id: int = DEFAULT_USER_ID,
        first_name: str = "Alice",
        username: str | None = None,
        chat_type: str = "private",
        chat_title: str | None = None,
    ) -> JSON:
        entry = self._user_file(content, None, "image/jpeg")
        photo = [
            {
                "file_id": entry["file_id"],
                "file_unique_id": entry["file_unique_id"],
                "width": w,
                "height": w * 3 // 4,
                "file_size": entry["file_size"],
            }
            for w in (90, 320, 800)
        ]
        return self._media(
            {"photo": photo},
            chat_id,
            user_id,
            first_name,
            username,
            chat_type,
            chat_title,
            caption,
        )

    def user_sends_voice(
        self,
        duration: int = 2,
        content: bytes = b"OggS\x00fake-opus",
        chat_id: int | None = None,
        user_id: int = DEFAULT_USER_ID,
        first_name: str = "Alice",
        username: str | None = None,
        chat_type: str = "private",
        chat_title: str | None = None,
    ) -> JSON:
        entry = self._user_file(content, None, "audio/ogg")
        voice = {
            "file_id": entry["file_id"],
            "file_unique_id": entry["file_unique_id"],
            "duration": duration,
            "mime_type": "audio/ogg",
            "file_size": entry["file_size"],
        }
        return self._media(
            {"voice": voice}, chat_id, user_id, first_name, username, chat_type, chat_title
        )

    def user_sends_document(
        self,
        filename: str = "notes.txt",
        content: bytes = b"hello",
        mime_type: str = "text/plain",
        caption: str | None = None,
        chat_id: int | None = None,
        user_id: int = DEFAULT_USER_ID,
        first_name: str = "Alice",
        username: str | None = None,
        chat_type: str = "private",
        chat_title: str | None = None,
    ) -> JSON:
        """The bot can download ``content`` with get_file() + download_as_bytearray()."""
        entry = self._user_file(content, filename, mime_type)
        document = {
            "file_id": entry["file_id"],
            "file_unique_id": entry["file_unique_id"],
            "file_name": filename,
            "mime_type": mime_type,
            "file_size": entry["file_size"],
        }
        return self._media(
            {"document": document},
            chat_id,
            user_id,
            first_name,
            username,
            chat_type,
            chat_title,
            caption,
        )

    def user_edits(self, original: JSON, new_text: str) -> JSON:
        """Enqueue an ``edited_message`` for an earlier user message (Update or Message dict)."""
        message = copy.deepcopy(original.get("message", original))
        message["text"] = new_text
        message.pop("entities", None)
        entities = self.text_entities(new_text)
        if entities:
            message["entities"] = entities
        message["edit_date"] = int(time.time())
        return self.push_update({"edited_message": message})

    def user_clicks(
        self,
        data: str,
        message: JSON | int,
        chat_id: int | None = None,
        user_id: int = DEFAULT_USER_ID,
        first_name: str = "Alice",
        username: str | None = None,
    ) -> JSON:
        """Enqueue a ``callback_query`` for an inline button on a bot message (dict or id)."""
        if isinstance(message, int):
            cid = user_id if chat_id is None else chat_id
            with self._cond:
                found = self._messages.get((cid, message))
            if found is None:
                raise KeyError(f"no message {message} in chat {cid}")
            message = found
        with self._cond:
            query_id = str(8_000_000 + self._next_update_id)
        query = {
            "id": query_id,
            "from": self.make_user(user_id, first_name, username),
            "message": copy.deepcopy(message),
            "chat_instance": f"ci{message['chat']['id']}",
            "data": data,
        }
        return self.push_update({"callback_query": query})

    def channel_post(
        self, text: str, chat_id: int = -1009876543210, chat_title: str = "Test channel"
    ) -> JSON:
        chat = {"id": chat_id, "type": "channel", "title": chat_title}
        with self._cond:
            self._chats[chat_id] = chat
            message = {
                "message_id": self._new_message_id(chat_id),
                "sender_chat": copy.deepcopy(chat),
                "chat": copy.deepcopy(chat),
                "date": int(time.time()),
                "text": text,
            }
        return self.push_update({"channel_post": message})

    def my_chat_member(
        self,
        chat_id: int = DEFAULT_GROUP_ID,
        old_status: str = "left",
        new_status: str = "member",
        chat_type: str = "group",
        chat_title: str | None = "Test group",
        by_user_id: int = DEFAULT_USER_ID,
        by_first_name: str = "Alice",
    ) -> JSON:
        """A ``my_chat_member`` update about the bot (statuses: left, member, kicked, ...)."""
        by = self.make_user(by_user_id, by_first_name)
        chat = self._make_chat(chat_id, by, chat_type, chat_title)
        bot = self._bot_user()

        def member(status: str) -> JSON:
            entry: JSON = {"status": status, "user": bot}
            if status == "kicked":
                entry["until_date"] = 0
            return entry

        update = {
            "chat": chat,
            "from": by,
            "date": int(time.time()),
            "old_chat_member": member(old_status),
            "new_chat_member": member(new_status),
        }
        return self.push_update({"my_chat_member": update})

    def bot_added_to_group(
        self,
        chat_id: int = DEFAULT_GROUP_ID,
        chat_title: str = "Test group",
        chat_type: str = "group",
        by_user_id: int = DEFAULT_USER_ID,
        by_first_name: str = "Alice",
    ) -> JSON:
        return self.my_chat_member(
            chat_id, "left", "member", chat_type, chat_title, by_user_id, by_first_name
        )

    # -- recordings --------------------------------------------------------------------------------
    @property
    def calls(self) -> list[tuple[str, JSON]]:
        """(method, params) of every request except getUpdates, retries and failures included.
        Uploaded files appear as params[name] = {"filename", "content", "mime_type"}."""
        with self._cond:
            return copy.deepcopy(self._calls)

    def calls_to(self, method: str) -> list[JSON]:
        name = self._canonical.get(method.lower(), method)
        return [params for m, params in self.calls if m == name]

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
    def callback_answers(self) -> list[JSON]:
        with self._cond:
            return copy.deepcopy(self._callback_answers)

    @property
    def pending_updates(self) -> list[JSON]:
        """Updates not yet confirmed by the bot (via a later getUpdates offset)."""
        with self._cond:
            return copy.deepcopy(self._updates)

    def commands(self, scope: JSON | None = None, language_code: str = "") -> list[JSON]:
        with self._cond:
            key = self._commands_key({"scope": scope, "language_code": language_code})
            return copy.deepcopy(self._commands.get(key, []))

    def sent_messages(self, chat_id: int | None = None) -> list[JSON]:
        """Messages the bot sent (in order, deleted ones left out), as Telegram holds them now
        (after edits; text already parsed from parse_mode), plus the keys ``raw_text``,
        ``parse_mode``, ``reply_markup`` (as sent, any kind) and ``edits``."""
        with self._cond:
            return [
                {**copy.deepcopy(self._messages[key]), **copy.deepcopy(self._extras[key])}
                for key in self._bot_messages
                if key not in self._deleted and (chat_id is None or key[0] == chat_id)
            ]

    def texts(self, chat_id: int | None = None) -> list[str]:
        """Text (or caption) of every message the bot sent."""
        return [str(m.get("text", m.get("caption", ""))) for m in self.sent_messages(chat_id)]

    def documents(self, chat_id: int | None = None) -> list[JSON]:
        """Documents the bot sent: {chat_id, message_id, filename, content, mime_type, caption}."""
        with self._cond:
            return [
                copy.deepcopy(d)
                for d in self._documents
                if chat_id is None or d["chat_id"] == chat_id
            ]

    # -- waiting -----------------------------------------------------------------------------------
    def _describe(self) -> str:
        with self._cond:
            calls = [(m, {k: repr(v)[:120] for k, v in p.items()}) for m, p in self._calls[-8:]]
            errors = [(m, status, text) for m, _, status, text in self._errors[-4:]]
            return f"last calls: {calls!r}; errors: {errors!r}"

    def _check(
        self, predicate: Callable[[], T | None], deadline: float, timeout: float, what: str
    ) -> tuple[T | None, float]:
        """One poll: the predicate's value if truthy, else the time left (WaitTimeout at 0)."""
        result = predicate()
        if result:
            return result, 0.0
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(
                f"timed out after {timeout}s waiting for {what or predicate!r}; " + self._describe()
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

    def _messages_after(self, chat_id: int | None, count: int, after: Any) -> Callable[[], Any]:
        after_id = 0
        if isinstance(after, dict):
            message = next(
                (after[k] for k in ("message", "edited_message", "channel_post") if k in after),
                after,
            )
            after_id = int(message.get("message_id", 0))
            if chat_id is None and "chat" in message:
                chat_id = int(message["chat"]["id"])
        elif after is not None:
            after_id = int(after)

        def ready() -> list[JSON] | None:
            found = [m for m in self.sent_messages(chat_id) if m["message_id"] > after_id]
            return found if len(found) >= count else None

        return ready

    def wait_messages(
        self,
        chat_id: int | None = None,
        count: int = 1,
        timeout: float = 10.0,
        *,
        after: JSON | int | None = None,
    ) -> list[JSON]:
        """Block until the bot has sent >= ``count`` messages to ``chat_id`` (any chat if None);
        returns them all. ``after``: an Update/Message dict (e.g. what user_sends returned; its
        chat is used when chat_id is None) or a message_id; only later messages count."""
        what = f"{count} message(s) to chat {chat_id} after {after!r}"
        return self.wait_for(self._messages_after(chat_id, count, after), timeout, what)

    async def await_messages(
        self,
        chat_id: int | None = None,
        count: int = 1,
        timeout: float = 10.0,
        *,
        after: JSON | int | None = None,
    ) -> list[JSON]:
        what = f"{count} message(s) to chat {chat_id} after {after!r}"
        return await self.await_for(self._messages_after(chat_id, count, after), timeout, what)

    def wait_documents(
        self, chat_id: int | None = None, count: int = 1, timeout: float = 10.0
    ) -> list[JSON]:
        def ready() -> list[JSON] | None:
            found = self.documents(chat_id)
            return found if len(found) >= count else None

        return self.wait_for(ready, timeout, f"{count} document(s) to chat {chat_id}")

    async def await_documents(
        self, chat_id: int | None = None, count: int = 1, timeout: float = 10.0
    ) -> list[JSON]:
        def ready() -> list[JSON] | None:
            found = self.documents(chat_id)
            return found if len(found) >= count else None

        return await self.await_for(ready, timeout, f"{count} document(s) to chat {chat_id}")

    def wait_calls(self, method: str, count: int = 1, timeout: float = 10.0) -> list[JSON]:
        def ready() -> list[JSON] | None:
            found = self.calls_to(method)
            return found if len(found) >= count else None

        return self.wait_for(ready, timeout, f"{count} call(s) to {method}")

    async def await_calls(self, method: str, count: int = 1, timeout: float = 10.0) -> list[JSON]:
        def ready() -> list[JSON] | None:
            found = self.calls_to(method)
            return found if len(found) >= count else None

        return await self.await_for(ready, timeout, f"{count} call(s) to {method}")

    def wait_consumed(self, timeout: float = 10.0) -> None:
        """Block until the bot has fetched every queued update (it may still be handling them;
        a fetched update is confirmed only by the bot's next getUpdates)."""

        def ready() -> bool:
            with self._cond:
                return not self._updates or self._delivered_max >= self._updates[-1]["update_id"]

        self.wait_for(ready, timeout, "the bot to consume all updates")
