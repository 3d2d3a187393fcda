"""The lesson mode each chat is in (one row per chat, table chat_modes): read, start, change,
leave. A turn writes its chat's mode in its own transaction (see TurnQueries.record_turn)."""

from __future__ import annotations

import json
from typing import Any

import aiosqlite

from memora.clock import utcnow
from memora.storage.connection import Connection
from memora.storage.rows import ModeRow

_COLUMNS = "chat_id, user_id, kind, step, state, started_at, updated_at"


def _mode(row: Any) -> ModeRow:
    return ModeRow(
        int(row[0]), int(row[1]), str(row[2]), int(row[3]), json.loads(row[4]), row[5], row[6]
    )


async def write_mode(db: aiosqlite.Connection, mode: ModeRow) -> None:
    """Start or change the chat's mode inside the caller's transaction."""
    await db.execute(
        f"INSERT INTO chat_modes({_COLUMNS}) VALUES (?,?,?,?,?,?,?) "
        "ON CONFLICT(chat_id) DO UPDATE SET user_id=excluded.user_id, kind=excluded.kind, "
        "step=excluded.step, state=excluded.state, started_at=excluded.started_at, "
        "updated_at=excluded.updated_at",
        (
            mode.chat_id,
            mode.user_id,
            mode.kind,
            mode.step,
            json.dumps(mode.state, ensure_ascii=False),
            mode.started_at,
            utcnow(),
        ),
    )


class ModeQueries:
    """Reads and writes of chat_modes."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def mode(self, chat_id: int) -> ModeRow | None:
        """The mode the chat is in, if any."""
        row = await self.connection.row(
            f"SELECT {_COLUMNS} FROM chat_modes WHERE chat_id=?", (chat_id,)
        )
        return None if row is None else _mode(row)

    async def user_modes(self, user_id: int) -> list[ModeRow]:
        """The modes this user has running, in any chat (for /export)."""
        rows = await self.connection.rows(
            f"SELECT {_COLUMNS} FROM chat_modes WHERE user_id=? ORDER BY chat_id", (user_id,)
        )
        return [_mode(r) for r in rows]

    async def start_mode(self, mode: ModeRow) -> None:
        """Put the chat in `mode`, leaving whatever mode it was in."""
        async with self.connection.transaction() as db:
            await write_mode(db, mode)

    async def update_mode(self, mode: ModeRow) -> bool:
        """Change the chat's mode, only if it is still the same run of it (same kind, same
        start); False when the chat left it or started another meanwhile."""
        return 0 < await self.connection.write(
            "UPDATE chat_modes SET step=?, state=?, updated_at=? "
            "WHERE chat_id=? AND kind=? AND started_at=?",
            (
                mode.step,
                json.dumps(mode.state, ensure_ascii=False),
                utcnow(),
                mode.chat_id,
                mode.kind,
                mode.started_at,
            ),
        )

    async def end_mode(self, chat_id: int, started_at: str | None = None) -> bool:
        """Leave the chat's mode (with `started_at`, only that run of it); False if none."""
        if started_at is None:
            return 0 < await self.connection.write(
                "DELETE FROM chat_modes WHERE chat_id=?", (chat_id,)
            )
        return 0 < await self.connection.write(
            "DELETE FROM chat_modes WHERE chat_id=? AND started_at=?", (chat_id, started_at)
        )
