"""`memora chat` as a process: driven through stdin, talking to the fake OpenAI server over HTTP."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bot.terminal import chat_loop, parse_command
from memora.engine import Engine
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from memora.types import ChatRef, UserRef
from memora.views import Reply
from tests.support.fake_openai import FakeOpenAI
from tests.support.fakes import FakeLLM
from tests.support.paths import ROOT
from tests.support.terminal import ChatProcess, chat, chat_and_log, memora_env

pytestmark = pytest.mark.slow










def test_parse_command_with_or_without_slash() -> None:
    assert parse_command("status") == ("status", "")
    assert parse_command("/STATUS") == ("status", "")
    assert parse_command("/remember I like tea") == ("remember", "I like tea")
    assert parse_command("/exit") == ("exit", "")
    assert parse_command("exit") == ("exit", "")
    assert parse_command("/whatever x") == ("whatever", "x")
    # Sentences that start with a command word are messages, not commands.
    for sentence in [
        "history of English is long",
        "help me write an email to my boss",
        "Remember that I have an exam on Friday?",
        "reset the verb to past tense",
        "forget it, next question",
        "remember",
        "How are you?",
    ]:
        assert parse_command(sentence) is None, sentence


def test_terminal_chat_talks_remembers_and_persists(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    env = memora_env(openai_server, tmp_path, MEMORA_MEMORY__MAX_RECENT_TURNS="1")
    out = chat(
        env,
        [
            "Hi, my English level is B1 and I am preparing for TOEIC 850.",
            "What does 'commute' mean?",
            "/status",
            "summary",
            "context",
            "exit",
        ],
    )
    assert "Memora: Echo: Hi, my English level is B1" in out
    assert "[memory] summarized +0 msgs · context" in out  # the per-turn status line
    # The second turn pushed the first out of the 1-turn window: folded after the reply, and
    # the line printed before that says so (it said "+0 … summary 0" while /summary covered 2).
    assert "[memory] summarized +0 msgs (+2 to fold after this reply)" in out
    assert "summary 0 so far" in out
    # /status counts the messages /context shows (the system prompt first)
    counted = re.search(r"Last context messages\s*: (\d+)", out)
    shown = re.search(r"system prompt first\) \((\d+) messages\)", out)
    assert counted and shown and counted.group(1) == shown.group(1), out
    assert "History messages" in out and ": 4" in out
    # One turn left the 1-turn window, so a summary exists and keeps the key facts.
    assert "Summary (covers 2 messages)" in out
    assert "B1" in out.split("Summary (covers")[1]
    kinds = [r.kind for r in openai_server.requests]
    assert kinds.count("reply") >= 3  # two replies + at least one summary
    # Start again on the same data dir: the conversation is still there.
    out2 = chat(env, ["/history", "quit"])
    assert "continuing: 4 messages" in out2
    assert "What does 'commute' mean?" in out2
    # The operator's export works from the command line, without a model key.
    target = tmp_path / "export.json"
    env.pop("MEMORA_LLM__API_KEY")
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "export", "--chat-id", "0", "-o", str(target)],
        cwd=ROOT,
        env={**env, "MEMORA_LLM__BASE_URL": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(target.read_text(encoding="utf-8"))
    assert data["history"][0]["content"].startswith("Hi, my English level is B1")
    assert "B1" in data["summary"] and data["summarized_messages"] == 2


def test_terminal_chat_survives_an_llm_outage(openai_server: FakeOpenAI, tmp_path: Path) -> None:
    env = memora_env(openai_server, tmp_path)
    openai_server.fail_next(1, status=503, kind="reply")
    out = chat(env, ["first try", "second try", "history"])
    assert "couldn't reach my language model" in out
    assert "Echo: second try" in out
    history = out.split("History (")[1]
    assert "first try" not in history  # no dangling user message
    assert "(2 messages" in out


def test_learner_commands_in_the_terminal_take_typed_answers(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.queue_reply(
        {
            "memories": [],
            "profile": [{"field": "level", "value": "B1"}],
            "mistakes": [
                {
                    "original": "I go to the park yesterday",
                    "corrected": "I went to the park yesterday",
                    "category": "tense",
                    "reason": "yesterday → past tense",
                }
            ],
            "vocabulary": [],
        },
        kind="structured",
    )
    data = tmp_path / "data"
    out, err = chat_and_log(
        memora_env(openai_server, data, MEMORA_LOGGING__LEVEL="INFO"),
        [
            "I go to the park yesterday with my dog.",
            "profile",
            "review",
            "/review show",
            "/review good",
            "progress",
            "/profile set timezone Mars/Base",
            "/profile set level b2",
            "/profile undo",
            "/export",
            "exit",
        ],
        "--quiet",
    )
    assert "level: B1" in out
    assert "Fix this sentence:\n“I go to the park yesterday”" in out
    assert "✔ I went to the park yesterday" in out and "type /review again|hard|good|easy" in out
    assert "Good — you'll see it again in" in out and "Nothing else to review right now" in out
    assert "Your progress" in out and "Days studied: 1" in out and "tense: " in out
    assert "'Mars/Base' is not a time zone I know" in out
    assert "Saved: level = B2 (was B1)" in out and "Undone: level is back to B1." in out
    # The chart and the export are kept in the learner's folder under data_dir, and it says so
    folder = data / "files" / "learner-0"
    for name in ("progress.png", "memora-chat-0.json"):
        assert f"(wrote {folder / name})" in out
    assert (folder / "progress.png").read_bytes().startswith(b"\x89PNG")
    assert json.loads((folder / "memora-chat-0.json").read_text())["chat"]["id"] == 0
    assert not (ROOT / "memora-chat-0.json").exists()  # never in the folder chat started from
    assert "matplotlib" not in err and "INFO memora" in err  # the library's INFO lines stay out


def test_a_server_without_the_responses_api_is_named_as_a_setting_not_an_outage(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """Ollama, DeepSeek and most local servers answer /v1/responses with 404: the answer and
    the log (once) name the setting that fixes it, instead of "again in a moment"."""
    openai_server.like_local_server()  # Chat Completions only: /v1/responses answers 404
    env = memora_env(openai_server, tmp_path, MEMORA_LLM__API="responses")
    out, err = chat_and_log(env, ["first try", "second try", "exit"], "--quiet")
    assert out.count('set [llm] api = "chat_completions"') == 2, out
    assert "again in a moment" not in out
    assert [r.path for r in openai_server.requests if r.kind == "reply"] == ["/v1/responses"] * 2
    told = [line for line in err.splitlines() if "ERROR" in line]
    assert len(told) == 1, err  # one clear line, at the first 404
    assert 'no Responses API. Set [llm] api = "chat_completions"' in told[0]


def test_ctrl_c_at_the_prompt_ends_the_chat_cleanly(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """As Ctrl-D does: at once, without waiting for Enter (stdin stays open), cleanly."""
    p = ChatProcess(memora_env(openai_server, tmp_path))
    try:
        p.send("Hello there")
        p.wait_for("Echo: Hello there")
        p.wait_for("You: ")  # answered, and waiting at the prompt again
        p.proc.send_signal(signal.SIGINT)
        code = p.proc.wait(timeout=30)  # before: alive until Enter
        p.wait_for("Bye!")
    finally:
        p.kill9()
    assert code == 0  # no KeyboardInterrupt, no traceback: the chat ended as at EOF


class Screen(io.StringIO):
    """The terminal's stdout; `prompted` is set whenever the prompt is the last thing shown."""

    def __init__(self) -> None:
        super().__init__()
        self.prompted = asyncio.Event()

    def flush(self) -> None:
        if self.getvalue().endswith("You: "):
            self.prompted.set()


async def test_a_notice_while_the_prompt_shows_draws_the_prompt_again(tmp_path: Path) -> None:
    db = Database(tmp_path / "memora.sqlite3")
    await db.open()
    engine = Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter())
    read_end, write_end = os.pipe()
    screen = Screen()
    with os.fdopen(read_end, encoding="utf-8") as stdin:
        talking = asyncio.create_task(chat_loop(engine, stdin=stdin, stdout=screen, language="en"))
        await screen.prompted.wait()
        notify = engine.state.notify
        assert notify is not None  # the terminal listens for the engine's notices
        await notify(ChatRef(0, "private"), UserRef(0), Reply("🗑 Forgotten, as you asked"))
        assert screen.getvalue().endswith("You: \nMemora: 🗑 Forgotten, as you asked\n\nYou: ")
        os.write(write_end, b"exit\n")
        await talking
        os.close(write_end)
    await db.close()
