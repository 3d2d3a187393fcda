"""End to end with the real `memora run` process: a voice note is heard and answered; a practice
reminder arrives, survives restarts without being sent twice, and stops for good once Telegram
says the learner blocked the bot. The fakes run in this process; time is not waited for: the
reminders are stored as if set yesterday for 00:00, so they are due (missed while the bot was
down) the moment the process starts."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time as clock
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import pytest

from memora.learner.service import Learner
from memora.reminders import EVERY_DAY, Reminders
from memora.storage import Database
from tests.support.bot import ALICE, WAIT, ask, bot_over_fakes
from tests.support.fake_openai import VOICE_FIXTURE
from tests.support.fake_telegram import FakeTelegram

pytestmark = pytest.mark.slow

BOB = 1002
SAID = "I went to the park yesterday"


async def seed_reminder(data_dir: Path, user_id: int, goal: bool = False) -> None:
    """What `/remind 00:00` yesterday would have stored (through the core, into the bot's file)."""
    db = Database(data_dir / "memora.sqlite3")
    await db.open()
    yesterday = datetime.now(UTC) - timedelta(days=1)
    await Reminders(db, clock=lambda: yesterday).set(user_id, user_id, time(0, 0), EVERY_DAY)
    if goal:
        learner = Learner(db)
        for field, value in (("goal", "IELTS 7"), ("goal_date", "2099-01-01")):
            await learner.profiles.set_field(user_id, field, value, source="you", now=yesterday)
    await db.close()


def reminders_to(tg: FakeTelegram, chat_id: int) -> list[str]:
    return [t for t in tg.texts(chat_id) if t.startswith("⏰")]


def test_voice_and_reminders_through_the_real_process(tmp_path: Path) -> None:
    if datetime.now(UTC).time() > time(23, 58):
        pytest.skip("a restart could cross midnight UTC, when a reminder is due again")
    data = tmp_path / "data"
    asyncio.run(seed_reminder(data, ALICE, goal=True))
    with bot_over_fakes(tmp_path, data=data) as (tg, llm, bot):
        bot.start()
        # 1. The reminder missed while the bot was down arrives once, written from memory.
        (text,) = tg.wait_for(lambda: reminders_to(tg, ALICE), WAIT, "the reminder")
        assert "• Goal: IELTS 7 in " in text
        # 2. A voice note: downloaded, transcribed (the real Ogg/Opus bytes), answered.
        llm.queue_reply(SAID, kind="transcribe")
        update = tg.user_sends_voice(VOICE_FIXTURE.read_bytes(), duration=2)
        (answer,) = tg.wait_messages(count=1, after=update, timeout=WAIT)
        assert answer["text"] == f"🎤 I heard: {SAID}\n\nEcho: {SAID}"
        assert llm.requests_of("transcribe")[0].audio == VOICE_FIXTURE.read_bytes()
        assert "00:00 every day (UTC)" in ask(tg, "/remind")
        assert bot.stop() == 0

        # 3. Restart: ALICE's reminder is still scheduled but not sent again today; BOB's is
        # due, and Telegram answers 403 (he blocked the bot): his reminders are switched off.
        asyncio.run(seed_reminder(data, BOB))
        tg.fail_next("sendMessage", status=403)
        bot.start()
        tg.wait_for(
            lambda: [e for e in tg.errors if e[0] == "sendMessage"], WAIT, "the refused reminder"
        )
        assert "00:00 every day (UTC)" in ask(tg, "/remind")  # restored from the database
        assert len(reminders_to(tg, ALICE)) == 1
        assert bot.stop() == 0
        with sqlite3.connect(data / "memora.sqlite3") as conn:
            row = conn.execute("SELECT enabled, off_reason FROM reminders WHERE user_id=?", (BOB,))
            assert row.fetchone() == (0, "blocked")
        assert "now off" in bot.output()

        # 4. Once more: nothing is sent to either of them.
        calls_before = len(tg.calls_to("sendMessage"))
        bot.start()
        assert "00:00 every day (UTC)" in ask(tg, "/remind")
        assert bot.stop() == 0
        sent = tg.calls_to("sendMessage")[calls_before:]
        assert [int(c["chat_id"]) for c in sent] == [ALICE]  # only the /remind answer
        assert "Traceback" not in bot.output()


def test_a_reminder_claimed_before_a_kill_9_arrives_once_after_the_restart(tmp_path: Path) -> None:
    """The day is claimed and the reminder kept in one transaction; Telegram is down, so it is
    not out yet when the process is killed -9. After the restart it arrives, once."""
    if datetime.now(UTC).time() > time(23, 58):
        pytest.skip("the reminder's day could end (at midnight UTC) before the restart")
    data = tmp_path / "data"
    asyncio.run(seed_reminder(data, ALICE))
    with bot_over_fakes(tmp_path, data=data) as (tg, _llm, bot):
        tg.fail_next("sendMessage", 10_000, status=502)
        bot.start()
        tg.wait_for(
            lambda: [e for e in tg.errors if e[0] == "sendMessage"],
            WAIT,
            "the reminder's failed send",
        )
        assert bot.proc is not None
        bot.proc.send_signal(signal.SIGKILL)
        bot.proc.wait(timeout=10)
        bot.proc = None
        with sqlite3.connect(data / "memora.sqlite3") as conn:
            claimed = conn.execute("SELECT last_sent FROM reminders WHERE user_id=?", (ALICE,))
            assert claimed.fetchone() == (datetime.now(UTC).date().isoformat(),)
            kept = conn.execute("SELECT kind, state FROM outbox WHERE user_id=?", (ALICE,))
            assert kept.fetchall() == [("reminder", "pending")]
        tg.stop_failing()
        bot.start()
        tg.wait_for(lambda: reminders_to(tg, ALICE), WAIT, "the reminder")
        clock.sleep(1.0)  # room for a second copy to show up
        assert len(reminders_to(tg, ALICE)) == 1
        assert bot.stop() == 0
        with sqlite3.connect(data / "memora.sqlite3") as conn:
            kept = conn.execute("SELECT kind, state FROM outbox WHERE user_id=?", (ALICE,))
            assert kept.fetchall() == [("reminder", "sent")]
