"""Applying the schema migrations (the list is migrations.py): each not yet recorded in
`_migrations`, in order, in its own transaction with the row that records it; replicas starting
together on one PostgreSQL take turns; a database from before the record table is adopted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import aiosqlite

from memora.clock import utcnow

MigrationFn = Callable[[aiosqlite.Connection], Awaitable[None]]
Transaction = Callable[[], AbstractAsyncContextManager[aiosqlite.Connection]]


@dataclass(frozen=True)
class Migration:
    name: str
    apply: MigrationFn


async def script(db: aiosqlite.Connection, sql: str) -> None:
    """Run statements one by one: executescript() would COMMIT the migration's transaction."""
    for statement in sql.split(";"):
        if statement.strip():
            await db.execute(statement)


async def applied(db: aiosqlite.Connection) -> list[str]:
    """Names of the migrations this database has run, in the order it ran them."""
    if not await _has_record_table(db):
        return []
    order = "n" if _on_postgres(db) else "rowid"
    async with db.execute(f"SELECT name FROM _migrations ORDER BY {order}") as cur:
        return [str(r[0]) for r in await cur.fetchall()]


def _on_postgres(db: aiosqlite.Connection) -> bool:
    """The same migrations run on PostgreSQL through postgres.py (database_url)."""
    return getattr(db, "dialect", "sqlite") == "postgresql"


async def _has_record_table(db: aiosqlite.Connection) -> bool:
    sql = (
        "SELECT to_regclass('_migrations')::text"
        if _on_postgres(db)
        else "SELECT name FROM sqlite_master WHERE type='table' AND name='_migrations'"
    )
    async with db.execute(sql) as cur:
        row = await cur.fetchone()
    return row is not None and row[0] is not None


async def run(
    db: aiosqlite.Connection, transaction: Transaction, migrations: Sequence[Migration]
) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction; return their names."""
    async with transaction() as conn:
        await _lock_against_other_replicas(conn)
        await _adopt_legacy_version(conn, migrations)
    done = set(await applied(db))
    ran: list[str] = []
    for m in migrations:
        if m.name in done:
            continue
        async with transaction() as conn:
            await _lock_against_other_replicas(conn)
            if m.name in await applied(conn):  # another replica ran it while we waited
                continue
            await m.apply(conn)
            await conn.execute(
                "INSERT INTO _migrations(name, applied_at) VALUES (?, ?)",
                (m.name, utcnow()),
            )
        ran.append(m.name)
    return ran


async def _lock_against_other_replicas(db: aiosqlite.Connection) -> None:
    """Replicas starting together on one PostgreSQL take turns (SQLite's BEGIN IMMEDIATE does)."""
    if _on_postgres(db):
        await db.execute("SELECT pg_advisory_xact_lock(7242315)")


async def _adopt_legacy_version(db: aiosqlite.Connection, migrations: Sequence[Migration]) -> None:
    """Create the record table; a database from before it counted its migrations in user_version.

    Those databases ran the first `user_version` migrations of the list, so record their names.
    """
    if await _has_record_table(db):
        return
    if _on_postgres(db):  # no legacy there; n keeps the order rowid keeps in SQLite
        await db.execute(
            "CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL, "
            "n BIGINT GENERATED ALWAYS AS IDENTITY)"
        )
        return
    await db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    async with db.execute("PRAGMA user_version") as cur:
        row = await cur.fetchone()
    legacy = int(row[0]) if row else 0
    for m in migrations[:legacy]:
        await db.execute(
            "INSERT INTO _migrations(name, applied_at) VALUES (?, 'before _migrations')",
            (m.name,),
        )
