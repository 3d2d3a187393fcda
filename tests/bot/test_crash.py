"""kill -9 at any moment: no answered turn is lost, no half turn is left, offsets stay sane."""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

import pytest

from tests.support.fake_openai import FakeOpenAI
from tests.support.terminal import ChatProcess, memora_env

pytestmark = pytest.mark.slow


def check_invariants(db_path: Path, answered: list[str]) -> None:
    con = sqlite3.connect(db_path)
    try:
        rows = con.execute("SELECT seq, role, content FROM messages ORDER BY seq").fetchall()
        summarized = con.execute("SELECT summarized_count FROM chats").fetchone()
    finally:
        con.close()
    roles = [r[1] for r in rows]
    assert roles == ["user", "assistant"] * (len(rows) // 2), "a half turn was left"
    assert [r[0] for r in rows] == list(range(len(rows)))
    users = [r[2] for r in rows if r[1] == "user"]
    for text in answered:
        assert text in users, f"answered turn {text!r} was lost"
    if summarized is not None:
        assert 0 <= summarized[0] <= len(rows) and summarized[0] % 2 == 0


def test_kill_during_the_llm_call_leaves_no_half_turn(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    env = memora_env(openai_server, tmp_path)
    p = ChatProcess(env)
    p.send("turn one")
    p.wait_for("Echo: turn one")
    openai_server.kind_latency["reply"] = 5.0
    before = len(openai_server.requests)
    p.send("turn two, never answered")
    deadline = time.monotonic() + 30
    while len(openai_server.requests_of("reply")) <= before and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)
    p.kill9()
    check_invariants(tmp_path / "memora.sqlite3", ["turn one"])
    openai_server.kind_latency.clear()
    p2 = ChatProcess(env)
    p2.send("turn three")
    p2.wait_for("Echo: turn three")
    p2.kill9()
    check_invariants(tmp_path / "memora.sqlite3", ["turn one", "turn three"])


def test_kill_at_random_moments(openai_server: FakeOpenAI, tmp_path: Path) -> None:
    env = memora_env(openai_server, tmp_path, MEMORA_MEMORY__MAX_RECENT_TURNS="1")
    openai_server.latency = 0.05
    rng = random.Random(7)
    answered: list[str] = []
    n = 0
    for _round in range(4):
        p = ChatProcess(env)
        for _ in range(rng.randint(1, 3)):
            n += 1
            p.send(f"message {n}")
            p.wait_for(f"Echo: message {n}")
            answered.append(f"message {n}")
        n += 1
        p.send(f"message {n}")  # killed somewhere in this turn or in the work after the last
        time.sleep(rng.uniform(0.0, 0.3))
        p.kill9()
        check_invariants(tmp_path / "memora.sqlite3", answered)
