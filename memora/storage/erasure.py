"""Forgetting a user in the short-term store (/forgetme) and a forgotten memory's words wherever the
extraction log quoted them; the WAL is checkpointed after, so no old page keeps the words.

Each deletion also leaves a row in `erasures` (ids only, never text): a turn notes the last row
when it begins (`erasure_mark`) and, in the transaction that stores it, reads what was deleted
since (`erased_since`). So a turn in flight in any process on this store, a group turn that
holds a forgotten member's lines or a turn that retrieved a forgotten memory, stores no trace
of what was deleted."""

from __future__ import annotations

import json
from datetime import timedelta

import aiosqlite

from memora.clock import as_utc, utcnow
from memora.storage.connection import Connection
from memora.storage.learner_schema import USER_TABLES
from memora.storage.rows import Erased

KEPT = timedelta(days=1)  # an erasure row outlives every turn that began before it


async def erased_since(db: aiosqlite.Connection, mark: int, user_id: int, chat_id: int) -> Erased:
    """What was deleted after `mark` that a turn of `user_id` in `chat_id` must not store."""
    async with db.execute(
        "SELECT user_id, chat_id, memory_id FROM erasures WHERE id > ? "
        "AND (user_id = ? OR chat_id = ?)",
        (mark, user_id, chat_id),
    ) as cur:
        rows = list(await cur.fetchall())
    speaker = any(int(u) == user_id and c is None and m is None for u, c, m in rows)
    members = frozenset(int(u) for u, c, _m in rows if c is not None and int(c) == chat_id)
    memories = frozenset(str(m) for u, _c, m in rows if m is not None and int(u) == user_id)
    return Erased(speaker, members - {user_id}, memories)


async def _note_erasure(
    db: aiosqlite.Connection,
    dialect: str,
    rows: list[tuple[int, int | None, str | None]],
) -> None:
    """Add erasure rows (in the deletion's own transaction) and prune those no turn needs."""
    if dialect == "postgresql":  # ids in commit order: a turn's mark never skips a later commit
        await db.execute("LOCK TABLE erasures IN EXCLUSIVE MODE")
    now = as_utc()
    await db.execute("DELETE FROM erasures WHERE at < ?", (utcnow(now - KEPT),))
    for user_id, chat_id, memory_id in rows:
        await db.execute(
            "INSERT INTO erasures(user_id, chat_id, memory_id, at) VALUES (?,?,?,?)",
            (user_id, chat_id, memory_id, utcnow(now)),
        )


class UserErasure:
    """Deletions that follow a user across chats and tables."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def forget_user(self, user_id: int) -> dict[str, int]:
        """Delete the user's private chats, their turns in groups, and their extraction log."""
        chats = await self.connection.rows(
            "SELECT DISTINCT m.chat_id, c.kind FROM messages m JOIN chats c "
            "ON c.chat_id = m.chat_id WHERE m.user_id=?",
            (user_id,),
        )
        private = [int(chat) for chat, kind in chats if kind == "private"]
        groups = [int(chat) for chat, kind in chats if kind != "private"]
        marks = ",".join("?" * len(private)) or "NULL"
        in_private = int(
            (
                await self.connection.row(
                    f"SELECT COUNT(*) FROM messages WHERE chat_id IN ({marks})", tuple(private)
                )
                or [0]
            )[0]
        )
        in_groups = int(
            (
                await self.connection.row(
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
        async with self.connection.transaction() as db:
            await _note_erasure(
                db,
                self.connection.dialect,
                [(user_id, None, None), *((user_id, g, None) for g in groups)],
            )
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
            # updates and replies on their way, the user's lesson modes, the questions asked
            for table in ("inbox", "outbox", "chat_modes", "pending_asks"):
                await db.execute(f"DELETE FROM {table} WHERE user_id=?", (user_id,))
            for table in USER_TABLES:  # the learner model (learner_schema.py)
                await db.execute(f"DELETE FROM {table} WHERE user_id=?", (user_id,))
        await self.connection.checkpoint()
        return {"private_messages": in_private, "group_messages": in_groups}

    async def note_memory_erased(self, user_id: int, memory_id: str) -> None:
        """A forgotten memory's id, for the turns in flight that may have retrieved it."""
        async with self.connection.transaction() as db:
            await _note_erasure(db, self.connection.dialect, [(user_id, None, memory_id)])

    async def erasure_mark(self) -> int:
        """The last erasure so far (see the module's docstring)."""
        row = await self.connection.row("SELECT COALESCE(MAX(id), 0) FROM erasures")
        return int(row[0]) if row else 0

    async def erased_since(self, mark: int, user_id: int, chat_id: int) -> Erased:
        """What was deleted after `mark` that a turn of this user in this chat must not store."""
        return await erased_since(
            self.connection.db, mark, user_id, chat_id
        )  # outside a transaction

    async def forget_memory_text(self, user_id: int, text: str) -> None:
        """A forgotten memory's text leaves the user's extraction log too (it may quote it), and
        the last request context of any chat whose memory block listed it."""
        for form in {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}:
            await self.connection.write(
                "DELETE FROM extraction_log WHERE user_id=? "
                "AND (instr(raw, ?) > 0 OR instr(detail, ?) > 0)",
                (user_id, form, form),
            )
        line = "\n- " + text  # its line in a context's memory block (memora.engine.retrieval)
        for form in {json.dumps(line)[1:-1], json.dumps(line, ensure_ascii=False)[1:-1]}:
            await self.connection.write(
                "UPDATE chats SET last_context = REPLACE(last_context, ?, '') "
                "WHERE instr(last_context, ?) > 0",
                (form, form),
            )
        await self.connection.checkpoint()
