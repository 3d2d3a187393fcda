"""A password typed in a message never reaches a file, however the bot runs (issue 28).

The real `memora run` process against the fake Telegram and OpenAI servers: a learner sends a
password; with the bot still running, every file under data_dir (SQLite and its WAL, Chroma's
files) is searched for it — in polling mode, in webhook mode, and after a kill -9 while the
message waits in the durable inbox (then again once the restarted bot has answered it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memora.privacy.secretfilter import MASK
from tests.support.bot import WAIT, BotProcess, WebhookBot, ask
from tests.support.disk import files_holding
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram

pytestmark = pytest.mark.slow

SECRET = "hunter2xyzQ"
MESSAGE = f"My password is {SECRET}, please don't forget it."


def secret_anywhere(tg: FakeTelegram, llm: FakeOpenAI, data: Path) -> list[str]:
    """Where the secret went: files under data_dir, requests to the model, Bot API calls."""
    places = files_holding(data, SECRET)
    places += [f"model request {r.kind}" for r in llm.requests if SECRET in str(r.body)]
    places += [f"Bot API {c[0]}" for c in tg.calls if SECRET in str(c)]
    return places


def test_polling_keeps_no_secret_on_disk(
    tg: FakeTelegram, openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    llm = openai_server
    bot = BotProcess(tg, llm, tmp_path / "data", tmp_path / "bot.log")
    bot.start()
    try:
        answer = ask(tg, MESSAGE)
        assert answer == f"Echo: My password is {MASK}, please don't forget it."
        time.sleep(2)  # the after-reply work (extraction, summary) has run meanwhile
        assert llm.requests_of("structured"), "the extraction call ran"
        assert secret_anywhere(tg, llm, tmp_path / "data") == []
        assert MASK in ask(tg, "/history")
    finally:
        assert bot.stop() == 0, bot.output()
    assert secret_anywhere(tg, llm, tmp_path / "data") == []
    assert SECRET not in bot.output()


def test_webhook_keeps_no_secret_on_disk(tmp_path: Path) -> None:
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        bot = WebhookBot(tg, llm, tmp_path / "data", tmp_path / "bot.log")
        bot.start()
        try:
            assert bot.ask(MESSAGE) == f"Echo: My password is {MASK}, please don't forget it."
            time.sleep(2)
            assert secret_anywhere(tg, llm, tmp_path / "data") == []
        finally:
            bot.stop()
        assert SECRET not in bot.output()


def test_a_kill_with_the_secret_in_the_inbox_leaves_none_on_disk(
    tg: FakeTelegram, openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    llm = openai_server
    data = tmp_path / "data"
    bot = BotProcess(tg, llm, data, tmp_path / "bot.log")
    bot.start()
    llm.kind_latency["reply"] = 30.0  # the turn is under way when the process dies
    update = tg.user_sends(MESSAGE)
    tg.wait_for(lambda: llm.requests_of("reply"), WAIT, "the reply request")
    assert bot.proc is not None
    bot.proc.kill()  # SIGKILL: no shutdown, the message still pending in the inbox
    bot.proc.wait()
    bot.proc = None
    assert tg.sent_messages(FakeTelegram.DEFAULT_USER_ID) == []
    assert secret_anywhere(tg, llm, data) == []

    llm.kind_latency.clear()
    bot.start()  # the inbox hands the (masked) message to the new process
    try:
        (first, *_) = tg.wait_messages(count=1, after=update, timeout=WAIT)
        assert first["text"] == f"Echo: My password is {MASK}, please don't forget it."
        time.sleep(2)
        assert secret_anywhere(tg, llm, data) == []
    finally:
        assert bot.stop() == 0, bot.output()
