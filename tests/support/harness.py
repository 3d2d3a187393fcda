"""The real Telegram Application over the recording Bot API (tests/support/recording.py), with
an engine over a FakeLLM and a temp SQLite file, driven with real Update objects: each message or
button tap returns the Bot API calls it caused. `Harnesses` builds them in a test's folder and
shuts them all down after it (tests/conftest.py's `make_harness`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from telegram import Update

from bot.telegram import build_application
from memora.engine import Engine, EngineConfig
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import FakeLLM
from tests.support.recording import (
    ALICE,
    BOT_USER,
    GROUP,
    NAMES,
    Call,
    RecordingRequest,
    make_settings,
)


class Harness:
    """Drives the Application with real Update objects; returns the calls each one caused."""

    def __init__(self, app: Any, req: RecordingRequest, engine: Engine, llm: FakeLLM) -> None:
        self.app, self.req, self.engine, self.llm = app, req, engine, llm
        self._update_id = 0
        self._message_id = 0

    def message(
        self,
        text: str | None = None,
        *,
        user: int = ALICE,
        group: bool = False,
        reply_to_bot: bool = False,
        reply_to_user: int | None = None,
        language: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        self._message_id += 1
        sender: dict[str, Any] = {"id": user, "is_bot": False, "first_name": NAMES[user]}
        if language is not None:  # the app's language, as Telegram sends it ("zh-TW")
            sender["language_code"] = language
        chat: dict[str, Any] = (
            {"id": GROUP, "type": "supergroup", "title": "Study group"}
            if group
            else {"id": user, "type": "private", "first_name": NAMES[user]}
        )
        msg: dict[str, Any] = {
            "message_id": self._message_id,
            "date": int(time.time()),
            "chat": chat,
            "from": sender,
            **extra,
        }
        if text is not None:
            msg["text"] = text
            if entities := FakeTelegram.text_entities(text):
                msg["entities"] = entities
        if reply_to_bot or reply_to_user:
            author = BOT_USER if reply_to_bot else {"id": reply_to_user, "is_bot": False}
            author = {**author, "first_name": author.get("first_name", "Someone")}
            msg["reply_to_message"] = {
                "message_id": 1,
                "date": int(time.time()),
                "chat": chat,
                "from": author,
                "text": "earlier",
            }
        return msg

    async def push(self, kind: str, payload: dict[str, Any]) -> list[Call]:
        self._update_id += 1
        update = Update.de_json({"update_id": self._update_id, kind: payload}, self.app.bot)
        before = len(self.req.calls)
        await self.app.process_update(update)
        return self.req.calls[before:]

    async def send(self, text: str, **kw: Any) -> list[Call]:
        return await self.push("message", self.message(text, **kw))

    async def say(self, text: str, **kw: Any) -> list[str]:
        """The texts the bot sent back for one message."""
        return [str(c.params["text"]) for c in await self.send(text, **kw) if "text" in c.params]

    async def tap(self, shown: Call, data: str, user: int = ALICE) -> list[Call]:
        """A tap by `user` on a button with `data` under the message that `shown` sent."""
        chat_id = int(shown.params["chat_id"])
        message = {
            "message_id": 7,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "from": BOT_USER,
            "text": shown.params["text"],
        }
        self.req.shown[7] = (chat_id, str(shown.params["text"]), None)
        query = {
            "id": f"q{self._update_id}",
            "from": {"id": user, "is_bot": False, "first_name": NAMES[user]},
            "chat_instance": "1",
            "message": message,
            "data": data,
        }
        return await self.push("callback_query", query)

    async def history(self, chat_id: int) -> list[tuple[str, str]]:
        await self.engine.drain()
        return [(m.role, m.content) for m in await self.engine.db.chats.messages(chat_id)]


class Harnesses:
    """Builds harnesses in one folder (a test's tmp_path) and shuts every one down."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[tuple[Any, Engine, Database]] = []

    async def make(
        self,
        *,
        llm: FakeLLM | None = None,
        store: Any = None,
        **telegram: Any,
    ) -> Harness:
        """A harness over its own database; `telegram` are [telegram] settings."""
        db = Database(self.folder / f"h{len(self.started)}.sqlite3")
        await db.open()
        llm = llm or FakeLLM()
        engine = Engine(
            db=db,
            llm=llm,
            counter=LocalTokenCounter(),
            store=store,
            config=EngineConfig(max_input_tokens=4000, extraction_enabled=False),
        )
        req = RecordingRequest()
        app = build_application(make_settings(**telegram), engine, request=req)
        await app.initialize()
        assert app.post_init is not None
        await app.post_init(app)
        self.started.append((app, engine, db))
        return Harness(app, req, engine, llm)

    async def close(self) -> None:
        for app, engine, db in self.started:
            await app.shutdown()
            assert app.post_shutdown is not None
            await app.post_shutdown(app)
            await engine.drain()
            await db.close()
