"""Practice reminders: parsing, the due rule and the once-a-day claim with time passed in; the
stored setting in a real SQLite file; the commands; and the real PTB JobQueue sending through the
real Bot over HTTP to the fake Bot API (a job scheduled a second ahead, never a wait for 20:00)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pytest

from bot.telegram import build_application
from bot.telegram.reminders import ReminderJobs, ptb_days
from memora.commands import CommandContext, run_command
from memora.config import Settings, TelegramConfig
from memora.engine import ChatRef, Engine, UserRef
from memora.learner.service import ReminderFacts
from memora.reminders import (
    EVERY_DAY,
    PRIVATE_ONLY,
    Reminder,
    ReminderError,
    Reminders,
    compose,
    due_day,
    parse_remind,
)
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import Clock, FakeLLM, clocked_engine

ALICE, BOB = 1001, 1002
# Monday 30 November 2026, 12:05 UTC = 20:05 in Taipei.
MONDAY_NOON = datetime(2026, 11, 30, 12, 5, tzinfo=UTC)


# -- parsing ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arg", "at", "days"),
    [
        ("20:00", time(20, 0), EVERY_DAY),
        ("8:30 mon-fri", time(8, 30), (0, 1, 2, 3, 4)),
        ("07.15 sat,sun", time(7, 15), (5, 6)),
        ("21h00 fri-mon", time(21, 0), (0, 4, 5, 6)),  # a range may wrap over the week end
        ("20:00 weekdays", time(20, 0), (0, 1, 2, 3, 4)),
        ("20:00 Monday,Wednesday", time(20, 0), (0, 2)),
        ("20:00 daily", time(20, 0), EVERY_DAY),
    ],
)
def test_remind_arguments(arg: str, at: time, days: tuple[int, ...]) -> None:
    assert parse_remind(arg) == (at, days)


@pytest.mark.parametrize(
    ("arg", "says"), [("25:00", "HH:MM"), ("8pm", "HH:MM"), ("20:00 funday", "mon, tue")]
)
def test_bad_remind_arguments_say_how(arg: str, says: str) -> None:
    with pytest.raises(ReminderError, match=says):
        parse_remind(arg)


def test_python_weekdays_becomeptb_days() -> None:
    assert ptb_days((0, 1, 2, 3, 4)) == (1, 2, 3, 4, 5)  # PTB counts from Sunday = 0
    assert ptb_days((6,)) == (0,)


# -- the due rule -------------------------------------------------------------------------------
def weekday_reminder(**kw: Any) -> Reminder:
    base: dict[str, Any] = {
        "user_id": ALICE,
        "chat_id": ALICE,
        "at": time(20, 0),
        "days": (0, 1, 2, 3, 4),
        "updated_at": "2026-11-29T00:00:00+00:00",
    }
    return Reminder(**{**base, **kw})


def test_due_once_its_local_time_has_come_on_its_days() -> None:
    r = weekday_reminder()
    assert due_day(r, "Asia/Taipei", MONDAY_NOON) == date(2026, 11, 30)
    assert due_day(r, "Asia/Taipei", MONDAY_NOON - timedelta(minutes=10)) is None  # 19:55
    assert due_day(r, "UTC", MONDAY_NOON) is None  # 12:05 in London-ish UTC
    saturday = MONDAY_NOON - timedelta(days=2)
    assert due_day(r, "Asia/Taipei", saturday) is None
    # late the same day (the bot was down at 20:00): still due, once
    assert due_day(r, "Asia/Taipei", MONDAY_NOON + timedelta(hours=3)) == date(2026, 11, 30)


def test_not_due_twice_nor_when_set_after_its_time_nor_when_off() -> None:
    assert due_day(weekday_reminder(last_sent="2026-11-30"), "Asia/Taipei", MONDAY_NOON) is None
    set_late = weekday_reminder(updated_at="2026-11-30T12:01:00+00:00")  # 20:01 Taipei
    assert due_day(set_late, "Asia/Taipei", MONDAY_NOON) is None
    assert due_day(weekday_reminder(enabled=False), "Asia/Taipei", MONDAY_NOON) is None
    # the next day counts again
    assert due_day(
        weekday_reminder(last_sent="2026-11-30"), "Asia/Taipei", MONDAY_NOON + timedelta(days=1)
    ) == date(2026, 12, 1)


# -- the text -----------------------------------------------------------------------------------
def Facts(**kw: Any) -> ReminderFacts:
    base: dict[str, Any] = {
        "timezone": "Asia/Taipei",
        "due_cards": 5,
        "next_due": None,
        "goal_countdown": "TOEIC 900 in 41 days",
        "difficulty": "preposition",
        "streak": 3,
    }
    return ReminderFacts(**{**base, **kw})


def test_the_text_is_written_from_memory() -> None:
    text = compose(Facts(), "Alice")
    assert text.splitlines() == [
        "⏰ Hi Alice! Time for your English practice.",
        "• 5 review cards due — /review",
        "• Goal: TOEIC 900 in 41 days",
        "• Something to work on: preposition (your most frequent mistake lately)",
        "• 🔥 3-day streak — keep it going!",
        "Send me a message or a voice note to start. (/remind off to stop these.)",
    ]


def test_missing_pieces_are_left_out() -> None:
    few = compose(Facts(due_cards=1, goal_countdown=None, difficulty=None, streak=1))
    assert few.splitlines()[1:] == [
        "• 1 review card due — /review",
        "Send me a message or a voice note to start. (/remind off to stop these.)",
    ]
    plain = compose(None)  # no learner model at all
    assert plain.startswith("⏰ Time for your English practice.") and len(plain.splitlines()) == 2


# -- the stored setting -------------------------------------------------------------------------
@pytest.fixture
def clock() -> Clock:
    return Clock(MONDAY_NOON)


@pytest.fixture
def reminders(db: Database, clock: Clock) -> Reminders:
    return Reminders(db, clock=clock)


async def test_set_show_stop_and_restore_from_the_database(
    reminders: Reminders, db: Database
) -> None:
    seen: list[Reminder] = []
    reminders.listeners.append(seen.append)
    r = await reminders.set(ALICE, ALICE, time(20, 0), (0, 1, 2, 3, 4))
    assert (r.at, r.days, r.enabled, r.updated_at) == (
        time(20, 0),
        (0, 1, 2, 3, 4),
        True,
        "2026-11-30T12:05:00+00:00",
    )
    await reminders.set(BOB, BOB, time(7, 30), EVERY_DAY)
    assert [x.user_id for x in await Reminders(db).enabled()] == [ALICE, BOB]  # a new reader
    stopped = await reminders.off(ALICE)
    assert stopped is not None and not stopped.enabled and stopped.off_reason == "you"
    assert [x.user_id for x in await reminders.enabled()] == [BOB]
    assert [x.enabled for x in seen] == [True, True, False]  # the scheduler heard each change
    assert await reminders.off(4242) is None


async def test_the_day_is_claimed_once(reminders: Reminders) -> None:
    await reminders.set(ALICE, ALICE, time(20, 0), EVERY_DAY)
    today = date(2026, 11, 30)
    assert await reminders.claim(ALICE, today) is True
    assert await reminders.claim(ALICE, today) is False
    assert (await reminders.get(ALICE)).last_sent == "2026-11-30"  # type: ignore[union-attr]
    assert await reminders.claim(ALICE, today + timedelta(days=1)) is True
    await reminders.off(ALICE)
    assert await reminders.claim(ALICE, today + timedelta(days=2)) is False  # off: never


# -- the commands -------------------------------------------------------------------------------
@pytest.fixture(name="clocked_engine")
async def clocked_engine_fixture(db: Database, clock: Clock) -> AsyncIterator[Engine]:
    eng = clocked_engine(db, clock)
    yield eng
    await eng.drain()


async def remind(engine: Engine, arg: str, *, group: bool = False) -> str:
    chat = ChatRef(-100, "group", "G") if group else ChatRef(ALICE, "private", "Alice")
    reply = await run_command(engine, "remind", CommandContext(chat, UserRef(ALICE, "Alice"), arg))
    return reply.text


async def test_remind_commands(clocked_engine: Engine) -> None:
    assert (await remind(clocked_engine, "")).startswith("You have no practice reminder.")
    set_text = await remind(clocked_engine, "20:00 mon-fri")
    assert set_text.startswith("⏰ Reminder set: 20:00 Mon–Fri (UTC); next: Mon 30 Nov 20:00.")
    assert "/timezone" in set_text  # UTC until the learner says otherwise
    assert (await remind(clocked_engine, "")).startswith("Your practice reminder: 20:00 Mon–Fri")
    bad = await remind(clocked_engine, "25:61")
    assert "HH:MM" in bad and "Usage: /remind 20:00" in bad
    assert (await clocked_engine.reminders.get(ALICE)).at == time(20, 0)  # type: ignore[union-attr]
    assert (await remind(clocked_engine, "off")).startswith("Reminders off (it was 20:00 Mon–Fri)")
    assert "is off" in await remind(clocked_engine, "")
    assert await remind(clocked_engine, "20:00", group=True) == PRIVATE_ONLY


async def timezone(engine: Engine, arg: str) -> str:
    chat = ChatRef(ALICE, "private", "Alice")
    reply = await run_command(
        engine, "timezone", CommandContext(chat, UserRef(ALICE, "Alice"), arg)
    )
    return reply.text


async def test_the_time_zone_lives_in_the_learner_profile(clocked_engine: Engine) -> None:
    assert (await timezone(clocked_engine, "")).startswith("Your time zone: UTC.")
    assert "not a time zone" in await timezone(clocked_engine, "Mars/Olympus_Mons")
    await remind(clocked_engine, "20:00 mon-fri")
    seen: list[Reminder] = []
    clocked_engine.reminders.listeners.append(seen.append)
    answer = await timezone(clocked_engine, "asia/taipei")
    assert answer == (
        "Time zone set: Asia/Taipei (it is 20:05 there now). "
        "Your reminder follows it: 20:00 Mon–Fri Asia/Taipei time."
    )
    assert [r.user_id for r in seen] == [ALICE]  # the scheduler reschedules it in the new zone
    profile = await clocked_engine.reminders.learner.profile(ALICE, MONDAY_NOON)
    assert profile.get("timezone") == "Asia/Taipei"  # one store: the profile field
    shown = await remind(clocked_engine, "")
    assert "(Asia/Taipei); next: Tue 01 Dec 20:00" in shown  # Monday's 20:00 has passed there


async def test_the_reminder_text_comes_from_the_learner_model(clocked_engine: Engine) -> None:
    learner = clocked_engine.reminders.learner
    for field, value in (("goal", "TOEIC 900"), ("goal_date", "2027-01-10")):
        await learner.profiles.set_field(ALICE, field, value, source="you", now=MONDAY_NOON)
    text = await clocked_engine.reminders.text(ALICE, MONDAY_NOON)
    assert "• Goal: TOEIC 900 in 41 days (2027-01-10)" in text.splitlines()
    assert "review card" not in text  # nothing due: that line is left out


async def test_export_shows_the_setting(clocked_engine: Engine) -> None:
    await clocked_engine.handle_turn(ChatRef(ALICE, "private"), UserRef(ALICE, "Alice"), "hi")
    await remind(clocked_engine, "07:30 sat,sun")
    data = await clocked_engine.export.export_chat(ALICE)
    assert data is not None
    assert data["participants"][str(ALICE)]["reminder"] == {
        "at": "07:30",
        "days": ["sat", "sun"],
        "enabled": True,
        "off_reason": "",
        "last_sent": "",
        "updated_at": "2026-11-30T12:05:00+00:00",
    }


async def test_forgetme_deletes_the_reminder(clocked_engine: Engine) -> None:
    await remind(clocked_engine, "20:00")
    counts = await clocked_engine.forget_user(ALICE)
    assert counts["reminders"] == 1
    assert await clocked_engine.reminders.get(ALICE) is None


# -- Telegram: the real JobQueue and Bot over HTTP ----------------------------------------------
@pytest.fixture
async def running(tg: FakeTelegram, db: Database) -> AsyncIterator[tuple[Any, Engine, Clock]]:
    """A started Application (JobQueue running) over an engine whose clock the test sets."""
    clock = Clock(datetime.now(UTC))
    engine = Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter(), clock=clock)
    settings = Settings(
        telegram=TelegramConfig(
            token=tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url
        )
    )
    app = build_application(settings, engine)
    yield app, engine, clock
    if app.running:
        await app.stop()
    await app.shutdown()
    assert app.post_shutdown is not None
    await app.post_shutdown(app)


async def start(app: Any) -> ReminderJobs:
    await app.initialize()
    await app.post_init(app)
    await app.start()
    jobs = app.bot_data.reminder_jobs
    assert isinstance(jobs, ReminderJobs)
    return jobs


async def test_a_daily_job_sends_the_reminder_once(
    running: tuple[Any, Engine, Clock], tg: FakeTelegram
) -> None:
    app, engine, clock = running
    now = datetime.now(UTC).replace(microsecond=0)
    clock.now = now - timedelta(minutes=1)
    stored = (now + timedelta(minutes=2)).time().replace(second=0)
    await engine.reminders.set(ALICE, ALICE, stored, EVERY_DAY)  # not due at start-up
    clock.now = now
    jobs = await start(app)
    assert tg.sent_messages(ALICE) == []
    reminder = await engine.reminders.get(ALICE)
    assert reminder is not None
    # The real JobQueue fires the daily job a second or two from now, not at the stored minute;
    # the clock the core reads says the minute has come.
    soon = (datetime.now(UTC) + timedelta(seconds=2)).replace(microsecond=0)  # a whole second
    jobs.schedule(reminder, "UTC", at=soon.time())
    (job,) = app.job_queue.get_jobs_by_name(f"reminder:{ALICE}")
    assert job.job.trigger.timezone.key == "UTC"
    clock.now = now + timedelta(minutes=3)
    (sent,) = await sent_to(tg, ALICE)
    assert sent["text"].startswith("⏰ Time for your English practice.")
    assert await jobs.deliver(ALICE) is False  # the same day again: already sent
    assert len(tg.sent_messages(ALICE)) == 1


async def test_start_up_catches_up_a_missed_reminder_once(
    running: tuple[Any, Engine, Clock], tg: FakeTelegram, db: Database
) -> None:
    app, engine, clock = running
    # Set yesterday for 00:00 every day; it is now past today's time: missed while down.
    clock.now = datetime.now(UTC) - timedelta(days=1)
    await engine.reminders.set(ALICE, ALICE, time(0, 0), EVERY_DAY)
    await engine.reminders.set(BOB, BOB, time(23, 59), EVERY_DAY)  # not yet due today
    clock.now = datetime.now(UTC)
    if clock.now.time() >= time(23, 59):
        pytest.skip("too close to midnight UTC for this test's choice of times")
    await start(app)
    await sent_to(tg, ALICE)
    await asyncio.sleep(0.2)
    assert tg.sent_messages(BOB) == []
    jobs: ReminderJobs = app.bot_data.reminder_jobs
    assert sorted(jobs.when) == [ALICE, BOB]  # both scheduled for their next time
    assert await jobs.restore() == 2  # a second start-up the same day sends nothing more
    await asyncio.sleep(0.3)
    assert len(tg.sent_messages(ALICE)) == 1


async def test_flood_control_is_waited_out_by_the_rate_limiter(
    running: tuple[Any, Engine, Clock], tg: FakeTelegram
) -> None:
    app, engine, clock = running
    clock.now = datetime.now(UTC) - timedelta(days=1)
    await engine.reminders.set(ALICE, ALICE, time(0, 0), EVERY_DAY)
    clock.now = datetime.now(UTC)
    tg.fail_next("sendMessage", retry_after=1)  # Telegram: 429, retry after 1 s
    await start(app)
    (sent,) = await sent_to(tg, ALICE)  # AIORateLimiter waited and sent it again
    assert sent["text"].startswith("⏰") and [e[2] for e in tg.errors] == [429]


def near_midnight() -> bool:
    """A reminder queued now for 00:00 today expires at midnight UTC: too close to test with."""
    return datetime.now(UTC).time() >= time(23, 58)


async def missed_today(engine: Engine, clock: Clock, user: int = ALICE) -> None:
    """Set yesterday for 00:00 every day: due (missed) now, and the clock back to now."""
    if near_midnight():
        pytest.skip("too close to midnight UTC, when a reminder's day ends")
    clock.now = datetime.now(UTC) - timedelta(days=1)
    await engine.reminders.set(user, user, time(0, 0), EVERY_DAY)
    clock.now = datetime.now(UTC)


async def outbox_rows(db: Database, user: int = ALICE) -> list[tuple[str, str, str]]:
    """(kind, state, last_error) of the user's outbox rows, oldest first."""
    rows = await db.connection.rows(
        "SELECT kind, state, last_error FROM outbox WHERE user_id=? ORDER BY id", (user,)
    )
    return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]


