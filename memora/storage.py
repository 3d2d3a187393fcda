"""Short-term memory: SQLite (aiosqlite, WAL) by default, PostgreSQL when a URL is given.

The schema lives in migrations.py. Every multi-statement write goes through
`Database.transaction()`, which rolls back on any exception, cancellation included. On SQLite one
connection is shared by every chat, so a transaction holds a lock for its whole span; on
PostgreSQL (memora/postgres.py, `[storage] database_url`) each transaction has a pooled
connection of its own and replicas share the database.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, cast

import aiosqlite

from memora.clock import utcnow
from memora.erase import CHECKPOINT, SECURE_DELETE
from memora.learner.schema import USER_TABLES
from memora.llm import ChatMessage
from memora.migrations import applied, migrate
from memora.postgres import PgPool


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    role: str
    content: str
    user_id: int | None
    user_name: str
    created_at: str


@dataclass(frozen=True)
class ChatRow:
    chat_id: int
    kind: str
    title: str
    summary: str
    summarized_count: int
    last_context: list[ChatMessage]
    last_summary_error: str


@dataclass(frozen=True)
class TurnUsage:
    counted_input: int = 0
    actual_input: int = 0
    output_tokens: int = 0
    summary_tokens: int = 0
    extraction_tokens: int = 0
    embedding_tokens: int = 0
    memories_used: int = 0
    transcription_tokens: int = 0  # a voice message's transcription (token-billed models)
    transcription_seconds: int = 0  # … or its audio length (duration-billed models)

    @property
    def total(self) -> int:
        return (
            self.actual_input
            + self.output_tokens
            + self.summary_tokens
            + self.extraction_tokens
            + self.embedding_tokens
            + self.transcription_tokens
        )


@dataclass(frozen=True)
class NewTurn:
    """Everything one answered turn writes, in one transaction."""

    chat_id: int
    user_id: int | None
    user_name: str
    user_text: str
    reply_text: str
    context: list[ChatMessage]
    usage: TurnUsage
    external_id: int | None = None
    update_id: int | None = None  # the platform update it answers: answered once, ever
    at: str = field(default_factory=utcnow)


@dataclass(frozen=True)
class ExtractionLog:
    user_id: int
    chat_id: int | None
    at: str
    status: str
    raw: str
    detail: str
    tokens: int


_USAGE_COLS = tuple(f.name for f in fields(TurnUsage))  # the turns table's usage columns
_ADD_USAGE = f"UPDATE turns SET {', '.join(f'{c} = {c} + ?' for c in _USAGE_COLS)} WHERE id=?"


def _usage_values(usage: TurnUsage) -> tuple[int, ...]:
    return tuple(getattr(usage, c) for c in _USAGE_COLS)


class SharedChatLock(Protocol):
    async def release(self) -> None: ...


class _NoLock:
    async def release(self) -> None:
        return None


_NO_LOCK = _NoLock()


class Database:
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

    async def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        """One autocommitted write, never inside another chat's open transaction."""
        if self._pg is not None:  # a pooled connection of its own
            return (await self.db.execute(sql, params)).rowcount or 0
        async with self._tx_lock:
            cur = await self.db.execute(sql, params)
            return cur.rowcount or 0

    async def open(self) -> None:
        if self.url:
            self._pg = await PgPool.connect(self.url)
            # PgPool answers the aiosqlite calls this class makes (see memora/postgres.py).
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

    # -- chats ----------------------------------------------------------------------------------
    async def ensure_chat(self, chat_id: int, kind: str = "private", title: str = "") -> None:
        """The chat's row, with this kind and (unless empty) title. Read first: every turn calls
        this, and a write when nothing changed cost a commit (an fsync) per turn."""
        row = await self.row("SELECT kind, title FROM chats WHERE chat_id=?", (chat_id,))
        if row is not None and row[0] == kind and (not title or row[1] == title):
            return
        now = utcnow()
        await self._write(
            "INSERT INTO chats(chat_id, kind, title, created_at, updated_at) VALUES (?,?,?,?,?) "
            "ON CONFLICT(chat_id) DO UPDATE SET kind=excluded.kind, "
            "title=CASE WHEN excluded.title='' THEN chats.title ELSE excluded.title END",
            (chat_id, kind, title, now, now),
        )

    async def chat(self, chat_id: int) -> ChatRow:
        row = await self.row("SELECT * FROM chats WHERE chat_id=?", (chat_id,))
        if row is None:
            return ChatRow(chat_id, "private", "", "", 0, [], "")
        ctx = [ChatMessage(m["role"], m["content"]) for m in json.loads(row["last_context"])]
        return ChatRow(
            chat_id,
            row["kind"],
            row["title"],
            row["summary"],
            row["summarized_count"],
            ctx,
            row["last_summary_error"],
        )

    async def chat_ids(self) -> list[int]:
        return [int(r[0]) for r in await self.rows("SELECT chat_id FROM chats ORDER BY chat_id")]

    # -- history --------------------------------------------------------------------------------
    async def messages(self, chat_id: int, from_seq: int = 0) -> list[StoredMessage]:
        rows = await self.rows(
            "SELECT seq, role, content, user_id, user_name, created_at FROM messages "
            "WHERE chat_id=? AND seq>=? ORDER BY seq",
            (chat_id, from_seq),
        )
        return [StoredMessage(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    async def message_count(self, chat_id: int) -> int:
        row = await self.row("SELECT COUNT(*) FROM messages WHERE chat_id=?", (chat_id,))
        return int(row[0]) if row else 0

    async def record_turn(self, turn: NewTurn) -> int:
        """Write user message, reply, usage and last context atomically; return the turn id."""
        async with self.transaction() as db:
            # A chat seen for the first time; never changes a known chat's kind. Touching the
            # row locks it until COMMIT, so on PostgreSQL two turns of one chat take turns
            # here and each sees the other's seq (SQLite's one connection does that already).
            await db.execute(
                "INSERT INTO chats(chat_id, created_at, updated_at) VALUES (?,?,?) "
                "ON CONFLICT (chat_id) DO UPDATE SET updated_at=excluded.updated_at",
                (turn.chat_id, turn.at, turn.at),
            )
            seq = await self._next_seq(db, turn.chat_id)
            cols = ", ".join(_USAGE_COLS)
            cur = await db.execute(
                f"INSERT INTO turns(chat_id, user_id, update_id, created_at, {cols}) "
                f"VALUES (?,?,?,?,{','.join('?' * len(_USAGE_COLS))})",
                (turn.chat_id, turn.user_id, turn.update_id, turn.at, *_usage_values(turn.usage)),
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
            ctx = json.dumps([m.as_dict() for m in turn.context], ensure_ascii=False)
            await db.execute(
                "UPDATE chats SET last_context=?, updated_at=? WHERE chat_id=?",
                (ctx, turn.at, turn.chat_id),
            )
        return turn_id

    async def answer_to(self, update_id: int) -> str | None:
        """The stored reply of the turn that answered this update, if one did."""
        row = await self.row(
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

    async def save_summary(
        self, chat_id: int, summary: str, summarized_count: int, *, expected_from: int
    ) -> bool:
        """Advance the summary; refuses (False) if another writer moved the offset meanwhile."""
        changed = await self._write(
            "UPDATE chats SET summary=?, summarized_count=?, last_summary_error='', updated_at=? "
            "WHERE chat_id=? AND summarized_count=? "
            "AND ? <= (SELECT COALESCE(MAX(seq), -1) + 1 FROM messages WHERE chat_id=?)",
            (
                summary,
                summarized_count,
                utcnow(),
                chat_id,
                expected_from,
                summarized_count,
                chat_id,
            ),
        )
        return changed > 0

    async def note_summary_error(self, chat_id: int, error: str) -> None:
        await self._write("UPDATE chats SET last_summary_error=? WHERE chat_id=?", (error, chat_id))

    async def add_turn_usage(self, turn_id: int, usage: TurnUsage) -> None:
        """Add tokens spent after the reply (summary, extraction, embedding) to the turn's row."""
        await self._write(_ADD_USAGE, (*_usage_values(usage), turn_id))

    async def last_usage(self, chat_id: int) -> TurnUsage:
        row = await self.row(
            f"SELECT {', '.join(_USAGE_COLS)} FROM turns WHERE chat_id=? ORDER BY id DESC LIMIT 1",
            (chat_id,),
        )
        return TurnUsage(*row) if row else TurnUsage()

    async def total_usage(self, chat_id: int) -> TurnUsage:
        sums = ", ".join(f"COALESCE(SUM({c}), 0)" for c in _USAGE_COLS)
        row = await self.row(f"SELECT {sums} FROM turns WHERE chat_id=?", (chat_id,))
        return TurnUsage(*row) if row else TurnUsage()

    async def turn_rows(self, chat_id: int) -> list[dict[str, Any]]:
        return [
            dict(r)
            for r in await self.rows("SELECT * FROM turns WHERE chat_id=? ORDER BY id", (chat_id,))
        ]

    async def reset_chat(self, chat_id: int) -> int:
        """Forget this chat's short-term memory; return how many messages were deleted."""
        n = await self.message_count(chat_id)
        async with self.transaction() as db:
            await db.execute("DELETE FROM messages WHERE chat_id=?", (chat_id,))
            await db.execute("DELETE FROM turns WHERE chat_id=?", (chat_id,))
            await db.execute(
                "UPDATE chats SET summary='', summarized_count=0, last_context='[]', "
                "last_summary_error='' WHERE chat_id=?",
                (chat_id,),
            )
        await self.checkpoint()
        return n

    async def forget_user(self, user_id: int) -> dict[str, int]:
        """Delete the user's private chats, their turns in groups, and their extraction log."""
        private = [
            int(r[0])
            for r in await self.rows(
                "SELECT DISTINCT m.chat_id FROM messages m JOIN chats c ON c.chat_id = m.chat_id "
                "WHERE m.user_id=? AND c.kind='private'",
                (user_id,),
            )
        ]
        marks = ",".join("?" * len(private)) or "NULL"
        in_private = int(
            (
                await self.row(
                    f"SELECT COUNT(*) FROM messages WHERE chat_id IN ({marks})", tuple(private)
                )
                or [0]
            )[0]
        )
        in_groups = int(
            (
                await self.row(
                    "SELECT COUNT(*) FROM messages m JOIN chats c ON c.chat_id = m.chat_id "
                    "WHERE m.user_id=? AND c.kind != 'private'",
                    (user_id,),
                )
                or [0]
            )[0]
        )
        # In groups a user's message goes together with the reply to it (same turn), so the
        # history stays user/assistant pairs. The summary and last request context of those
        # groups may quote the user, so both are cleared; the older turns are not folded
        # again (the offset stays), the group simply goes on without that summary.
        async with self.transaction() as db:
            for sql in (
                f"DELETE FROM chats WHERE chat_id IN ({marks})",
                f"DELETE FROM messages WHERE chat_id IN ({marks})",
                f"DELETE FROM turns WHERE chat_id IN ({marks})",
            ):
                await db.execute(sql, tuple(private))
            await db.execute(
                "UPDATE chats SET last_context='[]', summary='' WHERE chat_id IN "
                "(SELECT chat_id FROM messages WHERE user_id=?)",
                (user_id,),
            )
            await db.execute(
                "DELETE FROM messages WHERE turn_id IN "
                "(SELECT turn_id FROM messages WHERE user_id=?)",
                (user_id,),
            )
            await db.execute("DELETE FROM extraction_log WHERE user_id=?", (user_id,))
            for table in ("inbox", "outbox"):  # updates and replies still on their way
                await db.execute(f"DELETE FROM {table} WHERE user_id=?", (user_id,))
            for table in USER_TABLES:  # the learner model (memora/learner/schema.py)
                await db.execute(f"DELETE FROM {table} WHERE user_id=?", (user_id,))
        await self.checkpoint()
        return {"private_messages": in_private, "group_messages": in_groups}

    async def forget_memory_text(self, user_id: int, text: str) -> None:
        """A forgotten memory's text leaves the user's extraction log too (it may quote it)."""
        for form in {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}:
            await self._write(
                "DELETE FROM extraction_log WHERE user_id=? "
                "AND (instr(raw, ?) > 0 OR instr(detail, ?) > 0)",
                (user_id, form, form),
            )
        await self.checkpoint()

    # -- extraction log -------------------------------------------------------------------------
    async def log_extraction(
        self, log: ExtractionLog, *, spent: tuple[int, TurnUsage] | None = None
    ) -> None:
        """Keep the user's last extraction; with `spent` (turn id, tokens) also add what it cost
        to that turn, in the same transaction (one commit, one fsync, instead of two)."""
        async with self.transaction() as db:
            await db.execute(
                "INSERT INTO extraction_log(user_id, chat_id, at, status, raw, detail, tokens) "
                "VALUES (?,?,?,?,?,?,?) ON CONFLICT(user_id) DO UPDATE SET "
                "chat_id=excluded.chat_id, at=excluded.at, status=excluded.status, "
                "raw=excluded.raw, detail=excluded.detail, tokens=excluded.tokens",
                (log.user_id, log.chat_id, log.at, log.status, log.raw, log.detail, log.tokens),
            )
            if spent is not None:
                turn_id, usage = spent
                await db.execute(_ADD_USAGE, (*_usage_values(usage), turn_id))

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
        row = await self.row(
            "SELECT user_id, chat_id, at, status, raw, detail, tokens FROM extraction_log "
            "WHERE user_id=?",
            (user_id,),
        )
        return ExtractionLog(*row) if row else None

    async def last_speaker(self, chat_id: int) -> tuple[int, str] | None:
        """Who sent the chat's last user message (whose turn the last context was)."""
        row = await self.row(
            "SELECT user_id, user_name FROM messages WHERE chat_id=? AND role='user' "
            "ORDER BY seq DESC LIMIT 1",
            (chat_id,),
        )
        return (int(row[0]), str(row[1])) if row and row[0] is not None else None

    async def participants(self, chat_id: int) -> list[tuple[int, str]]:
        return [
            (int(r[0]), str(r[1]))
            for r in await self.rows(
                "SELECT user_id, MAX(user_name) FROM messages "
                "WHERE chat_id=? AND user_id IS NOT NULL GROUP BY user_id ORDER BY user_id",
                (chat_id,),
            )
        ]
