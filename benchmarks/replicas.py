"""1 replica vs 3: real `memora run` processes in webhook mode on PostgreSQL + a Chroma server.

--chats learners each send --messages messages, each waiting for the reply to the last one (as
a learner does); the model (the fake OpenAI server) takes --latency seconds per answer, and every
update goes to the next replica round-robin (what the load balancer in deploy/ does). Prints the
wall time against the ideal: the larger of the model-bound time (messages × latency, every chat
in parallel) and Telegram's send limit (all replies at 30 messages a second).

    .venv/bin/python -m benchmarks.replicas [--chats 100] [--messages 5] [--latency 0.5]

PostgreSQL (pgserver wheel) and the Chroma server (chroma run) are started here, as in the tests.
Each replica's rate limiter spends 29/N sends a second, N = the replicas alive by their
heartbeats, so together they stay inside Telegram's per-bot limit (the fake Bot API does not
enforce it). All replicas share this machine's cores: on a 2-core machine 3 replicas cannot beat
one; the figure says what replication costs, not what more machines would gain.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import sys
import tempfile
import time
from pathlib import Path

from tests.support.bot import WebhookBot
from tests.support.engines import (
    engine_root,
    fresh_database,
    start_chroma,
    start_postgres,
)
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram

REPLICAS = [int(a) for a in __import__("os").environ.get("REPLICAS", "1,3").split(",")]
TELEGRAM_RATE = 30.0  # messages a second per bot


def run(replicas: int, chats: int, messages: int, latency: float, root: Path, pg_url: str,
        chroma_url: str) -> tuple[float, bool]:  # fmt: skip
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        llm.kind_latency["reply"] = latency
        bots = []
        try:
            for n in range(replicas):
                bot = WebhookBot(tg, llm, root / f"d{replicas}-{n}", root / f"b{replicas}-{n}.log")
                bot.env["MEMORA_STORAGE__DATABASE_URL"] = pg_url
                bot.env["MEMORA_LONGTERM__CHROMA_URL"] = chroma_url
                bot.env["MEMORA_EXTRACTION__ENABLED"] = "false"
                bot.next_update_id += n * 100_000
                bot.next_message_id += n * 100_000
                bot.start()
                bots.append(bot)
            counter = iter(range(10**9))

            def learner(chat: int) -> bool:
                said = []
                for i in range(messages):
                    bot = bots[next(counter) % replicas]
                    text = f"chat {chat} message {i}"
                    said.append(text)
                    bot.ask(text, chat)
                got = [t for t in tg.texts(chat) if t.startswith("Echo: ")]
                if got != [f"Echo: {t}" for t in said]:
                    print(f"chat {chat}: sent {said}\n  got {tg.texts(chat)}", file=sys.stderr)
                    return False
                return True

            start = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(chats) as pool:
                ordered = all(pool.map(learner, range(900_000, 900_000 + chats)))
            return time.perf_counter() - start, ordered
        finally:
            for bot in bots:
                if bot.proc is not None:
                    bot.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--chats", type=int, default=100)
    ap.add_argument("--messages", type=int, default=5)
    ap.add_argument("--latency", type=float, default=0.5)
    args = ap.parse_args()
    n, m, lat = args.chats, args.messages, args.latency
    ideal = max(m * lat, n * m / TELEGRAM_RATE)
    results = {}
    with engine_root() as root, tempfile.TemporaryDirectory() as tmp:
        pg = start_postgres(root)
        chroma = start_chroma(root)
        try:
            for replicas in REPLICAS:
                results[replicas] = run(
                    replicas, n, m, lat, Path(tmp), fresh_database(pg), chroma.url
                )
        finally:
            chroma.stop()
            pg.stop()
    print(f"{n} chats × {m} messages, model latency {lat:.2f} s, round-robin over the replicas")
    print(f"ideal: max(model-bound {m * lat:.1f} s, Telegram 30/s {n * m / TELEGRAM_RATE:.1f} s)")
    for replicas, (wall, ordered) in results.items():
        print(
            f"{replicas} replica{'s' if replicas > 1 else ' '}: {wall:7.1f} s  "
            f"x{wall / ideal:.2f} ideal  order {'kept' if ordered else 'BROKEN'}"
        )


if __name__ == "__main__":
    asyncio.run(asyncio.to_thread(main))
