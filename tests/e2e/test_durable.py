"""Nothing lost: the durable inbox and outbox, against the real `memora run` process.

- kill -9 while a chat's messages wait: every message Telegram was told we received is answered
  after the restart, once, in order (issue 7 item 1);
- a reply Telegram will not take yet (ten 429s in a row, an outage across a restart) is kept and
  delivered later, and the history knows when it was (issue 7 item 2).
"""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.telegram.handlers.text import NOT_TEXT
from tests.support.bot import ALICE, USER, WAIT, BotProcess, WebhookBot, bot_over_fakes
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram

pytestmark = pytest.mark.slow


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[BotProcess]:
    with bot_over_fakes(tmp_path) as (_tg, _llm, process):
        process.env["MEMORA_MEMORY__MAX_RECENT_TURNS"] = "10"  # no summaries in the way
        yield process
        if process.proc is not None:
            assert process.stop() == 0, process.output()


def kill9(bot: BotProcess) -> None:
    assert bot.proc is not None
    bot.proc.send_signal(signal.SIGKILL)
    bot.proc.wait(timeout=10)
    bot.proc = None


def turns(bot: BotProcess) -> list[tuple[int, str | None]]:
    """(update_id, delivered_at) of every stored turn, oldest first."""
    con = sqlite3.connect(Path(bot.env["MEMORA_STORAGE__DATA_DIR"]) / "memora.sqlite3")
    try:
        return con.execute("SELECT update_id, delivered_at FROM turns ORDER BY id").fetchall()
    finally:
        con.close()


def test_kill_9_with_messages_waiting_loses_none(bot: BotProcess) -> None:
    """The issue's scenario: five messages 50 ms apart, a 1 s model, kill -9 while the second is
    with the model (the issue killed after 2.5 s: under load that could land between Telegram
    taking a reply and the outbox marking it sent, the one window where a kill -9 sends a reply
    twice, as no Bot API call can be made idempotent)."""
    bot.llm.kind_latency["reply"] = 1.0
    bot.start()
    sent = []
    for n in range(1, 6):
        sent.append(bot.tg.user_sends(f"message {n}"))
        time.sleep(0.05)
    # The chat's turns run in order: the model asked about message 2 means message 1's answer
    # is sent and marked sent, and message 2's is a second away.
    bot.tg.wait_for(lambda: len(bot.llm.requests_of("reply")) >= 2, WAIT, "the second turn")
    time.sleep(0.2)
    kill9(bot)
    before = bot.tg.texts(ALICE)
    assert len(before) < 5, "the kill came too late to test anything"
    bot.start()
    expected = [f"Echo: message {n}" for n in range(1, 6)]
    bot.tg.wait_for(lambda: len(bot.tg.texts(ALICE)) >= 5, WAIT, "every message answered")
    time.sleep(1.0)  # room for a duplicate to show up
    assert bot.tg.texts(ALICE) == expected, bot.output()
    stored = bot.tg.wait_for(
        lambda: (t := turns(bot)) and all(d for _, d in t) and t, WAIT, "every turn delivered"
    )
    assert [u for u, _ in stored] == [s["update_id"] for s in sent]  # one turn per update


def test_ten_429s_in_a_row_lose_nothing(bot: BotProcess) -> None:
    bot.start()
    bot.tg.fail_next("sendMessage", 10, retry_after=1)
    bot.tg.user_sends("Is this kept?")
    (reply,) = bot.tg.wait_messages(ALICE, timeout=90)
    assert reply["text"] == "Echo: Is this kept?"
    assert sum(1 for m, _, status, _ in bot.tg.errors if status == 429) == 10
    time.sleep(1.0)
    assert bot.tg.texts(ALICE) == ["Echo: Is this kept?"]  # no error notice, no duplicate
    bot.tg.wait_for(lambda: turns(bot)[0][1], WAIT, "the turn marked delivered")


def test_a_reply_kept_through_an_outage_is_delivered_after_a_restart(bot: BotProcess) -> None:
    bot.start()
    bot.tg.fail_next("sendMessage", 10_000, status=502)
    bot.tg.user_sends("Telegram is down")
    bot.tg.wait_for(lambda: turns(bot), WAIT, "the turn to be stored")
    bot.tg.wait_for(lambda: len(bot.tg.errors) >= 2, WAIT, "a few failed sends")
    ((_, delivered),) = turns(bot)
    assert delivered is None  # history knows it has not reached the learner
    kill9(bot)
    bot.tg.stop_failing()
    bot.start()
    (reply,) = bot.tg.wait_messages(ALICE, timeout=WAIT)
    assert reply["text"] == "Echo: Telegram is down"
    assert len(bot.llm.requests_of("reply")) == 1  # answered from what was kept, not again
    bot.tg.wait_for(lambda: turns(bot)[0][1], WAIT, "the turn marked delivered")


def test_short_notices_kept_through_an_outage_arrive_once_in_order_after_a_restart(
    bot: BotProcess,
) -> None:
    """A sticker and an unknown command get short notices, kept like any answer: Telegram is
    down, the process is killed -9, and after the restart they arrive once each, in order."""
    bot.start()
    bot.tg.fail_next("sendMessage", 10_000, status=502)
    bot.tg.user_sends_sticker()
    bot.tg.user_sends("/nosuchcommand")
    bot.tg.user_sends("after them")
    bot.tg.wait_for(lambda: turns(bot), WAIT, "the turn to be stored")
    bot.tg.wait_for(lambda: len(bot.tg.errors) >= 2, WAIT, "a few failed sends")
    kill9(bot)
    bot.tg.stop_failing()
    bot.start()
    bot.tg.wait_for(lambda: len(bot.tg.texts(ALICE)) >= 3, WAIT, "every answer")
    time.sleep(1.0)  # room for a duplicate to show up
    assert bot.tg.texts(ALICE) == [
        NOT_TEXT,
        "I don't know /nosuchcommand. Try /help for the list of commands.",
        "Echo: after them",
    ], bot.output()
    assert len(bot.llm.requests_of("reply")) == 1  # the kept answer, not a second turn


def test_webhook_updates_acknowledged_before_a_kill_are_answered_after_it(tmp_path: Path) -> None:
    """Webhook mode: the 200 comes after the update is in the inbox, so Telegram never sends it
    again, and it is still answered (once) after a kill -9."""
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        bot = WebhookBot(tg, llm, tmp_path / "data", tmp_path / "bot.log")
        llm.kind_latency["reply"] = 2.0
        bot.start()
        first, second = bot.update("first"), bot.update("second")
        assert bot.post(first) == 200 and bot.post(second) == 200
        time.sleep(0.5)
        kill9(bot)
        assert tg.texts(USER) == []
        llm.kind_latency.clear()
        bot.start()
        tg.wait_for(lambda: len(tg.texts(USER)) >= 2, WAIT, "both answered")
        assert bot.post(second) == 200  # delivered again: already handled, not answered twice
        time.sleep(1.0)
        assert tg.texts(USER) == ["Echo: first", "Echo: second"], bot.output()
        assert bot.stop() == 0
