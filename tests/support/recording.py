"""A Bot API that records: the HTTP layer of a real telegram.Bot that keeps every call and
answers with canned Bot API JSON as Telegram would, and the settings of a bot over it."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from telegram.request import BaseRequest, RequestData

from bot.telegram.render import html_to_plain
from memora.config import Settings, TelegramConfig

TOKEN = "123456:SECRET-token-value"
BOT_ID = 123456
BOT_NAME = "memora_test_bot"
ALICE, BOB, ADMIN = 1001, 1002, 42
GROUP = -100555
NAMES = {ALICE: "Alice", BOB: "Bob", ADMIN: "Ada"}
BOT_USER = {"id": BOT_ID, "is_bot": True, "first_name": "Memora", "username": BOT_NAME}


# -- a Bot API that records ------------------------------------------------------------------
@dataclass
class Call:
    method: str
    params: dict[str, Any]
    files: dict[str, Any] = field(default_factory=dict)


class RecordingRequest(BaseRequest):
    """The HTTP layer of the Bot: records each call and answers like Telegram would."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.reject_html = False  # answer 400 "can't parse entities" to any parse_mode=HTML
        self._next_id = 500
        # What each chat shows now: message_id → (chat_id, text, parse_mode), deletions applied.
        self.shown: dict[int, tuple[int, str, str | None]] = {}
        self._failures: dict[str, list[str]] = {}

    def fail(self, method: str, description: str, times: int = 1) -> None:
        """Answer the next `times` calls of `method` with a 400 and this description."""
        self._failures.setdefault(method, []).extend([description] * times)

    @staticmethod
    def _error(description: str) -> tuple[int, bytes]:
        body = {"ok": False, "error_code": 400, "description": description}
        return 400, json.dumps(body).encode()

    @staticmethod
    def rendered(text: str, parse_mode: str | None) -> tuple[str, list[str]]:
        """What the user sees: the text and its formatting (what "not modified" compares)."""
        if parse_mode == "HTML":
            return html_to_plain(text), re.findall(r"<[^>]+>", text)
        return text, []

    def chat_view(self, chat_id: int) -> list[tuple[str, list[str]]]:
        """The bot's messages in a chat as the user sees them now, oldest first."""
        return [
            self.rendered(text, mode)
            for _, (chat, text, mode) in sorted(self.shown.items())
            if chat == chat_id
        ]

    @property
    def read_timeout(self) -> float | None:
        return 5.0

    async def initialize(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass

    def _message(self, chat_id: int, **body: Any) -> dict[str, Any]:
        self._next_id += 1
        chat_type = "private" if chat_id > 0 else "supergroup"
        return {
            "message_id": self._next_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": chat_type},
            "from": BOT_USER,
            **body,
        }

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = None,
        write_timeout: Any = None,
        connect_timeout: Any = None,
        pool_timeout: Any = None,
    ) -> tuple[int, bytes]:
        name = url.rsplit("/", 1)[-1]
        params: dict[str, Any] = dict(request_data.parameters) if request_data else {}
        files = dict(request_data.multipart_data) if request_data else {}
        self.calls.append(Call(name, params, files))
        if self._failures.get(name):
            return self._error(self._failures[name].pop(0))
        result: Any = True
        html = params.get("parse_mode") == "HTML"
        if name == "getMe":
            result = {**BOT_USER, "can_join_groups": True, "can_read_all_group_messages": False}
        elif name == "sendMessage":
            if self.reject_html and html:
                return self._error("Bad Request: can't parse entities: unsupported start tag")
            result = self._message(int(params["chat_id"]), text=params["text"])
            self.shown[result["message_id"]] = (
                int(params["chat_id"]),
                str(params["text"]),
                params.get("parse_mode"),
            )
        elif name == "editMessageText":
            message_id, chat_id = int(params["message_id"]), int(params["chat_id"])
            if message_id not in self.shown:
                return self._error("Bad Request: message to edit not found")
            if self.reject_html and html:
                return self._error("Bad Request: can't parse entities: unsupported start tag")
            _, text, mode = self.shown[message_id]
            now = (str(params["text"]), params.get("parse_mode"))
            if self.rendered(text, mode) == self.rendered(*now):
                return self._error(
                    "Bad Request: message is not modified: specified new message content and "
                    "reply markup are exactly the same as a current content and reply markup"
                )
            self.shown[message_id] = (chat_id, *now)
            result = {**self._message(chat_id, text=now[0]), "message_id": message_id}
        elif name == "sendMessageDraft":  # Bot API 9: private chats, a non-zero draft id
            if int(params["chat_id"]) <= 0:
                return self._error("Bad Request: message drafts can be sent to private chats only")
            if not int(params.get("draft_id") or 0):
                return self._error("Bad Request: draft_id must be non-zero")
        elif name == "deleteMessage":
            if self.shown.pop(int(params["message_id"]), None) is None:
                return self._error("Bad Request: message to delete not found")
        elif name == "sendDocument":
            doc = {"file_id": "f1", "file_unique_id": "u1", "file_name": "x"}
            result = self._message(int(params["chat_id"]), document=doc)
        elif name == "sendPhoto":  # /progress
            photo = [{"file_id": "p1", "file_unique_id": "u1", "width": 800, "height": 550}]
            result = self._message(int(params["chat_id"]), photo=photo)
        return 200, json.dumps({"ok": True, "result": result}).encode()

    # helpers for assertions
    def of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def texts(self) -> list[str]:
        return [str(c.params["text"]) for c in self.of("sendMessage")]


def make_settings(**telegram: Any) -> Settings:
    cfg = {"token": TOKEN, "admin_ids": [ADMIN], **telegram}
    return Settings(telegram=TelegramConfig(**cfg))
