"""Answered turns: the one transaction that stores a turn, what turns cost, and the extraction log
that says what the after-reply extraction did."""

from __future__ import annotations

import json
from typing import Any

import aiosqlite

from memora.clock import utcnow
from memora.storage.connection import Connection
from memora.storage.erasure import erased_since
from memora.storage.modes import write_mode
from memora.storage.rows import (
    ADD_USAGE,
    USAGE_COLS,
    ExtractionLog,
    ForgottenMeanwhile,
    NewTurn,
    Scrub,
    TurnUsage,
    usage_values,
)


class TurnQueries:
    """Writes and reads of turns, their usage and the extraction log."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def record_turn(
        self, turn: NewTurn, *, since: int | None = None, scrub: Scrub | None = None
    ) -> int:
        """Write user message, reply, usage and last context atomically; return the turn id.

        With `since` (the erasure mark the turn began at), what was deleted meanwhile is read in
        this transaction: a speaker forgotten meanwhile raises ForgottenMeanwhile (nothing is
        written); otherwise `scrub` gives the context to store without what was deleted."""
        async with self.connection.transaction() as db:
            context = turn.context
            if since is not None and turn.user_id is not None:
                erased = await erased_since(db, since, turn.user_id, turn.chat_id)
                if erased.speaker:
                    raise ForgottenMeanwhile(turn.user_id)
                if erased and scrub is not None:
                    context = scrub(erased)
            # A chat seen for the first time; never changes a known chat's kind. Touching the
            # row locks it until COMMIT, so on PostgreSQL two turns of one chat take turns
            # here and each sees the other's seq (SQLite's one connection does that already).
            await db.execute(
                "INSERT INTO chats(chat_id, created_at, updated_at) VALUES (?,?,?) "
                "ON CONFLICT (chat_id) DO UPDATE SET updated_at=excluded.updated_at",
                (turn.chat_id, turn.at, turn.at),
            )
            seq = await self._next_seq(db, turn.chat_id)
            cols = ", ".join(USAGE_COLS)
            cur = await db.execute(
                f"INSERT INTO turns(chat_id, user_id, update_id, created_at, {cols}) "
                f"VALUES (?,?,?,?,{','.join('?' * len(USAGE_COLS))})",
                (turn.chat_id, turn.user_id, turn.update_id, turn.at, *usage_values(turn.usage)),
            )
            turn_id = int(cur.lastrowid or 0)
            for offset, (role, text, uid, name, ext) in enumerate(
                [
                    ("user", turn.user_text, turn.user_id, turn.user_name, turn.external_id),
                    ("assistant", turn.reply_text, None, "", None),
                ]
            ):
                await db.execute(
                    "INSERT INTO messages(chat_id, seq, role, content, user_id, user_name, "
                    "turn_id, external_id, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                    (turn.chat_id, seq + offset, role, text, uid, name, turn_id, ext, turn.at),
                )
            ctx = json.dumps([m.as_dict() for m in context], ensure_ascii=False)
            await db.execute(
                "UPDATE chats SET last_context=?, updated_at=? WHERE chat_id=?",
                (ctx, turn.at, turn.chat_id),
            )
            if turn.mode is not None:  # a lesson mode moves on with the turn, or not at all
                await write_mode(db, turn.mode)
        return turn_id

    async def answer_to(self, update_id: int) -> str | None:
        """The stored reply of the turn that answered this update, if one did."""
        row = await self.connection.row(
            "SELECT m.content FROM turns t JOIN messages m ON m.turn_id = t.id "
            "WHERE t.update_id=? AND m.role='assistant'",
            (update_id,),
        )
        return None if row is None else str(row[0])

    @staticmethod
    async def _next_seq(db: aiosqlite.Connection, chat_id: int) -> int:
        """The next message's seq: never below the summary offset, so turns deleted by
        /forgetme cannot make new turns look summarized already."""
        async with db.execute(
            "SELECT COALESCE(MAX(n), 0) FROM (SELECT MAX(seq) + 1 AS n FROM messages "
            "WHERE chat_id=? UNION ALL SELECT summarized_count FROM chats WHERE chat_id=?) AS t",
            (chat_id, chat_id),
        ) as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def add_turn_usage(self, turn_id: int, usage: TurnUsage) -> None:
        """Add tokens spent after the reply (summary, extraction, embedding) to the turn's row."""
        await self.connection.write(ADD_USAGE, (*usage_values(usage), turn_id))

    async def last_usage(self, chat_id: int) -> TurnUsage:
        row = await self.connection.row(
            f"SELECT {', '.join(USAGE_COLS)} FROM turns WHERE chat_id=? ORDER BY id DESC LIMIT 1",
            (chat_id,),
        )
        return TurnUsage(*row) if row else TurnUsage()

    async def total_usage(self, chat_id: int) -> TurnUsage:
        sums = ", ".join(f"COALESCE(SUM({c}), 0)" for c in USAGE_COLS)
        row = await self.connection.row(f"SELECT {sums} FROM turns WHERE chat_id=?", (chat_id,))
        return TurnUsage(*row) if row else TurnUsage()

    async def turn_rows(self, chat_id: int) -> list[dict[str, Any]]:
        return [
            dict(r)
            for r in await self.connection.rows(
                "SELECT * FROM turns WHERE chat_id=? ORDER BY id", (chat_id,)
            )
        ]

    async def log_extraction(
        self, log: ExtractionLog, *, spent: tuple[int, TurnUsage] | None = None
    ) -> None:
        """Keep the user's last extraction; with `spent` (turn id, tokens) also add what it cost
        to that turn, in the same transaction (one commit, one fsync, instead of two)."""
        async with self.connection.transaction() as db:
            await db.execute(
                "INSERT INTO extraction_log(user_id, chat_id, at, status, raw, detail, tokens) "
                "VALUES (?,?,?,?,?,?,?) ON CONFLICT(user_id) DO UPDATE SET "
                "chat_id=excluded.chat_id, at=excluded.at, status=excluded.status, "
                "raw=excluded.raw, detail=excluded.detail, tokens=excluded.tokens",
                (log.user_id, log.chat_id, log.at, log.status, log.raw, log.detail, log.tokens),
            )
            if spent is not None:
                turn_id, usage = spent
                await db.execute(ADD_USAGE, (*usage_values(usage), turn_id))

    async def log_extraction_manual(self, user_id: int, chat_id: int, text: str) -> None:
        await self.log_extraction(
            ExtractionLog(
                user_id,
                chat_id,
                utcnow(),
                "manual memory (automatic extraction skipped)",
                "",
                text,
                0,
            )
        )

    async def extraction(self, user_id: int) -> ExtractionLog | None:
        row = await self.connection.row(
            "SELECT user_id, chat_id, at, status, raw, detail, tokens FROM extraction_log "
            "WHERE user_id=?",
            (user_id,),
        )
        return ExtractionLog(*row) if row else None
