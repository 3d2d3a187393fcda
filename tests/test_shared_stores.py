"""`[storage] database_url` and `[longterm] chroma_url`: the same engine on shared engines.

The composition function wires PostgreSQL and a Chroma server from configuration alone; the
embedded default (SQLite + Chroma under data_dir) is what an empty configuration gives.
"""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from memora.app import open_engine
from memora.config import load_settings
from memora.engine import ChatRef, UserRef
from tests.fakes import FakeLLM


async def test_database_url_puts_the_turns_in_postgresql_and_nothing_in_data_dir(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORA_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMORA_LLM__API_KEY", "sk-test-not-used")
    monkeypatch.setenv("MEMORA_STORAGE__DATABASE_URL", postgres_url)
    settings = load_settings()
    async with open_engine(settings, llm=FakeLLM()) as engine:
        reply = await engine.handle_turn(ChatRef(7), UserRef(7, "Mei"), "I passed my B1 exam!")
        assert reply.ok
    assert not (tmp_path / "data" / "memora.sqlite3").exists()
    conn = await asyncpg.connect(postgres_url)
    try:
        rows = await conn.fetch("SELECT role, content FROM messages WHERE chat_id = 7 ORDER BY seq")
    finally:
        await conn.close()
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "I passed my B1 exam!"),
        ("assistant", reply.text),
    ]
    # A second process (a replica, a restart) on the same URL sees the same history.
    async with open_engine(settings, llm=FakeLLM()) as again:
        first = (await again.db.messages(7))[0]
        assert first.content == "I passed my B1 exam!"


async def test_no_url_keeps_the_embedded_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORA_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMORA_LLM__API_KEY", "sk-test-not-used")
    async with open_engine(load_settings(), llm=FakeLLM()) as engine:
        assert engine.db.dialect == "sqlite"
        assert (await engine.handle_turn(ChatRef(1), UserRef(1, "A"), "hello")).ok
    assert (tmp_path / "data" / "memora.sqlite3").exists()
