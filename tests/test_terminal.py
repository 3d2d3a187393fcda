"""`memora chat` as a process: driven through stdin, talking to the fake OpenAI server over HTTP."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.terminal import chat_loop, parse_command
from memora.engine import Engine
from memora.storage import Database
from memora.tokens import LocalTokenCounter
from memora.types import ChatRef, UserRef
from memora.views import Reply
from tests.fake_openai import FakeOpenAI
from tests.fakes import FakeLLM

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
    return chat_and_log(env, lines, *args)[0]


def chat_and_log(env: dict[str, str], lines: list[str], *args: str) -> tuple[str, str]:
    """The chat's output and its log (stderr)."""
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
    return proc.stdout, proc.stderr


class ChatProcess:
    """`memora chat` driven line by line, its output read as it comes (for what happens while
    the prompt waits)."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "chat", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
        )
        self.out = ""

    def wait_for(self, text: str, *, count: int = 1, timeout: float = 60) -> str:
        """Read until `text` has appeared `count` times; everything read so far."""
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while self.out.count(text) < count:
            assert time.monotonic() < deadline, f"no {text!r} in:\n{self.out}"
            if sel.select(timeout=0.5):
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, f"the chat ended before {text!r}:\n{self.out}"
                self.out += chunk.decode()
        return self.out

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        """Wait for the process to end on its own (stdin stays open); its code, stdout, stderr."""
        try:
            rest, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rest, err = self.proc.communicate()
            raise AssertionError(f"still running after {timeout} s:\n{self.out}") from None
        return self.proc.returncode, self.out + rest.decode(), err.decode()


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
    assert "Good — you'll see it again in" in out and "Nothing to review right now" in out
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


def test_ctrl_c_at_the_prompt_ends_the_chat_cleanly(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """As Ctrl-D does: at once, without waiting for Enter, without a traceback."""
    chat_process = ChatProcess(memora_env(openai_server, tmp_path), "--quiet")
    chat_process.send("Hello there")
    chat_process.wait_for("You: ", count=2)  # answered, and waiting at the prompt again
    chat_process.proc.send_signal(signal.SIGINT)
    code, out, err = chat_process.finish(timeout=30)  # stdin stays open: no Enter, no EOF
    assert code == 0, err
    assert out.rstrip().endswith("Bye!") and "Traceback" not in err, (out, err)
    assert "Echo: Hello there" in out


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
        assert engine.notify is not None  # the terminal listens for the engine's notices
        await engine.notify(ChatRef(0, "private"), UserRef(0), Reply("🗑 Forgotten, as you asked"))
        assert screen.getvalue().endswith("You: \nMemora: 🗑 Forgotten, as you asked\n\nYou: ")
        os.write(write_end, b"exit\n")
        await talking
        os.close(write_end)
    await db.close()
