"""Under load the bot stays within Telegram's limits and replies come first (issue 7 item 9):
a burst from many chats through the real application and the fake Bot API over HTTP never puts
more than 30 requests in any one second, and "typing…" gives way to replies. How fast the burst
is answered is a figure, measured by the throughput benchmark (docs), not asserted here."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bot.telegram import build_application
from bot.telegram.limits import ReplyFirstRateLimiter
from memora.config import Settings, TelegramConfig
from memora.engine import Engine, EngineConfig
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import FakeLLM

CHATS = 45


async def test_a_burst_never_goes_over_30_requests_a_second(tmp_path: Path) -> None:
    db = Database(tmp_path / "memora.sqlite3")
    await db.open()
    engine = Engine(
        db=db,
        llm=FakeLLM(delay=0.2),
        counter=LocalTokenCounter(),
        config=EngineConfig(max_input_tokens=4000, extraction_enabled=False),
    )
    with FakeTelegram() as tg:
        cfg = {"token": tg.token, "base_url": tg.base_url, "base_file_url": tg.base_file_url}
        app: Any = build_application(Settings(telegram=TelegramConfig(**cfg)), engine)
        async with app:
            await app.post_init(app)
            await app.start()
            await app.updater.start_polling(timeout=1, poll_interval=0)
            for user in range(2000, 2000 + CHATS):
                tg.user_sends(f"hello from {user}", user_id=user)
            await tg.await_for(lambda: len(tg.sent_messages()) >= CHATS, 120, "every reply")
            await app.updater.stop()
            await app.stop()
            await app.post_shutdown(app)
        assert tg.max_per_second() <= 30  # every kind of request, chat actions included
        assert len(tg.calls_to("sendChatAction")) < CHATS  # typing gave way to replies
    await engine.drain()
    await db.close()


async def test_drafts_never_wait_for_the_message_budget() -> None:
    """The bot's limiter spends its ~29 messages a second on messages; drafts go at once."""
    limiter = ReplyFirstRateLimiter()
    sent: list[str] = []

    async def call(endpoint: str) -> bool:
        sent.append(endpoint)
        return True

    async def request(endpoint: str) -> object:
        return await limiter.process_request(call, (endpoint,), {}, endpoint, {"chat_id": 1}, None)

    await asyncio.gather(*(request("sendMessage") for _ in range(10)))  # ~0.3 s of budget
    started = time.monotonic()

    async def ten_messages() -> None:
        await asyncio.gather(*(request("sendMessage") for _ in range(10)))

    messages = asyncio.create_task(ten_messages())
    await asyncio.sleep(0)
    await request("sendMessageDraft")
    assert time.monotonic() - started < 0.1  # not queued behind the 10 messages
    assert "sendMessageDraft" in sent and not messages.done()
    await messages
