"""The learner model's SQLite access, shared by its stores: the connection, one-statement reads, a
list of statements in one transaction. Every method that uses it names its user, and every
query filters on it. The tables are in memora/storage/learner_schema.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memora.storage import Database

Statement = tuple[str, tuple[Any, ...]]


def as_datetime(text: str) -> datetime:
    """A stored ISO time as an aware UTC datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)


class LearnerTables:
    """Learner data on the shared :class:`Database` connection."""

    def __init__(self, db: Database) -> None:
        self.database = db

    async def _rows(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return await self.database.connection.rows(sql, params)

    async def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        return await self.database.connection.row(sql, params)

    async def _tx(self, statements: Sequence[Statement]) -> None:
        async with self.database.connection.transaction() as db:
            for sql, params in statements:
                await db.execute(sql, params)
