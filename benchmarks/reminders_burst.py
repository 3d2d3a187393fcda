"""How many practice reminders a minute the bot sends when many learners share one time.

Run from the repository root::

    .venv/bin/python -m benchmarks.reminders_burst [--learners 1000]

Prints figures, passes or fails nothing. The real Application built by
``bot.telegram.build_application`` runs against the fake Bot API (tests/support/fake_telegram.py)
with its real rate limiter (AIORateLimiter: Telegram's ~30 messages a second for one bot) and PTB's
real JobQueue. N learners are stored through the core (a real SQLite file) with the same reminder
time; their daily jobs are then set to fire in the same second (the stored minute, moved to now —
nothing waits for 20:00). Each job does what it does at 20:00: reads the reminder, checks it is
due, writes the text from the learner model, claims the day and keeps the reminder in the durable
outbox (one transaction), then the outbox's sender sends it (the chat's lease, the rate limiter).

Baseline in the same run: the same N messages sent straight through the same bot and rate
limiter with no reminder machinery (what the rate limit alone allows).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time as clock
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

from bot.telegram import build_application
from bot.telegram.reminders import ReminderJobs
from memora.config import Settings, TelegramConfig
from memora.engine import Engine
from memora.reminders import EVERY_DAY, Reminders
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import FakeLLM

FIRST_USER = 100_000


async def arrivals(tg: FakeTelegram, n: int, limit: float) -> list[float]:
    """perf_counter() when each of the n messages was seen at the fake (polled every 0.1 s: the
    fake copies its whole call log on each look, which must not starve the bot's loop)."""
    seen: list[float] = []
    deadline = clock.perf_counter() + limit
    while len(seen) < n and clock.perf_counter() < deadline:
        count = len(tg.calls_to("sendMessage"))
        now = clock.perf_counter()
        seen += [now] * (count - len(seen))
        await asyncio.sleep(0.1)
    return seen


def figures(label: str, start: float, seen: list[float], n: int) -> str:
    if len(seen) < n:
        return f"{label:34} only {len(seen)}/{n} sent"
    span = seen[-1] - start
    per_minute = n / span * 60
    delays = [t - start for t in seen]
    return (
        f"{label:34} {span:6.1f} s  {per_minute:7.0f}/min  first {delays[0]:5.2f} s  "
        f"median {statistics.median(delays):5.1f} s  last {delays[-1]:5.1f} s"
    )


async def outbox_states(db: Database) -> list[tuple[str, int]]:
    """(state, rows) of the reminders in the outbox, once none is pending (or after 10 s): the
    fake has the last message a moment before its sender marks it sent."""
    deadline = clock.monotonic() + 10
    while True:
        rows = await db.connection.rows(
            "SELECT state, COUNT(*) FROM outbox WHERE kind='reminder' GROUP BY state"
        )
        kept = [(str(r[0]), int(r[1])) for r in rows]
        if all(state != "pending" for state, _ in kept) or clock.monotonic() > deadline:
            return kept
        await asyncio.sleep(0.05)


async def run(n: int, data_dir: Path) -> None:
    with FakeTelegram() as tg:
        db = Database(data_dir / "bench.sqlite3")
        await db.open()
        engine = Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter())
        settings = Settings(
            telegram=TelegramConfig(
                token=tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url
            )
        )
        app: Any = build_application(settings, engine)
        async with app:
            await app.post_init(app)  # what run_polling does: restores the (empty) reminders
            await app.start()
            jobs: ReminderJobs = app.bot_data.reminder_jobs
            jobs.close()  # stored below in bulk: no reschedule per insert
            yesterday = datetime.now(UTC) - timedelta(days=1)
            store = Reminders(db, clock=lambda: yesterday)
            users = range(FIRST_USER, FIRST_USER + n)
            for user in users:
                await store.set(user, user, time(0, 0), EVERY_DAY)
            # One second for the jobs to fire in, far enough ahead for all of them to be added
            # first (a cron job added after its second has passed would wait until tomorrow).
            lead = timedelta(seconds=3 + n / 100)
            fire = (datetime.now(UTC) + lead).replace(microsecond=0)
            for reminder in await engine.reminders.enabled():
                jobs.schedule(reminder, "UTC", at=fire.time())
            if datetime.now(UTC) >= fire:
                raise SystemExit("scheduling took longer than the lead: raise it and run again")
            start = clock.perf_counter() + (fire - datetime.now(UTC)).total_seconds()
            reminders_seen = await arrivals(tg, n, limit=10 + n / 5)
            reached = {
                m["chat"]["id"] for m in tg.sent_messages() if m.get("text", "").startswith("⏰")
            }
            again = [await jobs.deliver(user) for user in users[:50]]
            kept = await outbox_states(db)

            tg.reset()
            start_plain = clock.perf_counter()
            sends = [app.bot.send_message(user, "Time to practise!") for user in users]
            plain = asyncio.gather(*sends)
            plain_seen = await arrivals(tg, n, limit=10 + n / 5)
            await plain
            await app.stop()
            await app.post_shutdown(app)
        await db.close()
    print(f"{n} learners, one reminder time; the bot's own rate limiter (29 sends a second)")
    print(figures("reminders (JobQueue → outbox → send)", start, reminders_seen, n))
    print(figures("baseline: plain sends, same limiter", start_plain, plain_seen, n))
    ratio = (reminders_seen[-1] - start) / (plain_seen[-1] - start_plain)
    print(f"reminders / baseline time: {ratio:.2f}×; distinct learners reached: {len(reached)}")
    print(f"sent again when re-run the same day: {sum(again)} of {len(again)}")
    states = ", ".join(f"{count} {state}" for state, count in sorted(kept))
    print(f"reminder rows in the outbox: {states or 'none'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--learners", type=int, default=1000)
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args.learners, Path(tmp)))


if __name__ == "__main__":
    main()
