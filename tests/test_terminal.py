"""`memora chat` as a process: driven through stdin, talking to the fake OpenAI server over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.terminal import parse_command
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def memora_env(server: FakeOpenAI, data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(data_dir),
        "MEMORA_LLM__BASE_URL": server.base_url,
        "MEMORA_LLM__API_KEY": "test-key",
        "MEMORA_LLM__MAX_RETRIES": "0",
        "MEMORA_STORAGE__DATA_DIR": str(data_dir),
        "MEMORA_LOGGING__LEVEL": "WARNING",
    }
    env.update(extra)
    return env


def chat(env: dict[str, str], lines: list[str], *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "chat", *args],
        input="\n".join(lines) + "\n",
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


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
    assert "[memory] summarized" in out  # the per-turn status line
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
    out = chat(
        memora_env(openai_server, tmp_path / "data"),
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
            "exit",
        ],
        "--quiet",
    )
    assert "level: B1" in out
    assert "Fix this sentence:\n“I go to the park yesterday”" in out
    assert "✔ I went to the park yesterday" in out and "type /review again|hard|good|easy" in out
    assert "Good — you'll see it again in" in out and "Nothing to review right now" in out
    assert "Your progress" in out and "Days studied: 1" in out and "tense: " in out
    assert "'Mars/Base' is not a time zone I know" in out
    assert "Saved: level = B2 (was B1)" in out and "Undone: level is back to B1." in out


def test_a_server_without_the_responses_api_is_named_as_a_setting_not_an_outage(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """Ollama, DeepSeek and most local servers answer /v1/responses with 404: the answer and
    the log (once) name the setting that fixes it, instead of "again in a moment"."""
    openai_server.fail_next(2, status=404, kind="reply")
    env = memora_env(openai_server, tmp_path, MEMORA_LLM__API="responses")
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "chat", "--quiet"],
        input="first try\nsecond try\nexit\n",
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count('set [llm] api = "chat_completions"') == 2, proc.stdout
    assert "again in a moment" not in proc.stdout
    assert [r.path for r in openai_server.requests if r.kind == "reply"] == ["/v1/responses"] * 2
    told = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert len(told) == 1, proc.stderr  # one clear line, at the first 404
    assert 'no Responses API. Set [llm] api = "chat_completions"' in told[0]
