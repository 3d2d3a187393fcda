"""The deployment's own keys, in one place: generated once, kept in the store, shared by every
replica (they all open the same database).

Each key has a name saying what it is for: the webhook's secret token (`webhook_secret`), the
key of the learner's hash that the model provider sees (`provider_identifier`), and any later
one. A key is created by the first process that asks for it; a second process asking at the same
moment gets the same value (INSERT ... ON CONFLICT DO NOTHING, then read). `/forgetme` never
touches this table: it holds no learner data.
"""

from __future__ import annotations

import secrets

from memora.clock import utcnow
from memora.storage.connection import Connection

WEBHOOK_SECRET = "webhook_secret"
PROVIDER_IDENTIFIER = "provider_identifier"


class KeyQueries:
    """The deployment's keys, by name (table server_keys)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def server_key(self, name: str) -> str:
        """The key named `name`: 256 random bits, URL-safe (letters, digits, '-' and '_', which
        Telegram's secret_token accepts), made and stored on first use."""
        await self.connection.write(
            "INSERT INTO server_keys(name, value, created_at) VALUES (?,?,?) "
            "ON CONFLICT(name) DO NOTHING",
            (name, secrets.token_urlsafe(32), utcnow()),
        )
        row = await self.connection.row("SELECT value FROM server_keys WHERE name = ?", (name,))
        return str(row[0])
