"""The weekly report: its text from a learner's real rows (this week against last), the
once-a-week claim on both stores, `/remind weekly` and the `[reminders]` default, /export and
/forgetme, and the real PTB JobQueue sending the report with its chart as a photo through the
outbox to the fake Bot API (time passed in: never a wait for Monday)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.telegram import build_application
from bot.telegram.reminders import WeeklyJobs
from memora.commands import COMMANDS, CommandContext, run_command
from memora.config import Settings, TelegramConfig
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.reminders import EVERY_DAY, Reminders, WeeklyReports, WeeklySetting, report, week_key
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from memora.storage.durable import Outbox
from memora.views import Reply
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import Clock, FakeLLM, clocked_engine
from tests.support.fortnight import ALICE, BOB, MONDAY, a_fortnight
from tests.support.terminal import chat, memora_env


@pytest.fixture
def clock() -> Clock:
    return Clock(MONDAY)


@pytest.fixture
async def engine(db: Database, clock: Clock) -> AsyncIterator[Engine]:
    eng = clocked_engine(db, clock)
    yield eng
    await eng.drain()


# -- the text -----------------------------------------------------------------------------------
async def test_the_report_compares_this_week_with_last_from_the_learner_model(
    engine: Engine,
) -> None:
    await a_fortnight(engine)
    week = await report.gather(engine.learner, ALICE, MONDAY)
    assert (week.first, week.last) == (date(2026, 11, 30), date(2026, 12, 6))
    assert week.messages == (5, 4) and week.study_days == (3, 1) and week.new_words == (2, 1)
    assert week.mistakes == {"tense": (2, 3), "article": (1, 0)}
    due = await engine.learner.cards.due_count(ALICE, MONDAY)
    assert report.compose(week, "Alice").splitlines() == [
        "📅 Your week in English, Alice (30 Nov – 6 Dec: the 7 days before today)",
        "• Messages: 5 (last week 4, ↑1)",
        "• Study days: 3 of 7 (last week 1)",
        "• Mistakes: 3 (last week 3, steady)",
        "    tense: 2 (was 3, fewer ↓)",
        "    article: 1 (was 0, more ↑)",
        "• New words: 2 (last week 1)",
        "• Vocabulary: 3 words; review them so they stay — /review",
        f"• Review cards due: {due} — /review",
        "• Level: B1 (2026-11-01) → B2 (2026-12-03)",
        "• Goal: TOEIC 900 in 34 days (2027-01-10)",
        "(/remind weekly off to stop these reports.)",
    ]
    assert due == 9  # six mistakes and three words, each a new card


async def test_a_quiet_week_gets_a_short_encouraging_report(engine: Engine) -> None:
    await engine.learner.profiles.set_field(
        ALICE, "goal_date", "2027-01-10", source="you", now=MONDAY
    )
    text = report.compose(await report.gather(engine.learner, ALICE, MONDAY))
    assert "A quiet week: no practice logged." in text and "fresh start" in text
    assert "Messages:" not in text and "Mistakes" not in text
    assert "• Goal: Your goal in 34 days (2027-01-10)" in text  # what still matters stays


def test_a_long_report_still_fits_a_photo_caption() -> None:
    long = "\n".join(["📅 head", *(f"• line {i} " + "x" * 80 for i in range(30)), "(stop)"])
    fitted = report._fit(long)
    assert len(fitted) <= report.CAPTION_LIMIT
    assert fitted.startswith("📅 head") and fitted.endswith("(stop)")


# -- the claim, on SQLite and PostgreSQL -------------------------------------------------------
async def test_a_week_is_claimed_once_by_any_number_of_processes(
    engine: Engine, db: Database, clock: Clock
) -> None:
    weekly = engine.weekly
    await engine.reminders.learner.profiles.set_field(
        ALICE, "timezone", "Asia/Taipei", source="you", now=MONDAY
    )
    clock.now = MONDAY - timedelta(days=3)
    await engine.reminders.set(ALICE, ALICE, time(20, 0), EVERY_DAY)
    setting = await weekly.set(ALICE, ALICE, 0)  # Mondays
    clock.now = MONDAY - timedelta(minutes=10)  # 19:55 in Taipei: not yet
    assert await weekly.due(setting, clock.now) is None
    clock.now = MONDAY
    day = await weekly.due(setting, MONDAY)
    assert day == date(2026, 12, 7) and week_key(day) == "2026-W50"
    rep = await weekly.report(ALICE, MONDAY)
    assert rep.chart is not None and rep.chart.startswith(b"\x89PNG")
    other = WeeklyReports(db, Reminders(db, clock=clock))  # a second replica, or a restart
    assert await weekly.queue(setting, day, rep, "Asia/Taipei") is True
    assert await other.queue(setting, day, rep, "Asia/Taipei") is False
    assert await weekly.due(setting, MONDAY) is None and await other.due(setting, MONDAY) is None
    (row,) = await Outbox(db.connection).pending(ALICE)
    body = json.loads(row.body)
    assert row.kind == "weekly" and row.user_id == ALICE and body["text"] == rep.text
    assert body["photo"] and row.expires == datetime(2026, 12, 7, 16, 0, tzinfo=UTC).timestamp()
    # A changed weekday does not bring the same week back; the next week is due again.
    moved = await weekly.set(ALICE, ALICE, 3)
    thursday = MONDAY + timedelta(days=3)
    assert await weekly.due(moved, thursday) is None
    assert await weekly.due(moved, thursday + timedelta(days=7)) == date(2026, 12, 17)
    back = await weekly.set(ALICE, ALICE, 0)
    assert await weekly.due(back, MONDAY + timedelta(days=7)) == date(2026, 12, 14)
    await weekly.off(ALICE)
    off = await weekly.get(ALICE)
    assert off is not None and not off.enabled
    next_monday = day + timedelta(days=7)
    assert await weekly.queue(off, next_monday, rep, "Asia/Taipei") is False  # off: never
    assert await weekly.weeks(ALICE) == [("2026-W50", "2026-12-07T12:05:00+00:00")]


# -- the commands -------------------------------------------------------------------------------
async def remind(engine: Engine, arg: str, user: int = ALICE) -> Reply:
    chat = ChatRef(user, "private", "Alice")
    return await run_command(engine, "remind", CommandContext(chat, UserRef(user, "Alice"), arg))


async def test_remind_weekly_turns_it_on_moves_previews_and_stops_it(engine: Engine) -> None:
    shown = (await remind(engine, "")).text
    assert "Weekly report: off (/remind weekly turns it on)." in shown.splitlines()
    on = (await remind(engine, "weekly")).text
    heard: list[WeeklySetting] = []
    engine.weekly.listeners.append(heard.append)
    chat = ChatRef(ALICE, "private", "Alice")
    await run_command(engine, "timezone", CommandContext(chat, UserRef(ALICE, "A"), "UTC"))
    assert [h.user_id for h in heard] == [ALICE]  # no daily reminder: the report follows anyway
    assert on.startswith(
        "📅 Weekly report: on, Mons at 19:00 (until you set a reminder); next: Mon 07 Dec 19:00."
    )
    await remind(engine, "20:00 mon-fri")  # the daily reminder's time is the report's too
    shown = (await remind(engine, "")).text
    assert shown.splitlines()[0].startswith("Your practice reminder: 20:00 Mon–Fri")
    assert shown.splitlines()[1].startswith("Weekly report: on, Mons at 20:00 (your reminder time)")
    assert (await remind(engine, "weekly fri")).text.startswith(
        "📅 Weekly report: on, Fris at 20:00"
    )
    bad = await remind(engine, "weekly funday")
    assert not bad.ok and "not a day I know" in bad.text and "/remind weekly now" in bad.text
    assert not (await remind(engine, "weekly fri 08:00")).ok  # the time is the reminder's
    assert (await remind(engine, "weekly Sundays")).text.startswith("📅 Weekly report: on, Suns")
    assert (await remind(engine, "weekly friday")).text.startswith("📅 Weekly report: on, Fris")
    await engine.handle_turn(ChatRef(ALICE, "private"), UserRef(ALICE, "Alice"), "Hello there")
    preview = await remind(engine, "weekly now")
    assert preview.text.startswith("📅 Your week in English")
    assert preview.photo is not None and preview.photo.startswith(b"\x89PNG")
    assert await engine.weekly.weeks(ALICE) == []  # a preview claims nothing
    assert (await remind(engine, "weekly off")).text.startswith("Weekly report off.")
    assert "Weekly report: off (/remind weekly turns it on)." in (await remind(engine, "")).text
    group = await run_command(
        engine, "remind", CommandContext(ChatRef(-5, "group", "G"), UserRef(ALICE, "A"), "weekly")
    )
    assert not group.ok and "private chat" in group.text


async def test_the_reminders_default_brings_the_report_with_a_daily_reminder(
    db: Database, clock: Clock
) -> None:
    engine = Engine(
        db=db,
        llm=FakeLLM(),
        counter=LocalTokenCounter(),
        config=EngineConfig(max_input_tokens=1000, weekly_by_default=True),
        clock=clock,
    )
    assert "Weekly report: on, Mons at 20:00" in (await remind(engine, "20:00")).text
    await remind(engine, "weekly off")
    assert "Weekly report: off" in (await remind(engine, "21:00")).text  # their word stands
    assert Settings(reminders={"weekly": True}).reminders.weekly is True  # type: ignore[arg-type]


async def test_export_shows_the_setting_and_the_weeks_and_forgetme_deletes_them(
    engine: Engine,
) -> None:
    await engine.handle_turn(ChatRef(ALICE, "private"), UserRef(ALICE, "Alice"), "hi")
    await remind(engine, "weekly sun")
    await remind(engine, "weekly sun", user=BOB)
    setting = await engine.weekly.get(ALICE)
    assert setting is not None
    rep = await engine.weekly.report(ALICE, MONDAY)
    assert await engine.weekly.queue(setting, date(2026, 12, 13), rep, "UTC")
    data = await engine.export.export_chat(ALICE)
    assert data is not None
    assert data["participants"][str(ALICE)]["weekly_report"] == {
        "weekday": "sun",
        "enabled": True,
        "off_reason": "",
        "updated_at": "2026-12-07T12:05:00+00:00",
        "weeks_sent": [{"week": "2026-W50", "claimed_at": "2026-12-07T12:05:00+00:00"}],
    }
    counts = await engine.forget_user(ALICE)
    assert counts["weekly_reports"] == 2  # the setting and the one week
    assert await engine.weekly.get(ALICE) is None and await engine.weekly.weeks(ALICE) == []
    assert await engine.weekly.get(BOB) is not None  # only the user's own rows


# -- Telegram: the real JobQueue and Bot over HTTP to the fake Bot API --------------------------
def build(tg: FakeTelegram, engine: Engine) -> Any:
    cfg = {"token": tg.token, "base_url": tg.base_url, "base_file_url": tg.base_file_url}
    return build_application(Settings(telegram=TelegramConfig(**cfg)), engine)


async def start(app: Any, *, poll: bool = False) -> WeeklyJobs:
    await app.initialize()
    await app.post_init(app)
    await app.start()
    if poll:
        await app.updater.start_polling(timeout=1, poll_interval=0)
    jobs = app.bot_data.weekly_jobs
    assert isinstance(jobs, WeeklyJobs)
    return jobs


async def stop(app: Any) -> None:
    if app.updater.running:
        await app.updater.stop()
    if app.running:
        await app.stop()
    await app.shutdown()
    await app.post_shutdown(app)


@pytest.fixture
async def live(tg: FakeTelegram, db: Database) -> AsyncIterator[tuple[Engine, Clock]]:
    """An engine whose clock says now, with Alice's report due today since 00:00 UTC: both
    turned on yesterday, the weekly one for today's weekday (so it is due, missed, now)."""
    if datetime.now(UTC).time() >= time(23, 58):
        pytest.skip("too close to midnight UTC, when a report's day ends")
    clock = Clock(datetime.now(UTC) - timedelta(days=1))
    engine = Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter(), clock=clock)
    await engine.reminders.set(ALICE, ALICE, time(0, 0), EVERY_DAY)
    await engine.reminders.off(ALICE)  # the daily reminder off: its time is the report's
    await engine.weekly.set(ALICE, ALICE, datetime.now(UTC).weekday())
    clock.now = datetime.now(UTC)
    yield engine, clock
    await engine.drain()


