"""CPU per turn of the real `memora run` process, with the fakes in other processes.

Run from the repository root::

    .venv/bin/python -m benchmarks.turn_cpu [--chats 100] [--messages 5] [--latency 0.5]
        [--profile] [--runs 1]

What a user runs: `memora run` as its own process (long polling, the default SQLite + local
Chroma + local embedder), talking over loopback HTTP to the fake Bot API
(tests/support/fake_telegram.py, in this process) and the fake OpenAI server
(tests/support/fake_openai.py, in a child process), both answering as the real services do. Each of
N private chats sends M fact-bearing messages at once; every reply costs the model `--latency`
seconds, every extraction call too, and each extraction keeps the message as one memory (embedded
and written to Chroma), so a turn is the whole product: reply, after-reply extraction with a memory
write, the learner model's updates, the durable inbox and outbox.

Prints, per run: the wall time from the burst to the last reply against the floor (N × M / 30 s:
Telegram's ~30 messages a second), and the bot process's CPU (user + system, read from /proc,
nothing of the fakes) per turn, until the last reply and until the after-reply work is done.
The bot answers one message before the burst (start-up and first-use costs are not a turn's).
With --profile, py-spy samples the bot process during the burst and the table gives where its
CPU went: by package of the innermost frame, and the functions with the most samples.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from tests.support.fake_openai import FakeOpenAI, FakeRequest, default_responder, minimal_instance
from tests.support.fake_telegram import FakeTelegram

ROOT = Path(__file__).resolve().parent.parent
TELEGRAM_RATE = 30.0  # messages a second, one bot, all chats
_USER_MESSAGE = re.compile(r"<user_message>\n(.*?)\n</user_message>", re.DOTALL)


def said(chat: int, n: int) -> str:
    return f"chat {chat} message {n}: I work as a nurse in Taipei and my goal is TOEIC {800 + n}."


def keeps_each_message(req: FakeRequest) -> Any:
    """The extractor of a fact-bearing load: the learner's message as one memory."""
    if req.kind != "structured":
        return default_responder(req)
    answer = minimal_instance(req.schema) if req.schema else {}
    found = _USER_MESSAGE.search(req.last_user_message)
    if found:
        answer["memories"] = [{"text": found.group(1)[:200], "category": "personal"}]
    return answer


def serve_openai(conn: Connection, latency: float) -> None:
    """The fake OpenAI server in its own process, until told to stop; then its request counts."""
    with FakeOpenAI() as server:
        server.responder = keeps_each_message
        server.kind_latency = {"reply": latency, "structured": latency}
        conn.send(server.base_url)
        conn.recv()
        conn.send(collections.Counter(r.kind for r in server.requests))


