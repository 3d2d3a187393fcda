"""What the tutor was told to ask about once (how an exam went, once its day has passed), so it
is not asked again: one row per learner and subject, erased with the learner (USER_TABLES)."""

from __future__ import annotations

from memora.clock import utcnow
from memora.storage.connection import Connection


class AskedOnce:
    """The asked-once record of every learner, over one connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def asked(self, user_id: int, key: str) -> bool:
        """Whether the tutor was already told to ask the learner about `key`."""
        found = await self.connection.row(
            "SELECT 1 FROM learner_asked_once WHERE user_id=? AND key=?", (user_id, key)
        )
        return found is not None

    async def note(self, user_id: int, key: str, at: str | None = None) -> None:
        """Record that the tutor was told to ask about `key` (a second note changes nothing)."""
        async with self.connection.transaction() as conn:
            await conn.execute(
                "INSERT INTO learner_asked_once(user_id, key, asked_at) VALUES (?,?,?) "
                "ON CONFLICT(user_id, key) DO NOTHING",
                (user_id, key, at or utcnow()),
            )