async def until(ready: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not ready():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def photo_caption(tg: FakeTelegram, chat_id: int) -> str:
    (photo,) = tg.photos(chat_id)
    content = photo["content"]
    assert bytes(content).startswith(b"\x89PNG")  # the /progress chart
    return str(photo["caption"])


async def test_the_report_goes_out_once_as_the_chart_with_its_text_across_a_restart(
    tg: FakeTelegram, live: tuple[Engine, Clock]
) -> None:
    engine, _ = live
    await engine.learner.note_message(ALICE, datetime.now(UTC) - timedelta(days=2))
    app = build(tg, engine)
    jobs = await start(app)  # the start-up catch-up: due since 00:00, not yet sent
    await tg.await_for(lambda: tg.photos(ALICE), 10, "the weekly report")
    caption = photo_caption(tg, ALICE)
    assert caption.startswith("📅 Your week in English") and "• Messages: 1" in caption
    assert caption.endswith("(/remind weekly off to stop these reports.)")
    assert await jobs.deliver(ALICE) is False  # claimed: not twice
    (job,) = app.job_queue.get_jobs_by_name(f"weekly:{ALICE}")
    fields = {f.name: str(f) for f in job.job.trigger.fields}
    weekday = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[datetime.now(UTC).weekday()]
    assert (fields["hour"], fields["minute"], fields["day_of_week"]) == ("0", "0", weekday)
    await stop(app)
    again = build(tg, engine)  # a restart: its catch-up finds the week claimed
    jobs = await start(again)
    assert await jobs.deliver(ALICE) is False
    await asyncio.sleep(0.3)
    await stop(again)
    assert len(tg.calls_to("sendPhoto")) == 1
    assert [w for w, _ in await engine.weekly.weeks(ALICE)] == [week_key(datetime.now(UTC).date())]


async def test_a_report_claimed_by_a_process_that_died_before_sending_arrives_once(
    tg: FakeTelegram, live: tuple[Engine, Clock]
) -> None:
    """The job's one transaction (claim + outbox row) committed, then the process died: the
    next start claims nothing again, and the outbox sends the kept report, once."""
    engine, clock = live
    setting = await engine.weekly.get(ALICE)
    assert setting is not None
    day = await engine.weekly.due(setting, clock.now)
    assert day is not None
    kept = await engine.weekly.report(ALICE, clock.now)
    assert await engine.weekly.queue(
        setting, day, replace(kept, text="📅 kept before the crash"), "UTC"
    )
    app = build(tg, engine)
    jobs = await start(app)  # restore: the week is claimed, so no catch-up; the outbox sends
    try:
        await tg.await_for(lambda: tg.photos(ALICE), 10, "the kept report")
        assert photo_caption(tg, ALICE) == "📅 kept before the crash"
        assert await jobs.deliver(ALICE) is False
        await asyncio.sleep(0.3)
        assert len(tg.calls_to("sendPhoto")) == 1
    finally:
        await stop(app)


async def test_a_learner_who_blocked_the_bot_is_switched_off_not_retried(
    tg: FakeTelegram, live: tuple[Engine, Clock]
) -> None:
    engine, _ = live
    await engine.reminders.set(BOB, BOB, time(23, 59), EVERY_DAY)  # Bob's reminder: on
    await engine.weekly.set(BOB, BOB, (datetime.now(UTC).weekday() + 1) % 7)
    tg.fail_next("sendPhoto", status=403)
    app = build(tg, engine)
    jobs = await start(app)
    try:
        await tg.await_for(
            lambda: [e for e in tg.errors if e[0] == "sendPhoto"], 10, "the refused report"
        )
        await until(lambda: ALICE not in jobs.scheduled)  # the scheduler heard: after the write
        setting = await engine.weekly.get(ALICE)
        assert setting is not None and not setting.enabled and setting.off_reason == "blocked"
        assert ALICE not in jobs.scheduled and BOB in jobs.scheduled
        shown = (await remind(engine, "")).text
        assert "Weekly report: off because Telegram said you blocked me" in shown
        # Blocked on a daily reminder: the report goes off too (it could not arrive either).
        await engine.reminders.off(BOB, reason="blocked")
        await until(lambda: BOB not in jobs.scheduled)
        bob = await engine.weekly.get(BOB)
        assert bob is not None and bob.off_reason == "blocked" and BOB not in jobs.scheduled
    finally:
        await stop(app)
    assert len(tg.calls_to("sendPhoto")) == 1  # refused once, never retried


async def said(tg: FakeTelegram, start: str) -> str:
    """The bot's first message to Alice that starts so, once it is there."""

    def found() -> list[str]:
        return [t for t in tg.texts(ALICE) if t.startswith(start)]

    return str((await tg.await_for(found, 10, f"a message starting {start!r}"))[0])


async def test_remind_weekly_in_telegram_schedules_it_and_previews_the_chart(
    tg: FakeTelegram, db: Database
) -> None:
    engine = Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter())
    app = build(tg, engine)
    jobs = await start(app, poll=True)
    try:
        tg.user_sends("/remind weekly fri", user_id=ALICE)
        answer = await said(tg, "📅 Weekly report:")
        assert answer.startswith("📅 Weekly report: on, Fris at 19:00")
        await until(lambda: ALICE in jobs.scheduled)
        fields = {f.name: str(f) for f in jobs.scheduled[ALICE].job.trigger.fields}
        assert (fields["hour"], fields["minute"], fields["day_of_week"]) == ("19", "0", "fri")
        tg.user_sends("/remind 07:30", user_id=ALICE)  # a reminder time: the report's too
        await said(tg, "⏰ Reminder set")

        def report_at() -> tuple[str, str] | None:
            job = jobs.scheduled.get(ALICE)
            fields = {f.name: str(f) for f in job.job.trigger.fields} if job else {}
            when = (fields.get("hour", ""), fields.get("minute", ""))
            return when if when == ("7", "30") else None

        assert await tg.await_for(report_at, 10, "the report moved to 07:30") == ("7", "30")
        tg.user_sends("/timezone Asia/Taipei", user_id=ALICE)

        def report_zone() -> str | None:
            job = jobs.scheduled.get(ALICE)
            zone = str(job.job.trigger.timezone) if job else ""
            return zone if zone == "Asia/Taipei" else None

        assert await tg.await_for(report_zone, 10, "the report in Taipei") == "Asia/Taipei"
        tg.user_sends("/remind weekly now", user_id=ALICE)
        await tg.await_for(lambda: tg.photos(ALICE), 10, "the preview")
        assert photo_caption(tg, ALICE).startswith("📅 Your week in English")
        tg.user_sends("/remind weekly off", user_id=ALICE)
        assert (await said(tg, "Weekly report off")).startswith("Weekly report off.")
        await until(lambda: ALICE not in jobs.scheduled)
        assert await engine.weekly.weeks(ALICE) == []  # the preview claimed nothing
    finally:
        await stop(app)
    await engine.drain()