async def test_a_reminder_under_ten_429s_is_kept_and_delivered_once(
    running: tuple[Any, Engine, Clock], tg: FakeTelegram, db: Database
) -> None:
    """Beyond the rate limiter's own retries, the outbox keeps it and its sender retries."""
    app, engine, clock = running
    await missed_today(engine, clock)
    tg.fail_next("sendMessage", 10, retry_after=1)
    await start(app)
    (sent,) = await tg.await_for(lambda: tg.sent_messages(ALICE), 60, "the reminder")
    assert sent["text"].startswith("⏰ Time for your English practice.")
    assert [status for _, _, status, _ in tg.errors] == [429] * 10
    await asyncio.sleep(0.5)  # room for a second copy to show up
    assert len(tg.sent_messages(ALICE)) == 1
    assert [(k, s) for k, s, _ in await outbox_rows(db)] == [("reminder", "sent")]


async def test_a_reminder_claimed_by_a_process_that_died_before_sending_arrives_once(
    running: tuple[Any, Engine, Clock], tg: FakeTelegram, db: Database
) -> None:
    """The job's one transaction (claim + outbox row) committed, then the process died: the
    next start does not claim the day again, and the outbox sends what was kept, once."""
    app, engine, clock = running
    await missed_today(engine, clock)
    reminder = await engine.reminders.get(ALICE)
    assert reminder is not None
    day = await engine.reminders.due(reminder, clock.now)
    assert day is not None
    assert await engine.reminders.queue(reminder, day, "⏰ kept before the crash", "UTC")
    assert not await engine.reminders.queue(reminder, day, "⏰ a second one", "UTC")
    await start(app)  # restore: the day is claimed, so no catch-up; the outbox sends the row
    (sent,) = await sent_to(tg, ALICE)
    assert sent["text"] == "⏰ kept before the crash"
    await asyncio.sleep(0.3)
    assert len(tg.sent_messages(ALICE)) == 1


