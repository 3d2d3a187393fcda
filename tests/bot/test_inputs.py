"""Input hygiene at the adapter boundary (issue 7 item 10): lone surrogates, NUL bytes and
messages of nothing but invisible characters get a clear answer and never crash or get stored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.inputs import clean
from memora.engine import EMPTY
from tests.support.fake_openai import FakeOpenAI
from tests.support.terminal import ROOT, memora_env


def test_clean() -> None:
    assert clean("caf\udce9 au lait") == "caf\ufffd au lait"  # nothing else of it lost
    assert clean("tea\x00time\x07") == "teatime"
    assert clean("line one\n\tline two") == "line one\n\tline two"
    for invisible in ("\u200b", "\u200b\u200c\u200d", "\ufeff \u2060", "\u00ad\n"):
        assert clean(invisible) == ""
    assert clean("👩\u200d💻 coder") == "👩\u200d💻 coder"  # a ZWJ inside text stays
    assert clean("cafe\u0301") == "café"  # NFC


def test_terminal_survives_invalid_utf8_nul_and_invisible_lines(
    tmp_path: Path,
) -> None:
    with FakeOpenAI() as server:
        proc = subprocess.run(
            [sys.executable, "-m", "bot.cli", "chat", "--quiet"],
            input=b"caf\xe9 au lait\n\xe2\x80\x8b\ntea\x00time\nexit\n",
            cwd=ROOT,
            env=memora_env(server, tmp_path),
            capture_output=True,
            timeout=120,
        )
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert "Echo: caf\ufffd au lait" in out
    assert EMPTY in out
    assert "Echo: teatime" in out