async def test_two_replicas_due_at_once_send_the_week_once(
    tg: FakeTelegram, postgres_url: str
) -> None:
    """Two processes on one PostgreSQL, each with its JobQueue, outbox sender and catch-up: the
    first claims the week and is in the middle of sending the photo; the second claims nothing
    and leaves the kept row to the lease holder. One report arrives."""
    if datetime.now(UTC).time() >= time(23, 58):
        pytest.skip("too close to midnight UTC, when a report's day ends")
    apps, dbs = [], []
    yesterday = datetime.now(UTC) - timedelta(days=1)
    for _ in range(2):
        db = Database(url=postgres_url)
        await db.open()
        dbs.append(db)
        apps.append(build(tg, Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter())))
    earlier = Reminders(dbs[0], clock=lambda: yesterday)
    await earlier.set(ALICE, ALICE, time(0, 0), EVERY_DAY)
    await WeeklyReports(dbs[0], earlier).set(ALICE, ALICE, datetime.now(UTC).weekday())
    tg.hold("sendPhoto")
    try:
        first = await start(apps[0])  # its catch-up claims the week and starts sending
        await tg.await_calls("sendPhoto", 1, timeout=10)
        second = await start(apps[1])  # its catch-up finds the week claimed
        assert await second.deliver(ALICE) is False and await first.deliver(ALICE) is False
        await apps[1].bot_data.deliverer.flush(ALICE)  # the row is held by the first's lease
        tg.release("sendPhoto")
        await tg.await_for(lambda: tg.photos(ALICE), 10, "the weekly report")
        await asyncio.sleep(0.5)
        assert len(tg.calls_to("sendPhoto")) == 1 and len(tg.photos(ALICE)) == 1
    finally:
        tg.release()
        for app in apps:
            await stop(app)
        for db in dbs:
            await db.close()


