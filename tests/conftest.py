"""Shared fixtures: a real SQLite database in a temp dir, an engine over a FakeLLM, the fake
OpenAI and Bot API servers, and the real shared engines (PostgreSQL, Chroma server)."""

from __future__ import annotations

import os

# python-telegram-bot 22 warns (an error here) when code reads durations as ints; opt in to
# the timedelta behaviour it will have by default.
os.environ.setdefault("PTB_TIMEDELTA", "1")

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memora.engine import Engine, EngineConfig
from memora.longterm import MemoryStore
from memora.longterm.embeddings import LocalUSE
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.engines import (
    ChromaServer,
    Postgres,
    engine_root,
    fresh_database,
    start_chroma,
    start_postgres,
)
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import FakeLLM
from tests.support.harness import Harness, Harnesses


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests never see the developer's own keys or config."""
    for name in list(os.environ):
        if name.startswith("MEMORA_") or name in {
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "TELEGRAM_BOT_TOKEN",
        }:
            monkeypatch.delenv(name, raising=False)
    yield


@pytest.fixture(params=["sqlite", "postgres"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """The store on both backends: the SQLite file, and a fresh database on a real PostgreSQL."""
    if request.param == "postgres":
        database = Database(url=request.getfixturevalue("postgres_url"))
    else:
        database = Database(tmp_path / "memora.sqlite3")
    await database.open()
    yield database
    await database.close()


@pytest.fixture
async def sqlite_db(tmp_path: Path) -> AsyncIterator[Database]:
    """The store on SQLite alone, for tests of something other than storage."""
    database = Database(tmp_path / "memora.sqlite3")
    await database.open()
    yield database
    await database.close()


@pytest.fixture
def llm() -> FakeLLM:
    return FakeLLM()


@pytest.fixture(scope="module")
def fake_openai_server() -> Iterator[FakeOpenAI]:
    """One fake OpenAI server for a test module (see `fake`)."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fake(fake_openai_server: FakeOpenAI) -> FakeOpenAI:
    """The module's fake OpenAI server, reset: no requests, no profile, default answers."""
    fake_openai_server.reset()
    return fake_openai_server


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAI]:
    """A fake OpenAI server of this test's own (a real process under test talks to it)."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    """A fake Bot API server of this test's own; held calls are answered before it stops."""
    with FakeTelegram() as server:
        yield server
        server.release()


@pytest.fixture
async def make_harness(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Harness]]]:
    """Builds Telegram harnesses (tests/support/harness.py), each shut down after the test."""
    harnesses = Harnesses(tmp_path)
    yield harnesses.make
    await harnesses.close()


@pytest.fixture
def counter() -> LocalTokenCounter:
    return LocalTokenCounter()


@pytest.fixture
async def engine(db: Database, llm: FakeLLM, counter: LocalTokenCounter) -> AsyncIterator[Engine]:
    eng = Engine(db=db, llm=llm, counter=counter, config=EngineConfig(max_input_tokens=1000))
    yield eng
    await eng.drain()


@pytest.fixture
async def make_engine(counter: LocalTokenCounter) -> AsyncIterator[Callable[..., Engine]]:
    """Builds an engine from Engine's keywords (the local token counter unless given) over the
    clients a test made (a fake server's, say); at the end each engine is drained and the
    clients it was given (models, transcriber, speaker) are closed."""
    made: list[tuple[Engine, list[Any]]] = []

    def make(**options: Any) -> Engine:
        engine = Engine(**{"counter": counter, **options})
        kinds = ("llm", "summary_llm", "extraction_llm", "transcriber", "speaker")
        clients = list({id(c): c for k in kinds if (c := options.get(k)) is not None}.values())
        made.append((engine, clients))
        return engine

    yield make
    for engine, clients in made:
        await engine.drain()
        for client in clients:
            await client.aclose()


@pytest.fixture(scope="session")
def embedder() -> LocalUSE:
    """The real local multilingual model, loaded once per test session (~1.5 s)."""
    model = LocalUSE()
    model.warm_up()
    return model


@pytest.fixture
async def store(tmp_path: Path, embedder: LocalUSE) -> AsyncIterator[MemoryStore]:
    s = await MemoryStore.create(tmp_path / "chroma", embedder)
    yield s
    await s.close()


@pytest.fixture
async def mem_engine(
    db: Database, llm: FakeLLM, counter: LocalTokenCounter, store: MemoryStore
) -> AsyncIterator[Engine]:
    """An engine with long-term memory: real SQLite, real Chroma, real embeddings, fake LLM."""
    eng = Engine(db=db, llm=llm, counter=counter, store=store)
    yield eng
    await eng.drain()


# -- real shared engines (PostgreSQL, Chroma server), started once per session ------------------
@pytest.fixture(scope="session")
def engines_root() -> Iterator[Path]:
    with engine_root() as root:
        yield root


@pytest.fixture(scope="session")
def postgres(engines_root: Path) -> Iterator[Postgres]:
    """A PostgreSQL 16 server from the pgserver wheel; the run fails if it cannot start."""
    server = start_postgres(engines_root)
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres: Postgres) -> str:
    """A fresh, empty database of its own for this test."""
    return fresh_database(postgres)


@pytest.fixture(scope="session")
def chroma_server(engines_root: Path) -> Iterator[ChromaServer]:
    """`chroma run` from the chromadb wheel on a free port; the run fails if it cannot start."""
    server = start_chroma(engines_root)
    yield server
    server.stop()


# -- two worker processes -----------------------------------------------------------------------
WORKERS = 2


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which turns -n into workers
def pytest_cmdline_main(config: pytest.Config) -> None:
    """pytest-xdist's `-n 2 --dist loadfile` unless the command line says `-n`: each worker has
    its own engines (tests/support/engines.py), and a test file stays on one worker, so a
    module-scoped bot or server starts once and its tests run in file order. `-n 0` (or --pdb) runs
    in one process. Set here, not in addopts, so a venv without pytest-xdist still runs, in one
    process.
    """
    if hasattr(config, "workerinput"):  # a worker: it runs its tests itself
        return
    if getattr(config.option, "numprocesses", 0) is None and not config.option.usepdb:
        config.option.numprocesses = WORKERS
        if config.option.dist == "no":
            config.option.dist = "loadfile"
