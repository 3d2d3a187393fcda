"""Questions waiting for a Yes before something is deleted for good (table pending_asks): who was
asked, in which chat, what a Yes deletes (memory ids, never their words) and until when the
question stands. Asked, read, and taken once: two taps on Yes delete once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memora.clock import utcnow
from memora.storage.connection import Connection


@dataclass(frozen=True)
class PendingAsk:
    """One open question: `token` is the random half of its buttons' data; `kind` says what a Yes
    does ("forgetme", "forget"); `memory_ids` what it deletes ("forget" only)."""

    token: str
    user_id: int
    chat_id: int
    kind: str
    memory_ids: tuple[str, ...]
    expires_at: str

    def expired(self, now: datetime) -> bool:
        return utcnow(now) >= self.expires_at


class PendingAsks:
    """Reads and writes of pending_asks, over the store's connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def add(self, ask: PendingAsk, now: datetime) -> None:
        """Keep a new question; questions whose time ran out go (nothing they named is kept)."""
        async with self.connection.transaction() as db:
            await db.execute("DELETE FROM pending_asks WHERE expires_at <= ?", (utcnow(now),))
            await db.execute(
                "INSERT INTO pending_asks(token, user_id, chat_id, kind, memory_ids, expires_at) "
                "VALUES (?,?,?,?,?,?)",
                (
                    ask.token,
                    ask.user_id,
                    ask.chat_id,
                    ask.kind,
                    json.dumps(list(ask.memory_ids)),
                    ask.expires_at,
                ),
            )

    async def get(self, token: str) -> PendingAsk | None:
        row = await self.connection.row(
            "SELECT token, user_id, chat_id, kind, memory_ids, expires_at FROM pending_asks "
            "WHERE token=?",
            (token,),
        )
        return None if row is None else _ask(row)

    async def take(self, token: str) -> bool:
        """Close the question; False if it was closed already (another tap got there first)."""
        async with self.connection.transaction() as db:
            cur = await db.execute("DELETE FROM pending_asks WHERE token=?", (token,))
            return bool(cur.rowcount)


def _ask(row: Any) -> PendingAsk:
    return PendingAsk(
        str(row[0]),
        int(row[1]),
        int(row[2]),
        str(row[3]),
        tuple(json.loads(row[4])),
        str(row[5]),
    )
