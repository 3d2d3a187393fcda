"""The usage ledger's table (`usage`, read and written for memora/usage.py): per learner, UTC day,
kind of call and model, the calls, their tokens (cached input and reasoning among them), audio
seconds and answered turns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memora.storage.connection import Connection

LEDGER_COLS = (
    "calls",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "audio_seconds",
    "turns",
)
"""The figures of one ledger row, added up on every call (and what `/export` lists)."""


@dataclass(frozen=True)
class LedgerEntry:
    """What one call adds to its row (kind, model) of the learner's day."""

    kind: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    audio_seconds: float = 0.0
    turns: int = 0


_ADD = (
    f"INSERT INTO usage(user_id, day, kind, model, {', '.join(LEDGER_COLS)}) "
    f"VALUES (?,?,?,?,1,{','.join('?' * (len(LEDGER_COLS) - 1))}) "
    "ON CONFLICT(user_id, day, kind, model) DO UPDATE SET "
    + ", ".join(
        f"{c} = usage.{c} + " + ("1" if c == "calls" else f"excluded.{c}") for c in LEDGER_COLS
    )
)


def _entry(row: Sequence[Any]) -> LedgerEntry:
    """(kind, model, then the sums of LEDGER_COLS but calls) as a LedgerEntry."""
    kind, model, inp, out, cached, reasoning, seconds, turns = row
    return LedgerEntry(
        str(kind),
        str(model),
        int(inp),
        int(out),
        int(cached),
        int(reasoning),
        float(seconds),
        int(turns),
    )


class LedgerQueries:
    """Writes and reads of the `usage` table."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def add_usage(self, user_id: int, day: str, entries: Sequence[LedgerEntry]) -> None:
        """Add each entry as one call to its row of the learner's `day`, in one commit."""
        async with self.connection.transaction() as db:
            for e in entries:
                await db.execute(
                    _ADD,
                    (
                        user_id,
                        day,
                        e.kind,
                        e.model,
                        e.input_tokens,
                        e.output_tokens,
                        e.cached_tokens,
                        e.reasoning_tokens,
                        e.audio_seconds,
                        e.turns,
                    ),
                )

    async def usage_spent(self, user_id: int, since_day: str) -> tuple[int, float]:
        """The learner's tokens (input + output) and audio seconds from `since_day` on."""
        rows = await self.connection.rows(
            "SELECT COALESCE(SUM(input_tokens + output_tokens), 0), "
            "COALESCE(SUM(audio_seconds), 0) FROM usage WHERE user_id=? AND day >= ?",
            (user_id, since_day),
        )
        tokens, seconds = rows[0] if rows else (0, 0.0)
        return int(tokens), float(seconds)

    async def usage_since(self, since_day: str) -> list[tuple[int, LedgerEntry]]:
        """Every learner's usage from `since_day` on, summed per (user, kind, model)."""
        return [(int(uid), e) for uid, e in await self._sums("user_id", since_day)]

    async def usage_per_day(self, since_day: str) -> list[tuple[str, LedgerEntry]]:
        """Every learner's usage from `since_day` on, summed per (day, kind, model), by day."""
        return [(str(day), e) for day, e in await self._sums("day", since_day)]

    async def _sums(self, key: str, since_day: str) -> list[tuple[Any, LedgerEntry]]:
        """The usage from `since_day` on, summed per (`key`, kind, model), ordered by `key`
        (a column name of ours: user_id or day)."""
        sums = ", ".join(f"SUM({c})" for c in LEDGER_COLS[1:])
        rows = await self.connection.rows(
            f"SELECT {key}, kind, model, {sums} FROM usage WHERE day >= ? "
            f"GROUP BY {key}, kind, model ORDER BY {key}",
            (since_day,),
        )
        return [(r[0], _entry(r[1:])) for r in rows]

    async def learner_names(self, user_ids: Sequence[int]) -> dict[int, str]:
        """The name each of these learners last wrote under."""
        if not user_ids:
            return {}
        marks = ",".join("?" * len(user_ids))
        rows = await self.connection.rows(
            f"SELECT user_id, MAX(user_name) FROM messages WHERE user_id IN ({marks}) "
            "GROUP BY user_id",
            list(user_ids),
        )
        return {int(r[0]): str(r[1] or "") for r in rows}

    async def delete_usage(self, user_id: int) -> int:
        """Forget the learner's usage; how many rows went."""
        rows = await self.connection.rows("SELECT COUNT(*) FROM usage WHERE user_id=?", (user_id,))
        async with self.connection.transaction() as db:
            await db.execute("DELETE FROM usage WHERE user_id=?", (user_id,))
        return int(rows[0][0]) if rows else 0

    async def usage_rows(self, user_id: int) -> list[dict[str, Any]]:
        """The learner's usage rows, day by day, for /export."""
        keys = ("day", "kind", "model", *LEDGER_COLS)
        rows = await self.connection.rows(
            f"SELECT {', '.join(keys)} FROM usage WHERE user_id=? ORDER BY day, kind, model",
            (user_id,),
        )
        return [dict(zip(keys, row, strict=True)) for row in rows]