async def test_a_reminder_still_undelivered_when_its_day_ends_is_dropped_and_recorded(
    running: tuple[Any, Engine, Clock], tg: FakeTelegram, db: Database
) -> None:
    """An outage of many hours: yesterday's practice reminder is not sent the next day."""
    app, engine, clock = running
    await missed_today(engine, clock)
    tg.fail_next("sendMessage", 10_000, status=502)  # Telegram is down
    await start(app)
    await tg.await_for(
        lambda: [e for e in tg.errors if e[0] == "sendMessage"], 10, "the failed send"
    )
    assert [(k, s) for k, s, _ in await outbox_rows(db)] == [("reminder", "pending")]
    midnight = datetime.combine(clock.now.date() + timedelta(days=1), time(0), tzinfo=UTC)
    clock.now = midnight + timedelta(minutes=1)  # the learner's day is over
    tg.stop_failing()  # and Telegram is back
    rows: list[tuple[str, str, str]] = []

    async def dropped() -> bool:
        rows[:] = await outbox_rows(db)
        return rows[0][1] == "failed"

    deadline = asyncio.get_running_loop().time() + 15
    while not await dropped():
        assert asyncio.get_running_loop().time() < deadline, rows
        await asyncio.sleep(0.1)
    ((kind, _, error),) = rows
    assert kind == "reminder"
    assert error.startswith(f"expired: not delivered by {midnight.isoformat()}; last error: ")
    assert "Internal Server Error" in error or "502" in error or "Bad Gateway" in error
    assert tg.sent_messages(ALICE) == []


