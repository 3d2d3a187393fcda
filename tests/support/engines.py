"""Real shared engines for the tests, brought by pip alone: PostgreSQL and a Chroma server.

- PostgreSQL 16 comes from the `pgserver` wheel (a dev dependency): `initdb` + `pg_ctl` in a temp
  directory, served over a Unix socket, as root too. No system package, no Docker.
- The Chroma server is the `chroma run` command of the chromadb wheel the product already needs.

Each engine is started once per test session by a session-scoped fixture and torn down at the end.
If an engine cannot start, the fixture raises :class:`EngineUnavailable` with the engine's own
output: every test that needs it ERRORS (the run fails); nothing is ever skipped for want of an
engine, so a green run always means the shared-store tests ran.

Each test gets its own schema (:func:`fresh_database`), created in milliseconds, so tests never
see each other's rows and need no clean-up.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

START_TIMEOUT_S = 60.0


class EngineUnavailable(RuntimeError):
    """A real engine the tests need did not start: the run must fail, not skip."""


# -- PostgreSQL ---------------------------------------------------------------------------------
@dataclass
class Postgres:
    """A running PostgreSQL server; `url` names its `postgres` maintenance database."""

    url: str
    stop: Callable[[], None]

    def url_for(self, database: str) -> str:
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path=f"/{database}"))


def start_postgres(root: Path) -> Postgres:
    """initdb + start a PostgreSQL 16 server from the pgserver wheel under `root`."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns that XDG_RUNTIME_DIR is unset (CI, root): harmless here.
            warnings.simplefilter("ignore")
            import pgserver  # lazily: its import warns (caught here), and only a run that needs
            # PostgreSQL pays for it

            server = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    except Exception as exc:  # pragma: no cover - the failure path is the point
        raise EngineUnavailable(f"PostgreSQL (pgserver) did not start: {exc!r}") from exc
    pg = Postgres(url=server.get_uri(), stop=server.cleanup)
    # The tests kill processes, never the machine: flushing to disk only makes every CREATE
    # DATABASE and the shutdown checkpoint slow (seconds on a busy disk).
    _sql(
        pg.url,
        "ALTER SYSTEM SET fsync = off",
        "ALTER SYSTEM SET synchronous_commit = off",
        "ALTER SYSTEM SET full_page_writes = off",
        # Replicas under test each hold up to 50 connections (memora.storage.postgres pool sizes).
        "ALTER SYSTEM SET max_connections = 400",
    )
    from pgserver._commands import pg_ctl  # lazily, with pgserver above

    # max_connections needs a restart; pg_ctl restart keeps the socket options it started with.
    pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user)
    return pg


def _sql(url: str, *statements: str) -> None:
    """Run statements on their own connection, from sync code or from inside a running loop."""

    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()


_database_numbers = itertools.count(1)


def fresh_database(pg: Postgres) -> str:
    """A new, empty schema of its own on the server; returns a URL whose search_path is it.

    A schema is created in milliseconds where CREATE DATABASE copies files for a second; the
    tables, sequences and functions a test creates all land in its schema (dropped with the
    server).
    """
    name = f"t{os.getpid()}_{next(_database_numbers)}"
    _sql(pg.url, f'CREATE SCHEMA "{name}"')
    sep = "&" if "?" in pg.url else "?"
    return f"{pg.url}{sep}search_path={name}"


# -- Chroma server ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ChromaServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        """Kill it: its data is a temp directory, and a graceful stop takes seconds."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=15)


def chroma_command() -> list[str]:
    """The `chroma` console script of the interpreter running the tests."""
    script = Path(sys.executable).parent / "chroma"
    if not script.exists():
        raise EngineUnavailable(f"the chromadb wheel's `chroma` command is missing ({script})")
    return [str(script)]


def start_chroma(root: Path) -> ChromaServer:
    """`chroma run --path DIR --port N` on 127.0.0.1; waits for its heartbeat."""
    port = free_port()
    data = root / "chroma-server"
    data.mkdir(parents=True, exist_ok=True)
    log_path = root / "chroma-server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                *chroma_command(),
                "run",
                "--path",
                str(data),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
    (root / "chroma.pid").write_text(str(process.pid))
    server = ChromaServer(f"http://127.0.0.1:{port}", process, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        with contextlib.suppress(OSError, urllib.error.URLError):
            with urllib.request.urlopen(f"{server.url}/api/v2/heartbeat", timeout=2) as resp:
                if resp.status == 200:
                    return server
        time.sleep(0.2)
    server.stop()
    tail = log_path.read_text(errors="replace")[-2000:]
    raise EngineUnavailable(f"the Chroma server did not start on port {port}:\n{tail}")


# A test run can die without its teardown (kill, timeout). PostgreSQL runs as a daemon and the
# Chroma server would outlive it too, so a watchdog in its own session waits for the test
# process to go and then stops both and deletes their directory.
_WATCHDOG = r"""
import os, shutil, signal, sys, time
parent, root = int(sys.argv[1]), sys.argv[2]
while os.path.isdir(root):
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    time.sleep(0.5)
for name, sig in (("pgdata/postmaster.pid", signal.SIGQUIT), ("chroma.pid", signal.SIGKILL)):
    try:
        with open(os.path.join(root, name)) as fh:
            os.kill(int(fh.readline()), sig)
    except (OSError, ValueError):
        pass
time.sleep(1)
shutil.rmtree(root, ignore_errors=True)
"""


@contextlib.contextmanager
def engine_root() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="memora-engines-") as tmp:
        watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), tmp],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield Path(tmp)
        finally:
            watchdog.kill()
            watchdog.wait()