@pytest.mark.slow
def test_the_terminal_turns_it_on_and_previews_the_report_as_text(tmp_path: Path) -> None:
    """`memora chat` as a process: `/remind weekly` and `/remind weekly now` (text only)."""
    with FakeOpenAI() as server:
        out = chat(
            memora_env(server, tmp_path / "data"),
            ["Hello, I practise every day.", "/remind weekly sun", "/remind", "/remind weekly now"],
            "--quiet",
        )
    assert "📅 Weekly report: on, Suns at 19:00 (until you set a reminder)" in out
    assert "You have no practice reminder." in out and "Weekly report: on, Suns" in out
    assert "📅 Your week in English" in out and "/remind weekly off to stop" in out
    assert "the 7 days before today)" in out  # which days, in the report's title
    assert "7 days before" in COMMANDS["remind"].help  # and in the command's help
    # the terminal keeps the setting, and says that it sends nothing
    assert out.count("Only the Telegram bot, `memora run`, sends reminders") == 2


async def test_learners_sharing_one_report_time_each_get_theirs_once_from_the_job_queue(
    tg: FakeTelegram, db: Database
) -> None:
    """Several learners' weekly jobs fire in the same second (the real JobQueue, not the
    start-up catch-up): each report goes out once through the outbox, none again that week."""
    now = datetime.now(UTC).replace(microsecond=0)
    if now.time() >= time(23, 55):
        pytest.skip("too close to midnight UTC, when a report's day ends")
    clock = Clock(now - timedelta(minutes=1))
    engine = Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter(), clock=clock)
    stored = (now + timedelta(minutes=2)).time().replace(second=0)
    learners = range(2001, 2005)
    for user in learners:
        await engine.reminders.set(user, user, stored, EVERY_DAY)
        await engine.reminders.off(user)  # only the weekly report: at the reminder's time
        await engine.weekly.set(user, user, now.weekday())
    clock.now = now
    app = build(tg, engine)
    jobs = await start(app)  # not due at start-up: nothing sent yet
    try:
        await asyncio.sleep(0.2)
        assert tg.photos() == []
        soon = (datetime.now(UTC) + timedelta(seconds=2)).replace(microsecond=0)
        for setting in await engine.weekly.enabled():
            jobs.schedule(setting, "UTC", soon.time())
        clock.now = now + timedelta(minutes=3)
        await tg.await_for(lambda: len(tg.photos()) >= len(learners), 15, "every report")
        assert [await jobs.deliver(user) for user in learners] == [False] * len(learners)
        await asyncio.sleep(0.3)
        assert sorted(p["chat_id"] for p in tg.photos()) == list(learners)
    finally:
        await stop(app)
    await engine.drain()