async def test_two_replicas_send_a_reminder_due_on_both_once(
    tg: FakeTelegram, postgres_url: str
) -> None:
    """Two processes on one PostgreSQL, each with its JobQueue, outbox sender and catch-up:
    while one is in the middle of sending the reminder, the other claims nothing and leaves
    the kept row to the lease holder. One reminder arrives."""
    if near_midnight():
        pytest.skip("too close to midnight UTC, when a reminder's day ends")
    apps, dbs = [], []
    for _ in range(2):
        db = Database(url=postgres_url)
        await db.open()
        dbs.append(db)
        engine = Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter())
        settings = Settings(
            telegram=TelegramConfig(
                token=tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url
            )
        )
        apps.append(build_application(settings, engine))
    yesterday = datetime.now(UTC) - timedelta(days=1)
    await Reminders(dbs[0], clock=lambda: yesterday).set(ALICE, ALICE, time(0, 0), EVERY_DAY)
    tg.hold("sendMessage")
    try:
        first = await start(apps[0])  # its catch-up claims the day and starts sending
        await tg.await_calls("sendMessage", 1, timeout=10)
        second = await start(apps[1])  # its catch-up finds the day claimed
        assert await second.deliver(ALICE) is False
        assert await first.deliver(ALICE) is False
        await apps[1].bot_data.deliverer.flush(ALICE)  # the row is held by the first's lease
        assert len(tg.calls_to("sendMessage")) == 1
        tg.release("sendMessage")
        await sent_to(tg, ALICE)
        await asyncio.sleep(0.5)
        assert len(tg.calls_to("sendMessage")) == 1 and len(tg.sent_messages(ALICE)) == 1
    finally:
        tg.release()
        for app in apps:
            if app.running:
                await app.stop()
            await app.shutdown()
            await app.post_shutdown(app)
        for db in dbs:
            await db.close()


