"""Per-turn engine overhead on the two short-term stores: SQLite (the default) vs PostgreSQL.

The real engine (token counting, context building, one transaction per turn, the after-reply
summary) against a zero-latency fake model, so what is timed is the engine and its store. Turns
go round-robin over several chats. Prints median and p95 per turn for each backend and the
PostgreSQL / SQLite ratio, measured in the same run.

    .venv/bin/python -m benchmarks.storage_backends [--turns 300] [--chats 10] [--database-url URL]

Without --database-url a PostgreSQL 16 server is started from the pgserver wheel (dev extra),
on a Unix socket, with its default (durable) settings.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from benchmarks.core_turns import TOPICS, ZeroLatencyLLM, pct
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database


async def run(db: Database, turns: int, chats: int) -> tuple[list[float], list[float]]:
    await db.open()
    rng = random.Random(1)
    engine = Engine(db=db, llm=ZeroLatencyLLM(), counter=LocalTokenCounter(), config=EngineConfig())
    reply_ms: list[float] = []
    after_ms: list[float] = []
    for i in range(turns):
        chat = ChatRef(1000 + i % chats)
        t0 = time.perf_counter()
        reply = await engine.handle_turn(chat, UserRef(chat.id, "learner"), rng.choice(TOPICS))
        t1 = time.perf_counter()
        await engine.drain()
        after_ms.append((time.perf_counter() - t1) * 1000)
        reply_ms.append((t1 - t0) * 1000)
        assert reply.ok, reply.text
    await db.close()
    return reply_ms, after_ms


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--chats", type=int, default=10)
    ap.add_argument("--database-url", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url, server = args.database_url, None
        if not url:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import pgserver  # lazily: the dev extra's PostgreSQL wheel; its import warns

                server = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="delete")
            url = server.get_uri()
        results = {
            "SQLite": await run(Database(Path(tmp) / "b.sqlite3"), args.turns, args.chats),
            "PostgreSQL": await run(Database(url=url), args.turns, args.chats),
        }
        if server is not None:
            server.cleanup()
    print(f"{args.turns} turns over {args.chats} chats, zero-latency model")
    print(f"{'':12} {'reply path ms':>22}   {'after-reply ms':>22}")
    print(f"{'':12} {'median':>10} {'p95':>10}   {'median':>10} {'p95':>10}")
    for name, (reply, after) in results.items():
        print(
            f"{name:12} {statistics.median(reply):10.2f} {pct(reply, 95):10.2f}   "
            f"{statistics.median(after):10.2f} {pct(after, 95):10.2f}"
        )
    (sr, sa), (pr, pa) = results["SQLite"], results["PostgreSQL"]
    ratio_reply = statistics.median(pr) / statistics.median(sr)
    ratio_after = statistics.median(pa) / statistics.median(sa)
    print(f"PostgreSQL / SQLite (median): reply path x{ratio_reply:.2f}, after x{ratio_after:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
