"""The real `memora chat` process (the terminal chat): its environment and a driver
that types and reads its prompt."""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.support.fake_openai import FakeOpenAI
from tests.support.paths import ROOT


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


def chat_and_log(
    env: dict[str, str], lines: list[str], *args: str, timeout: float = 120
) -> tuple[str, str]:
    """The chat's output and its log (stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "chat", *args],
        input="\n".join(lines) + "\n",
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout, proc.stderr


class ChatProcess:
    """A `memora chat --quiet` process, its output read as it comes in a thread (the prompt too,
    which ends no line)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "chat", "--quiet"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.out = ""  # everything shown so far
        self._seen = 0  # where the next wait_for starts looking
        self._more = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            while chunk := os.read(self.proc.stdout.fileno(), 65536):
                with self._more:
                    self.out += decoder.decode(chunk)
                    self._more.notify_all()
        except (OSError, ValueError):  # kill9 closed the pipe while this thread was reading it
            pass

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def wait_for(self, needle: str, timeout: float = 60.0) -> None:
        """Wait until `needle` is shown after what earlier waits found."""
        deadline = time.monotonic() + timeout
        with self._more:
            while (at := self.out.find(needle, self._seen)) < 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"never saw {needle!r} in:\n{self.out[self._seen :]}")
                self._more.wait(min(left, 0.5))
            self._seen = at + len(needle)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