async def test_a_learner_who_moved_is_reminded_in_their_new_zone(
    running: tuple[Any, Engine, Clock], tg: FakeTelegram
) -> None:
    app, engine, clock = running
    clock.now = MONDAY_NOON - timedelta(days=1)
    await engine.reminders.set(ALICE, ALICE, time(20, 0), EVERY_DAY)
    clock.now = MONDAY_NOON  # 12:05 UTC: not yet 20:00 in UTC
    jobs = await start(app)
    assert jobs.when[ALICE][0] == "UTC" and tg.sent_messages(ALICE) == []
    # The conversation (or /profile set) moved them to Taipei, where it is 20:05 now: the job
    # that fires next follows the profile, reschedules in the new zone and sends.
    learner = engine.reminders.learner
    await learner.profiles.set_field(ALICE, "timezone", "Asia/Taipei", source="you", now=clock.now)
    assert await jobs.deliver(ALICE) is True
    assert jobs.when[ALICE][0] == "Asia/Taipei"
    (job,) = app.job_queue.get_jobs_by_name(f"reminder:{ALICE}")
    assert job.job.trigger.timezone.key == "Asia/Taipei"
    await sent_to(tg, ALICE)


async def test_a_blocked_learner_is_switched_off_not_retried(
    running: tuple[Any, Engine, Clock], tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    app, engine, clock = running
    clock.now = datetime.now(UTC) - timedelta(days=1)
    await engine.reminders.set(ALICE, ALICE, time(0, 0), EVERY_DAY)
    clock.now = datetime.now(UTC)
    tg.fail_next("sendMessage", status=403)
    with caplog.at_level(logging.WARNING, logger="bot.telegram.reminders"):
        jobs = await start(app)
        await tg.await_for(
            lambda: [e for e in tg.errors if e[0] == "sendMessage"],
            timeout=10,
            what="the refused send",
        )
        await _until(lambda: not jobs.when)
    stored = await engine.reminders.get(ALICE)
    assert stored is not None and not stored.enabled and stored.off_reason == "blocked"
    assert app.job_queue.get_jobs_by_name(f"reminder:{ALICE}") == ()
    assert "blocked by the user" in caplog.text and "now off" in caplog.text
    assert (
        (await remind(engine, ""))
        .splitlines()[0]
        .endswith("because Telegram said you blocked me. /remind 20:00 to start again.")
    )


async def test_remind_in_telegram_schedules_in_the_job_queue(
    running: tuple[Any, Engine, Clock], tg: FakeTelegram
) -> None:
    app, engine, _ = running
    await start(app)
    await remind(engine, "20:00 mon-fri")
    await _until(lambda: bool(app.job_queue.get_jobs_by_name(f"reminder:{ALICE}")))
    (job,) = app.job_queue.get_jobs_by_name(f"reminder:{ALICE}")
    fields = {f.name: str(f) for f in job.job.trigger.fields}
    shown = (fields["hour"], fields["minute"], fields["day_of_week"])
    assert shown == ("20", "0", "mon,tue,wed,thu,fri")
    await remind(engine, "off")
    await _until(lambda: not app.job_queue.get_jobs_by_name(f"reminder:{ALICE}"))


async def sent_to(tg: FakeTelegram, chat_id: int) -> list[dict[str, Any]]:
    """The bot's messages to the chat, once there is one (the real JobQueue sends them)."""
    return await tg.await_for(lambda: tg.sent_messages(chat_id), 10, f"a message to {chat_id}")


async def _until(ready: Any, seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not ready():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_learners_sharing_one_reminder_time_are_each_reminded_once_through_the_outbox(
    running: tuple[Any, Engine, Clock], tg: FakeTelegram, db: Database
) -> None:
    """Several learners due in the same second (many learners at 20:00): the real JobQueue fires
    every job, each reminder goes out once through the outbox, none again the same day."""
    app, engine, clock = running
    now = datetime.now(UTC).replace(microsecond=0)
    clock.now = now - timedelta(minutes=1)
    stored = (now + timedelta(minutes=2)).time().replace(second=0)
    learners = range(2001, 2006)
    for user in learners:
        await engine.reminders.set(user, user, stored, EVERY_DAY)  # not due at start-up
    clock.now = now
    jobs = await start(app)
    soon = (datetime.now(UTC) + timedelta(seconds=2)).replace(microsecond=0)  # the same second
    for reminder in await engine.reminders.enabled():
        jobs.schedule(reminder, "UTC", at=soon.time())
    clock.now = now + timedelta(minutes=3)
    for user in learners:
        (sent,) = await sent_to(tg, user)
        assert sent["text"].startswith("⏰ Time for your English practice.")
    assert [await jobs.deliver(user) for user in learners] == [False] * len(learners)
    query = "SELECT state, COUNT(*) FROM outbox WHERE kind='reminder' GROUP BY state"
    deadline = asyncio.get_running_loop().time() + 10
    while [tuple(r) for r in await db.connection.rows(query)] != [("sent", len(learners))]:
        assert asyncio.get_running_loop().time() < deadline, await db.connection.rows(query)
        await asyncio.sleep(0.05)
    assert all(len(tg.sent_messages(user)) == 1 for user in learners)