def thread_cpu(pid: int) -> dict[int, float]:
    """User + system CPU of each thread of a process so far (thread id → seconds)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Thread id → what the thread is, from py-spy's dump: its Python name and the function at
    the bottom of its stack that is ours or a library's (the worker's job)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    try:
        text = subprocess.run(
            [spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    names: dict[int, str] = {}
    for block in re.split(r"\n(?=Thread )", text):
        head = re.match(r"Thread (0x[0-9A-Fa-f]+|\d+) \(\w+\): \"([^\"]*)\"", block)
        if not head:
            continue
        tid = int(head.group(1), 0)
        frames = re.findall(r"^\s+(\S+) \(([^)]*)\)$", block, re.MULTILINE)
        job = next(
            (
                f"{fn} ({where.rsplit('/', 1)[-1]})"
                for fn, where in frames[:6]
                if "threading.py" not in where and "thread.py" not in where
            ),
            "",
        )
        names[tid] = f"{head.group(2)} {job}".strip()
    return names


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    wall: float
    floor: float
    cpu_reply: float  # seconds, burst start to last reply
    cpu_total: float  # seconds, burst start to the after-reply work done
    turns: int
    profile: Path | None
    threads: list[tuple[str, float]]  # (thread, CPU seconds in the burst), most first


def start_bot(
    tg: FakeTelegram, llm_url: str, data: Path, log: Path, tree: Path = ROOT
) -> subprocess.Popen[bytes]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_", "OPENAI_"))},
        "MEMORA_TELEGRAM__TOKEN": tg.token,
        "MEMORA_TELEGRAM__BASE_URL": tg.base_url,
        "MEMORA_TELEGRAM__BASE_FILE_URL": tg.base_file_url,
        "MEMORA_TELEGRAM__POLL_TIMEOUT": "1",
        "MEMORA_LLM__BASE_URL": llm_url,
        "MEMORA_LLM__API_KEY": "bench",
        "MEMORA_STORAGE__DATA_DIR": str(data),
        "MEMORA_LOGGING__LEVEL": "INFO",
    }
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "run"], cwd=tree, env=env, stdout=out, stderr=out
        )
    tg.wait_for(lambda: tg.calls_to("deleteWebhook") or proc.poll() is not None, 120, "start")
    if proc.poll() is not None:
        raise SystemExit("the bot did not start:\n" + log.read_text()[-3000:])
    return proc


def wait_idle(pid: int, quiet: float = 0.02, every: float = 0.5, limit: float = 300) -> None:
    """Until the process spends less than `quiet` s of CPU in `every` s (its work is done)."""
    deadline = time.monotonic() + limit
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(every)
        now = cpu_seconds(pid)
        if now - last < quiet:
            return
        last = now


def one_run(
    chats: int, messages: int, latency: float, profile: bool, tmp: Path, tree: Path = ROOT
) -> Run:
    parent, child = multiprocessing.get_context("spawn").Pipe()
    server = multiprocessing.get_context("spawn").Process(
        target=serve_openai, args=(child, latency), daemon=True
    )
    server.start()
    llm_url = parent.recv()
    with FakeTelegram() as tg:
        bot = start_bot(tg, llm_url, tmp / "data", tmp / "bot.log", tree)
        try:
            first = tg.user_sends("Hello! I'm a nurse in Taipei.", user_id=1)
            tg.wait_messages(count=1, after=first, timeout=120)
            wait_idle(bot.pid)
            spy = None
            out = tmp / "profile.txt"
            if profile:
                spy = subprocess.Popen(
                    [
                        shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy"),
                        "record",
                        "--pid",
                        str(bot.pid),
                        "--rate",
                        "250",
                        "--format",
                        "raw",
                        "--output",
                        str(out),
                        "--nonblocking",
                        "--threads",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1.0)  # py-spy attaches
            users = list(range(1000, 1000 + chats))
            threads0 = thread_cpu(bot.pid)
            cpu0, t0 = cpu_seconds(bot.pid), time.monotonic()
            for n in range(messages):
                for user in users:
                    tg.user_sends(said(user, n), user_id=user, first_name=f"U{user}")
            tg.wait_for(
                lambda: all(len(tg.sent_messages(u)) >= messages for u in users),
                600,
                "every reply",
            )
            wall, cpu_reply = time.monotonic() - t0, cpu_seconds(bot.pid) - cpu0
            wait_idle(bot.pid)
            cpu_total = cpu_seconds(bot.pid) - cpu0 - 0.5 * 0.02  # less the idle check's window
            threads = {t: c - threads0.get(t, 0.0) for t, c in thread_cpu(bot.pid).items()}
            names = thread_names(bot.pid) if profile else {}
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
        finally:
            bot.send_signal(signal.SIGTERM)
            bot.wait(timeout=120)
    parent.send("stop")
    parent.recv()
    server.join(timeout=10)
    turns = chats * messages
    by_thread = sorted(
        ((names.get(t, f"thread {t}"), c) for t, c in threads.items() if c > 0),
        key=lambda tc: -tc[1],
    )
    return Run(
        wall,
        turns / TELEGRAM_RATE,
        cpu_reply,
        cpu_total,
        turns,
        out if profile else None,
        by_thread,
    )


# Innermost frames of a thread that waits (py-spy counts a blocking call as on CPU)
_WAITING = re.compile(r"\.select \(selectors\.py|wait \(threading\.py|\bget \(queue\.py")


def summarize_profile(path: Path, top: int = 25) -> str:
    """py-spy's raw stacks (with --threads) of the event loop's thread, the one that runs the
    turn's Python: samples by package of the innermost frame, then the functions with the most
    samples anywhere on the stack (inclusive). Samples waiting in epoll are left out."""
    by_package: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        parts = stack.split(";")
        at = next((i for i, part in enumerate(parts[:3]) if part.startswith("thread ")), None)
        if not count.isdigit() or at is None or "MainThread" not in parts[at]:
            continue
        frames = [f for f in parts[at + 1 :] if f]
        if not frames or _WAITING.search(frames[-1]):
            continue
        n = int(count)
        total += n
        by_package[_package(frames[-1])] += n
        for frame in set(frames):
            inclusive[frame] += n
    if not total:
        return "(no samples)"
    rows = [f"event loop thread: {total} samples on CPU", ""]
    rows += [f"{'samples':>8} {'share':>6}  package of the innermost frame"]
    rows += [f"{n:>8} {n / total:>6.1%}  {name}" for name, n in by_package.most_common(top)]
    rows += ["", f"{'samples':>8} {'share':>6}  function (inclusive)"]
    rows += [f"{n:>8} {n / total:>6.1%}  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(rows)


def _package(frame: str) -> str:
    """'handle_turn (memora/engine.py:512)' → 'memora.engine'; site-packages → its package."""
    found = re.search(r"\((.*?)(?::\d+)?\)$", frame)
    path = found.group(1) if found else frame
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0]
    if "/python3." in path:
        return "stdlib:" + Path(path).stem
    parts = Path(path).with_suffix("").parts
    for root in ("memora", "bot"):
        if root in parts:
            return ".".join(parts[parts.index(root) :][:2])
    return path


def _line(run: Run) -> str:
    return (
        f"{run.turns} turns, wall {run.wall:.1f} s vs floor {run.floor:.1f} s "
        f"({run.wall / run.floor:.2f}×); bot CPU {1000 * run.cpu_reply / run.turns:.1f} "
        f"ms/turn to the last reply, {1000 * run.cpu_total / run.turns:.1f} ms/turn "
        "with the after-reply work"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chats", type=int, default=100)
    p.add_argument("--messages", type=int, default=5)
    p.add_argument("--latency", type=float, default=0.5)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--profile", action="store_true", help="sample the bot with py-spy")
    p.add_argument("--keep-profile", type=Path, help="copy py-spy's raw stacks here")
    p.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (e.g. a git worktree of an older commit): its bot runs the same "
        "burst, alternating with this one, and the table compares them",
    )
    args = p.parse_args()
    runs, base_runs = [], []
    for i in range(args.runs):
        if args.baseline is not None:
            with tempfile.TemporaryDirectory() as tmp:
                base = one_run(
                    args.chats,
                    args.messages,
                    args.latency,
                    False,
                    Path(tmp),
                    args.baseline.resolve(),
                )
                base_runs.append(base)
                print(f"baseline run {i + 1}: {_line(base)}", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            run = one_run(args.chats, args.messages, args.latency, args.profile, Path(tmp))
            runs.append(run)
            print(f"run {i + 1}: {_line(run)}", flush=True)
            for name, seconds in run.threads[:8]:
                print(f"  {1000 * seconds / run.turns:6.1f} ms/turn  {name}", flush=True)
            if run.profile is not None and run.profile.exists():
                print(summarize_profile(run.profile), flush=True)
                if args.keep_profile:
                    shutil.copy(run.profile, args.keep_profile)
    if base_runs:
        now = statistics.median(1000 * r.cpu_total / r.turns for r in runs)
        then = statistics.median(1000 * r.cpu_total / r.turns for r in base_runs)
        walls = [statistics.median(r.wall / r.floor for r in rs) for rs in (base_runs, runs)]
        print(
            f"median CPU a turn: baseline {then:.1f} ms, this tree {now:.1f} ms "
            f"({now / then:.2f}× the baseline); wall {walls[0]:.2f}× → {walls[1]:.2f}× the floor"
        )
    if len(runs) > 1:
        per_turn = [1000 * r.cpu_total / r.turns for r in runs]
        ratios = [r.wall / r.floor for r in runs]
        print(
            f"median of {len(runs)}: {statistics.median(per_turn):.1f} ms/turn "
            f"(max {max(per_turn):.1f}), wall {statistics.median(ratios):.2f}× the floor "
            f"(max {max(ratios):.2f}×)"
        )
    print(json.dumps({"cpu_ms_per_turn": [round(1000 * r.cpu_total / r.turns, 1) for r in runs]}))


if __name__ == "__main__":
    main()
