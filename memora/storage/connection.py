"""The connection under the short-term store: SQLite (aiosqlite, WAL) by default, PostgreSQL when
a URL is given; opening runs the migrations.

Every multi-statement write goes through `Connection.transaction()`, which rolls back on any
exception, cancellation included. On SQLite one connection is shared by every chat, so a
transaction holds a lock for its whole span; on PostgreSQL (postgres.py, `[storage]
database_url`) each transaction has a pooled connection of its own and replicas share the database.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, cast

import aiosqlite

from memora.storage.file_erasure import CHECKPOINT, SECURE_DELETE
from memora.storage.migrations import applied, migrate
from memora.storage.postgres import PgPool
from memora.storage.rows import SharedChatLock


class _NoLock:
    async def release(self) -> None:
        return None


_NO_LOCK = _NoLock()


class Connection:
    """One aiosqlite connection (or a PostgreSQL pool); every write is one transaction."""

    def __init__(self, path: Path | None = None, *, url: str = "") -> None:
        if path is None and not url:
            raise ValueError("a Database needs a SQLite path or a PostgreSQL URL")
        self.path = path
        self.url = url
        self._db: aiosqlite.Connection | None = None
        self._pg: PgPool | None = None
        # One SQLite connection is shared by every chat: transactions must not interleave on it.
        self._tx_lock = asyncio.Lock()

    @property
    def dialect(self) -> str:
        return "postgresql" if self.url else "sqlite"

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("Database is not open")
        return self._db

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one read, in one trip to the connection's thread. A cursor takes three
        (execute, fetch, close), each a hand-off between the event loop and that thread: they
        were most of the event loop's CPU a turn spent on the database."""
        if self._pg is not None:
            async with self.db.execute(sql, params) as cur:
                return list(await cur.fetchall())
        return list(await self.db.execute_fetchall(sql, params))

    async def row(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first row of one read (None without one), in one trip (see `rows`)."""
        found = await self.rows(sql, params)
        return found[0] if found else None

    async def write(self, sql: str, params: tuple[Any, ...]) -> int:
        """One autocommitted write, never inside another chat's open transaction."""
        if self._pg is not None:  # a pooled connection of its own
            return (await self.db.execute(sql, params)).rowcount or 0
        async with self._tx_lock:
            cur = await self.db.execute(sql, params)
            return cur.rowcount or 0

    async def open(self) -> None:
        if self.url:
            self._pg = await PgPool.connect(self.url)
            # PgPool answers the aiosqlite calls this class makes (see postgres.py).
            self._db = cast(aiosqlite.Connection, self._pg)
            await migrate(self.db, self.transaction)
            return
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = await aiosqlite.connect(self.path, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        await self._db.execute("PRAGMA journal_mode=WAL")
        await self._db.execute("PRAGMA synchronous=FULL")
        await self._db.execute("PRAGMA foreign_keys=ON")
        await self._db.execute("PRAGMA busy_timeout=5000")
        await self._db.execute(SECURE_DELETE)  # deleted rows are zeroed, not just unlinked
        await migrate(self.db, self.transaction)

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = self._pg = None

    async def lock_chat(self, chat_id: int) -> SharedChatLock:
        """Hold the chat against every other process on this database until `release()`.

        On PostgreSQL (replicas) an advisory lock per chat; on SQLite (one process) nothing to
        hold: the engine's in-process lock already orders the chat."""
        if self._pg is not None:
            return await self._pg.lock_chat(chat_id)
        return _NO_LOCK

    async def checkpoint(self) -> None:
        """Move the WAL into the database file and empty it: after a deletion, the old pages
        (with the deleted words) must not survive in the -wal file."""
        async with self._tx_lock:
            await self.db.execute(CHECKPOINT)

    async def schema_version(self) -> int:
        """How many migrations this database has run."""
        return len(await applied(self.db))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """BEGIN IMMEDIATE ... COMMIT; any exception (or cancellation) rolls the whole block back.

        Holds the connection's lock for the whole block, so no other chat's write lands inside
        it. Not reentrant: do not call another writing method of this class inside the block.
        """
        if self._pg is not None:
            async with self._pg.transaction() as conn:
                yield cast(aiosqlite.Connection, conn)
            return
        async with self._tx_lock:
            db = self.db
            await db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                await db.execute("COMMIT")
            except BaseException:
                # A COMMIT whose await was cancelled still runs on the connection's thread: it may
                # finish before this ROLLBACK does, which then has nothing to roll back. The
                # original exception (often the cancellation) is what must propagate.
                with suppress(sqlite3.OperationalError):
                    if db.in_transaction:
                        await db.execute("ROLLBACK")
                raise
