"""Throughput and ordering of the real Telegram application under a burst of messages.

Run from the repository root::

    .venv/bin/python -m benchmarks.telegram_throughput [--chats 4] [--messages 5] [--latency 0.2]

Issue 7 item 9's load (fact-bearing messages: each is retrieved against, extracted into a memory,
embedded and stored by the real local model and Chroma), with the baseline in the same run::

    .venv/bin/python -m benchmarks.telegram_throughput --chats 100 --messages 5 \
        --latency 0.5 --facts --before [--sqlite-synchronous NORMAL]

With N × M replies the floor is N × M / 30 s (Telegram's ~30 messages a second): the table gives
the wall time against it, the replies received against those expected, and the most sendMessage
calls, and the most Bot API calls of any kind, seen in any one second, globally and in any one
chat (Telegram: about 30 a second for a bot, about one message a second in a chat).

Wall time depends on what else the machine runs; CPU does not: the second table gives the bot's
CPU per turn (the process's CPU less what the fake Bot API, which serves from threads of this
process, spent), until the last reply and until the after-reply work was done too, split by
thread. The last lines say how long the one SQLite connection's thread was busy (its commits
wait for fsyncs): every chat's reads and writes queue for it.

Prints figures, passes or fails nothing. N private chats each send M messages at once to the fake
Bot API server (tests/support/fake_telegram.py); the real python-telegram-bot Application built by
``bot.telegram.build_application`` long-polls it over HTTP, with its rate limiter, typing
indicator and HTML rendering. The engine is the real one over real SQLite in a temp dir, with an
LLM that answers after --latency seconds (no long-term store, no summaries within the run). The
wall time from the burst to the last reply is compared with the ideal (M × latency: chats fully
parallel, each chat strictly serial) and with fully serial handling (N × M × latency), and every
chat's replies are checked to be in the order its messages were sent.

``--compare`` also runs the same burst through two other update processors with the same
handlers: PTB's default (one update at a time) and plain ``concurrent_updates(True)``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telegram.ext import (
    AIORateLimiter,
    BaseRateLimiter,
    BaseUpdateProcessor,
    SimpleUpdateProcessor,
)

from bot.telegram import build_application
from memora.blocking import BACKGROUND_THREAD
from memora.config import Settings, TelegramConfig
from memora.engine import Engine, EngineConfig
from memora.llm import ChatMessage, Completion, OnDelta, Parsed, Usage
from memora.longterm import MemoryStore
from memora.longterm.embeddings import LocalUSE
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fake_telegram import FakeTelegram


class SlowEcho:
    """An LLM that takes `latency` seconds and echoes the last user message."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def complete(
        self,
        instructions: str,
        messages: list[ChatMessage],
        on_delta: OnDelta | None = None,
        **_: Any,
    ) -> Completion:
        await asyncio.sleep(self.latency)
        last = next((m.content for m in reversed(messages) if m.role == "user"), "")
        if on_delta is not None:
            await on_delta(f"Echo: {last}")
        return Completion(f"Echo: {last}", Usage(len(last) // 4 + 1, len(last) // 4 + 3))

    async def parse(
        self, instructions: str, messages: list[ChatMessage], schema: Any, **_: Any
    ) -> Parsed:
        """The extractor (--facts): after `latency`, the user's message as one memory."""
        await asyncio.sleep(self.latency)
        said = next((m.content for m in messages if "nurse" in m.content), "")
        fact = said.split("\n")[-1][-200:] or "The user is a nurse."
        obj = schema.model_validate({"memories": [{"text": fact, "category": "personal"}]})
        raw = obj.model_dump_json()
        return Parsed(text=raw, usage=Usage(len(said) // 4 + 1, len(raw) // 4 + 1), parsed=obj)

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int:
        return sum(len(m.content) // 4 + 4 for m in messages)

    async def aclose(self) -> None:
        pass


@dataclass
class Result:
    label: str
    wall: float  # from the burst to the last reply
    ordered: bool
    replies: int  # replies received (expected: chats × messages)
    requests: int
    max_sends: int  # most sendMessage calls in any one second
    max_calls: int  # most Bot API calls of any kind in any one second
    max_chat_calls: int  # most Bot API calls to one chat in any one second
    max_chat_sends: int  # most sendMessage calls to one chat in any one second
    cpu_reply: float  # the bot's CPU seconds from the burst to the last reply
    cpu_total: float  # … until its after-reply work (extraction, storing) was done too
    cpu_threads: dict[str, float]  # of cpu_total, per kind of thread (see Cpu.by_kind)
    fake_cpu: float  # the fake Bot API's own CPU seconds (same process, taken off the above)
    sqlite_busy: float  # wall seconds the one SQLite connection's thread spent on statements


async def burst(
    label: str,
    processor: BaseUpdateProcessor | None,
    chats: int,
    messages: int,
    latency: float,
    data_dir: Path,
    facts: bool = False,
    limiter: BaseRateLimiter[Any] | None = None,
    synchronous: str = "",
) -> Result:
    with FakeTelegram() as tg:
        folder = data_dir / label.split()[0]
        db = Database(folder / "memora.sqlite3")
        await db.open()
        if synchronous:  # what the commits' fsyncs cost (memora keeps FULL)
            await db.connection.db.execute(f"PRAGMA synchronous={synchronous}")
        sqlite = SqliteBusy(db)
        store = None
        if facts:
            embedder = LocalUSE()
            embedder.warm_up()  # loading the weights is start-up, not a turn
            store = await MemoryStore.create(folder / "chroma", embedder)
        engine = Engine(
            db=db,
            llm=SlowEcho(latency),
            counter=LocalTokenCounter(),
            store=store,
            config=EngineConfig(
                max_input_tokens=4000, max_recent_turns=100, extraction_enabled=facts
            ),
        )
        settings = Settings(
            telegram=TelegramConfig.model_validate(
                {"token": tg.token, "base_url": tg.base_url, "base_file_url": tg.base_file_url}
            )
        )
        # processor: the same handlers behind another update processor, for comparison
        app: Any = build_application(
            settings, engine, update_processor=processor, rate_limiter=limiter
        )
        expected = chats * messages
        async with app:
            await app.post_init(app)
            await app.start()
            await app.updater.start_polling(timeout=1, poll_interval=0)
            await tg.await_calls("getMe")
            users = [5000 + i for i in range(chats)]
            cpu = Cpu(tg)
            sqlite.seconds = 0.0
            start = time.perf_counter()
            for n in range(messages):
                for user in users:
                    tg.user_sends(said(user, n, facts), user_id=user, first_name=f"U{user}")
            await tg.await_for(  # a count, not a copy of every message: the poll stays cheap
                lambda: tg.call_count("sendMessage") >= expected,
                timeout=60 + expected * latency * 2,
                what="every reply",
            )
            wall = time.perf_counter() - start
            cpu_reply = cpu.bot()
            await engine.drain()  # the after-reply work the burst left (extraction, storing)
            cpu_total, cpu_threads = cpu.bot(), cpu.by_kind()
            sqlite_busy = sqlite.seconds
            await app.updater.stop()
            await app.stop()
            await app.post_shutdown(app)
        await engine.drain()
        if store is not None:
            await store.close()
        await db.close()
        ordered = all(
            tg.texts(user) == [f"Echo: {said(user, n, facts)}" for n in range(messages)]
            for user in users
        )
        return Result(
            label,
            wall,
            ordered,
            len(tg.sent_messages()),
            len(tg.calls),
            tg.max_per_second("sendMessage"),
            tg.max_per_second(),
            tg.max_per_second(per_chat=True),
            tg.max_per_second("sendMessage", per_chat=True),
            cpu_reply,
            cpu_total,
            cpu_threads,
            cpu.fake(),
            sqlite_busy,
        )


class Cpu:
    """CPU seconds since it was made: the whole process's (bot, and the fake Bot API serving
    it from its own threads) less the fake's, and per kind of thread (the event loop's, the
    SQLite connection's, the worker threads that embed and write Chroma). CPU, not wall time,
    so what other programs do on the machine does not count."""

    def __init__(self, tg: FakeTelegram) -> None:
        self.tg = tg
        self.process = time.process_time()
        self.fake0 = tg.cpu_seconds
        self.threads0 = _thread_cpu()

    def fake(self) -> float:
        return self.tg.cpu_seconds - self.fake0

    def bot(self) -> float:
        return time.process_time() - self.process - self.fake()

    def by_kind(self) -> dict[str, float]:
        """CPU seconds per kind of (still running) thread since the start."""
        kinds: dict[str, float] = {}
        for ident, (kind, seconds) in _thread_cpu().items():
            before = self.threads0.get(ident, (kind, 0.0))[1]
            kinds[kind] = kinds.get(kind, 0.0) + seconds - before
        return kinds


class SqliteBusy:
    """Wall seconds the database connection's one thread spends running statements, commits'
    fsyncs included: every chat's reads and writes queue for that thread, so when this nears the
    burst's wall time, the database is what the burst waits for. (Measured by wrapping each call
    aiosqlite queues for its thread; aiosqlite has no public hook for it.)"""

    def __init__(self, db: Database) -> None:
        self.seconds = 0.0
        conn: Any = db.connection.db
        queue = conn._tx

        def timed(call: Any) -> Any:
            def run() -> Any:
                started = time.perf_counter()
                try:
                    return call()
                finally:
                    self.seconds += time.perf_counter() - started

            return run

        class Timed:
            def put_nowait(self, item: tuple[Any, Any]) -> None:
                future, call = item
                queue.put_nowait((future, timed(call)))

        conn._tx = Timed()


THREAD_KINDS = {
    "MainThread": "loop",
    "_connection_worker_thread": "sqlite",  # aiosqlite's one thread per connection
    "asyncio_": "workers",  # asyncio.to_thread: the embedder, Chroma, for replies
    BACKGROUND_THREAD: "background",  # the same for after-reply work (memora.blocking)
    "serve_forever": "fake",  # the fake Bot API's threads (its CPU is counted apart)
    "process_request_thread": "fake",
}


def _thread_cpu() -> dict[int, tuple[str, float]]:
    """Each live thread's kind and CPU seconds (Linux's per-thread CPU clocks)."""
    out = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        kind = next((k for name, k in THREAD_KINDS.items() if name in thread.name), "other")
        try:
            clock = time.pthread_getcpuclockid(thread.ident)
            out[thread.ident] = (kind, time.clock_gettime(clock))
        except (OSError, AttributeError):  # the thread ended meanwhile; or not on Linux
            continue
    return out


def said(user: int, n: int, facts: bool) -> str:
    if not facts:
        return f"chat {user} message {n}"
    return f"chat {user} message {n}: I work as a nurse in Taipei and my goal is TOEIC {800 + n}."


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chats", type=int, default=4)
    p.add_argument("--messages", type=int, default=5)
    p.add_argument("--latency", type=float, default=0.2, help="seconds per model answer")
    p.add_argument("--compare", action="store_true", help="also run two other processors")
    p.add_argument(
        "--facts", action="store_true", help="fact-bearing messages: memory, extraction, store"
    )
    p.add_argument(
        "--before",
        action="store_true",
        help="first the same burst with PTB's plain AIORateLimiter (what the bot used before)",
    )
    p.add_argument(
        "--profile",
        metavar="FILE",
        help="cProfile the event loop's thread during the (after) burst into FILE "
        "(then: python -m pstats FILE); the CPU figures then include the profiler's overhead",
    )
    p.add_argument(
        "--sqlite-synchronous",
        choices=["NORMAL", "OFF"],
        help="also run the burst with this SQLite synchronous setting (memora uses FULL: every "
        "commit waits for an fsync): what the commits' fsyncs cost the burst",
    )
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    n, m, lat = args.chats, args.messages, args.latency
    ideal, serial = m * lat, n * m * lat
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        if args.before:
            ptb = AIORateLimiter(max_retries=3)
            label = "before: PTB AIORateLimiter"
            runs.append(await burst(label, None, n, m, lat, Path(tmp), args.facts, ptb))
        label = "per-chat locks (bot.telegram)"
        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()  # the event loop's thread only: where every chat waits its turn
        runs.append(await burst(label, None, n, m, lat, Path(tmp), args.facts))
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        if args.sqlite_synchronous:
            label = f"… SQLite synchronous={args.sqlite_synchronous}"
            runs.append(
                await burst(
                    label, None, n, m, lat, Path(tmp), args.facts,
                    synchronous=args.sqlite_synchronous,
                )
            )  # fmt: skip
        if args.compare:
            runs.append(
                await burst("serial (PTB default)", SimpleUpdateProcessor(1), n, m, lat, Path(tmp))
            )
            runs.append(
                await burst(
                    "concurrent (no chat lock)", SimpleUpdateProcessor(256), n, m, lat, Path(tmp)
                )
            )
    floor = max(ideal, n * m / 30)  # Telegram sends about 30 messages a second
    kind = "fact-bearing " if args.facts else ""
    turns = n * m
    print(f"{n} chats × {m} {kind}messages, model latency {lat:.2f} s")
    print(f"ideal (M × latency):            {ideal:6.2f} s")
    print(f"floor (max(ideal, N×M / 30/s)): {floor:6.2f} s")
    print(f"fully serial (N × M × latency): {serial:6.2f} s")
    print(
        f"{'processor':32} {'wall s':>7} {'× floor':>8} {'replies':>9} {'order':>6} "
        f"{'calls':>6} {'sends/s':>7} {'calls/s':>7} {'chat sends/s':>12} {'chat calls/s':>12}"
    )
    for r in runs:
        print(
            f"{r.label:32} {r.wall:7.2f} {r.wall / floor:8.2f} {r.replies:4d}/{turns:<4d} "
            f"{'kept' if r.ordered else 'BROKEN':>6} {r.requests:6d} {r.max_sends:7d} "
            f"{r.max_calls:7d} {r.max_chat_sends:12d} {r.max_chat_calls:12d}"
        )
    print("sends/s, calls/s: most sendMessage / Bot API calls in any one second (Telegram: ~30);")
    print("chat …/s: the same to any one chat (Telegram: about 1 message a second in a chat).")
    print()
    print("the bot's CPU per turn, ms (process CPU less the fake Bot API's own; CPU, not wall)")
    kinds = ["loop", "sqlite", "workers", "background", "other"]
    print(
        f"{'processor':32} {'to last reply':>13} {'with after-reply':>16} "
        + " ".join(f"{k:>8}" for k in kinds)
        + f" {'native':>8} {'fake API':>8}"
    )
    for r in runs:
        ms = 1000 / turns
        print(
            f"{r.label:32} {r.cpu_reply * ms:13.1f} {r.cpu_total * ms:16.1f} "
            + " ".join(f"{r.cpu_threads.get(k, 0.0) * ms:8.1f}" for k in kinds)
            + f" {(r.cpu_total - sum(r.cpu_threads.get(k, 0.0) for k in kinds)) * ms:8.1f}"
            + f" {r.fake_cpu * ms:8.1f}"
        )
    print(
        "loop: the event loop's thread (it serves every chat); sqlite: the database connection's"
        " thread;\nworkers: asyncio.to_thread (embedding, Chroma) for replies; background: the"
        " same for after-reply work;\nnative: threads Python did not start (BLAS, Chroma's own)."
    )
    print()
    for r in runs:
        print(
            f"{r.label:32} the SQLite connection's thread was busy {r.sqlite_busy:6.2f} s "
            f"({r.sqlite_busy * 1000 / turns:.1f} ms a turn, fsyncs included; the burst's "
            f"wall time: {r.wall:.2f} s)"
        )


if __name__ == "__main__":
    asyncio.run(main())
