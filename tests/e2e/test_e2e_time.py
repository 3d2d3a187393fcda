"""Memory that knows when, in the real processes (issue 42): `memora chat` and `memora run`,
their clock moved by the test-only MEMORA_TEST_CLOCK_FILE, against the fake servers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from memora.clock import TEST_CLOCK_ENV
from memora.engine.followups import FOLLOW_UP_BLOCK
from memora.shortterm.instructions import MEMORY_BLOCK
from tests.support.bot import WAIT, ask, bot_over_fakes
from tests.support.fake_openai import FakeOpenAI
from tests.support.terminal import ChatProcess, memora_env

pytestmark = pytest.mark.slow

TRIP: dict[str, Any] = {
    "memories": [
        {
            "text": "The user is in Tokyo for a trip",
            "category": "personal",
            "replaces": None,
            "terms": ["Tokyo", "trip", "東京"],
            "situations": [],
            "since": "2026-03-01",
            "until": "2026-03-10",
        }
    ]
}


def test_the_terminal_chat_forgets_a_trip_once_it_is_over(tmp_path: Path) -> None:
    now = tmp_path / "now"
    now.write_text("2026-03-01T09:00:00+00:00")
    with FakeOpenAI() as server:
        env = memora_env(server, tmp_path / "data", **{TEST_CLOCK_ENV: str(now)})
        server.queue_reply(TRIP, kind="structured")
        chat = ChatProcess(env)
        try:
            chat.send("I'm in Tokyo for ten days from today!")
            chat.send("/memories")
            chat.wait_for("learned 2026-03-01 · since 2026-03-01 · until 2026-03-10]")
            now.write_text("2026-03-12T09:00:00+00:00")  # the running process moves with it
            chat.send("Where should I eat tonight?")
            chat.send("/context")
            chat.wait_for(FOLLOW_UP_BLOCK.splitlines()[0])  # the note, in what the request sent
            chat.wait_for("over since 2026-03-10")
            chat.send("/memories")
            chat.wait_for("until 2026-03-10 · past")  # still listed, as past
            chat.send("exit")
            assert chat.proc.wait(timeout=60) == 0
        finally:
            chat.kill9()  # closes its pipes (after the clean exit above, nothing to kill)
    context = chat.out.split("Where should I eat tonight?")[-1].split(FOLLOW_UP_BLOCK)[0]
    assert "- The user is in Tokyo" not in context  # not in the memory block any more


def reply_to(llm: FakeOpenAI, text: str) -> list[dict[str, str]]:
    """The messages of the reply request for `text` (not a summary that quotes it)."""
    (request,) = [r for r in llm.requests_of("reply") if r.last_user_message == text]
    return list(request.messages)


def test_memora_run_asks_about_an_ended_trip_once(tmp_path: Path) -> None:
    now = tmp_path / "now"
    now.write_text("2026-03-01T09:00:00+00:00")
    with bot_over_fakes(tmp_path) as (tg, llm, bot):
        bot.env[TEST_CLOCK_ENV] = str(now)
        bot.start()
        try:
            llm.queue_reply(TRIP, kind="structured")
            ask(tg, "I'm in Tokyo for ten days from today!")
            deadline = time.monotonic() + WAIT
            while "Tokyo" not in (listed := ask(tg, "/memories")):
                assert time.monotonic() < deadline, listed
            assert "learned 2026-03-01" in listed and "until 2026-03-10" in listed
            now.write_text("2026-03-11T09:00:00+00:00")  # the running process moves with it
            for text in ("Where should I eat tonight?", "And tomorrow?"):
                ask(tg, text)
            first = reply_to(llm, "Where should I eat tonight?")
            notes = [m["content"] for m in first if m["content"].startswith(FOLLOW_UP_BLOCK)]
            assert len(notes) == 1 and "The user is in Tokyo" in notes[0]
            memory = [m["content"] for m in first if m["content"].startswith(MEMORY_BLOCK)]
            assert not any("Tokyo" in block for block in memory)
            second = reply_to(llm, "And tomorrow?")
            assert not any(m["content"].startswith(FOLLOW_UP_BLOCK) for m in second)  # once
            assert ask(tg, "/pin 1").startswith("Pinned: The user is in Tokyo")
            assert "📌 learned 2026-03-01" in ask(tg, "/memories")
        finally:
            assert bot.stop() == 0, bot.output()
        assert "Traceback" not in bot.output(), bot.output()
