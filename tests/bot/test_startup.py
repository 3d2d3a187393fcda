"""Start-up fails fast: an unusable store or a bad config value ends the real process with one
clear line and a non-zero exit, never a traceback followed by a live process doing nothing."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memora.config import ConfigError, load_settings
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.terminal import ROOT, chat, memora_env

pytestmark = pytest.mark.slow


def memora(env: dict[str, str], *args: str, prefix: tuple[str, ...] = ()) -> tuple[int, str]:
    """Run `memora <args>` to its end (it must end by itself); (exit status, stderr)."""
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "bot.cli", *args],
        input="hello\nexit\n",
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stderr


def assert_one_line(code: int, err: str, *needles: str) -> None:
    assert code == 1, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("memora: cannot start: "), err
    for needle in needles:
        assert needle in lines[0], err


def bot_env(env: dict[str, str], tg: FakeTelegram) -> dict[str, str]:
    return {
        **env,
        "MEMORA_TELEGRAM__TOKEN": tg.token,
        "MEMORA_TELEGRAM__BASE_URL": tg.base_url,
        "MEMORA_TELEGRAM__POLL_TIMEOUT": "1",
    }


def test_a_garbage_database_stops_chat_and_run(openai_server: FakeOpenAI, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "memora.sqlite3").write_bytes(os.urandom(8192))
    env = memora_env(openai_server, data)
    assert_one_line(*memora(env, "chat"), "memora.sqlite3", "not a database")
    with FakeTelegram() as tg:
        assert_one_line(*memora(bot_env(env, tg), "run"), "memora.sqlite3")
        assert tg.calls_to("getMe") == []  # stopped before Telegram was even asked


def test_a_half_truncated_database_fails_its_integrity_check(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    env = memora_env(openai_server, data, MEMORA_EXTRACTION__ENABLED="false")
    chat(env, [f"message {n}: " + "words to fill the pages " * 40 for n in range(30)] + ["exit"])
    db = data / "memora.sqlite3"
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    size = db.stat().st_size
    assert size > 4 * 4096
    with db.open("r+b") as fh:
        fh.truncate(size // 2)
    assert_one_line(*memora(env, "chat"), "memora.sqlite3")


def test_a_memory_store_that_cannot_be_opened_stops_chat_and_run(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    (data / "chroma").mkdir(parents=True)
    (data / "chroma" / "chroma.sqlite3").write_bytes(b"not chroma at all " * 500)
    env = memora_env(openai_server, data)
    assert_one_line(*memora(env, "chat"), "memory store", "chroma.sqlite3")


def test_a_store_failing_while_the_bot_opens_it_ends_the_process(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """What the checks before start cannot see (memories embedded by another model) still ends
    `memora run` with one line once the engine opens, and no thread keeps it alive."""
    data = tmp_path / "data"
    other = memora_env(openai_server, data, MEMORA_EMBEDDINGS__PROVIDER="openai")
    chat(other, ["/remember I like tea", "exit"])
    with FakeTelegram() as tg:
        code, err = memora(bot_env(memora_env(openai_server, data), tg), "run")
    assert code == 1, err
    assert "Traceback" not in err, err
    assert "memora: cannot start: the memory store" in err and "embedded with" in err, err


def _can_mount_read_only(folder: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount --bind -o ro '{folder}' '{folder}'"],
        capture_output=True,
    )
    return probe.returncode == 0


def test_a_read_only_volume_holding_data_stops_start_up(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    env = memora_env(openai_server, data)
    chat(env, ["hello", "exit"])
    if not _can_mount_read_only(data):
        pytest.skip("needs unshare and mount namespaces to make a read-only volume")
    ro = ("unshare", "-rm", "sh", "-c", f"mount --bind -o ro '{data}' '{data}' && exec \"$@\"", "-")
    assert_one_line(*memora(env, "chat", prefix=ro), "not writable", "read-only")


@pytest.mark.parametrize(
    ("toml", "key"),
    [("[llm]\ntimeout = inf\n", "llm.timeout"), ("[storage]\ndata_dir = 5\n", "storage.data_dir")],
)
def test_config_rejects_values_nobody_means(tmp_path: Path, toml: str, key: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError, match=key):
        load_settings(path)
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--config", str(path), "chat"],
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and key in proc.stderr and "Traceback" not in proc.stderr
