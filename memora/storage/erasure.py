"""Forgetting a user in the short-term store (/forgetme) and a forgotten memory's words wherever the
extraction log quoted them; the WAL is checkpointed after, so no old page keeps the words."""

from __future__ import annotations

import json

from memora.storage.connection import Connection
from memora.storage.learner_schema import USER_TABLES


class UserErasure(Connection):
    """Deletions that follow a user across chats and tables."""

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
            # updates and replies still on their way, and the lesson modes the user runs
            for table in ("inbox", "outbox", "chat_modes"):
                await db.execute(f"DELETE FROM {table} WHERE user_id=?", (user_id,))
            for table in USER_TABLES:  # the learner model (learner_schema.py)
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
