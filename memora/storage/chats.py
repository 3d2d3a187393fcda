"""A chat's row and its history: kind and title, the running summary and its offset, the messages,
who spoke; resetting a chat."""

from __future__ import annotations

import json

from memora.clock import utcnow
from memora.storage.connection import Connection
from memora.storage.rows import ChatRow, StoredMessage
from memora.types import ChatMessage

_ERASED_SINCE = "SELECT 1 FROM erasures WHERE id > ? AND chat_id = ?"


class ChatQueries:
    """Reads and writes of chats and their messages."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    # -- chats ----------------------------------------------------------------------------------
    async def ensure_chat(self, chat_id: int, kind: str = "private", title: str = "") -> None:
        """The chat's row, with this kind and (unless empty) title. Read first: every turn calls
        this, and a write when nothing changed cost a commit (an fsync) per turn."""
        row = await self.connection.row("SELECT kind, title FROM chats WHERE chat_id=?", (chat_id,))
        if row is not None and row[0] == kind and (not title or row[1] == title):
            return
        now = utcnow()
        await self.connection.write(
            "INSERT INTO chats(chat_id, kind, title, created_at, updated_at) VALUES (?,?,?,?,?) "
            "ON CONFLICT(chat_id) DO UPDATE SET kind=excluded.kind, "
            "title=CASE WHEN excluded.title='' THEN chats.title ELSE excluded.title END",
            (chat_id, kind, title, now, now),
        )

    async def chat(self, chat_id: int) -> ChatRow:
        row = await self.connection.row("SELECT * FROM chats WHERE chat_id=?", (chat_id,))
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
        return [
            int(r[0])
            for r in await self.connection.rows("SELECT chat_id FROM chats ORDER BY chat_id")
        ]

    async def messages(self, chat_id: int, from_seq: int = 0) -> list[StoredMessage]:
        rows = await self.connection.rows(
            "SELECT seq, role, content, user_id, user_name, created_at FROM messages "
            "WHERE chat_id=? AND seq>=? ORDER BY seq",
            (chat_id, from_seq),
        )
        return [StoredMessage(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    async def message_count(self, chat_id: int) -> int:
        row = await self.connection.row("SELECT COUNT(*) FROM messages WHERE chat_id=?", (chat_id,))
        return int(row[0]) if row else 0

    async def save_summary(
        self,
        chat_id: int,
        summary: str,
        summarized_count: int,
        *,
        expected_from: int,
        since: int | None = None,
    ) -> bool:
        """Advance the summary; refuses (False) if another writer moved the offset meanwhile,
        or (with `since`, the erasure mark the fold began at) if a member of the chat was
        forgotten since: the summary may paraphrase them, so it is not written."""
        unerased = "" if since is None else f" AND NOT EXISTS ({_ERASED_SINCE})"
        changed = await self.connection.write(
            "UPDATE chats SET summary=?, summarized_count=?, last_summary_error='', updated_at=? "
            "WHERE chat_id=? AND summarized_count=? "
            "AND ? <= (SELECT COALESCE(MAX(seq), -1) + 1 FROM messages WHERE chat_id=?)" + unerased,
            (
                summary,
                summarized_count,
                utcnow(),
                chat_id,
                expected_from,
                summarized_count,
                chat_id,
                *(() if since is None else (since, chat_id)),
            ),
        )
        return changed > 0

    async def note_summary_error(self, chat_id: int, error: str) -> None:
        await self.connection.write(
            "UPDATE chats SET last_summary_error=? WHERE chat_id=?", (error, chat_id)
        )

    async def reset_chat(self, chat_id: int) -> int:
        """Forget this chat's short-term memory and leave its lesson mode; return how many
        messages were deleted."""
        n = await self.message_count(chat_id)
        async with self.connection.transaction() as db:
            await db.execute("DELETE FROM messages WHERE chat_id=?", (chat_id,))
            await db.execute("DELETE FROM turns WHERE chat_id=?", (chat_id,))
            await db.execute("DELETE FROM chat_modes WHERE chat_id=?", (chat_id,))  # any lesson
            await db.execute(
                "UPDATE chats SET summary='', summarized_count=0, last_context='[]', "
                "last_summary_error='' WHERE chat_id=?",
                (chat_id,),
            )
        await self.connection.checkpoint()
        return n

    async def last_speaker(self, chat_id: int) -> tuple[int, str] | None:
        """Who sent the chat's last user message (whose turn the last context was)."""
        row = await self.connection.row(
            "SELECT user_id, user_name FROM messages WHERE chat_id=? AND role='user' "
            "ORDER BY seq DESC LIMIT 1",
            (chat_id,),
        )
        return (int(row[0]), str(row[1])) if row and row[0] is not None else None

    async def participants(self, chat_id: int) -> list[tuple[int, str]]:
        return [
            (int(r[0]), str(r[1]))
            for r in await self.connection.rows(
                "SELECT user_id, MAX(user_name) FROM messages "
                "WHERE chat_id=? AND user_id IS NOT NULL GROUP BY user_id ORDER BY user_id",
                (chat_id,),
            )
        ]

    # -- one learner's messages (their page, their own export) -----------------------------------
    async def private_chats_of(self, user_id: int) -> list[int]:
        """The private chats the user has written in."""
        rows = await self.connection.rows(
            "SELECT DISTINCT m.chat_id FROM messages m JOIN chats c ON c.chat_id = m.chat_id "
            "WHERE m.user_id=? AND c.kind='private' ORDER BY m.chat_id",
            (user_id,),
        )
        return [int(r[0]) for r in rows]

    async def group_messages_of(self, user_id: int) -> list[tuple[int, StoredMessage]]:
        """The user's own messages in groups, as (chat id, message), oldest first per chat."""
        rows = await self.connection.rows(
            "SELECT m.chat_id, m.seq, m.role, m.content, m.user_id, m.user_name, m.created_at "
            "FROM messages m JOIN chats c ON c.chat_id = m.chat_id "
            "WHERE m.user_id=? AND c.kind != 'private' ORDER BY m.chat_id, m.seq",
            (user_id,),
        )
        return [(int(r[0]), StoredMessage(r[1], r[2], r[3], r[4], r[5], r[6])) for r in rows]

    async def source_messages(
        self, user_id: int, refs: list[tuple[int, int]]
    ) -> dict[tuple[int, int], str]:
        """The user's own messages named by (chat id, platform message id): what a memory came
        from. Only that user's messages are found."""
        ids = sorted({message_id for _chat, message_id in refs})
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = await self.connection.rows(
            "SELECT chat_id, external_id, content FROM messages "
            f"WHERE user_id=? AND role='user' AND external_id IN ({marks})",
            (user_id, *ids),
        )
        wanted = set(refs)
        return {(int(r[0]), int(r[1])): str(r[2]) for r in rows if (int(r[0]), int(r[1])) in wanted}
