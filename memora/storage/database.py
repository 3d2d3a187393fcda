"""`Database`: the short-term store as one object, a facade holding its connection and the named
query parts built over it."""

from __future__ import annotations

from pathlib import Path

from memora.storage.asked_once import AskedOnce
from memora.storage.chats import ChatQueries
from memora.storage.connection import Connection
from memora.storage.erasure import UserErasure
from memora.storage.keys import KeyQueries
from memora.storage.ledger import LedgerQueries
from memora.storage.modes import ModeQueries
from memora.storage.pending_asks import PendingAsks
from memora.storage.schedules import ScheduleQueries
from memora.storage.turns import TurnQueries


class Database:
    """The short-term store over one Connection (SQLite path or PostgreSQL URL): `chats` (chats
    and their history), `turns` (turns, usage and the extraction log), `modes` (lesson modes),
    `erasure` (forgetting a user or a memory's words), `keys` (the deployment's keys), `ledger`
    (the usage ledger), `schedules` (the reminders' and weekly reports' rows), `asks` (the
    questions waiting for a Yes before a deletion), `asked_once` (what the tutor was told to ask
    about once). `open()` and `close()` are the connection's; its transactions and raw reads
    are `connection`'s."""

    def __init__(self, path: Path | None = None, *, url: str = "") -> None:
        self.connection = Connection(path, url=url)
        self.chats = ChatQueries(self.connection)
        self.turns = TurnQueries(self.connection)
        self.modes = ModeQueries(self.connection)
        self.erasure = UserErasure(self.connection)
        self.keys = KeyQueries(self.connection)
        self.ledger = LedgerQueries(self.connection)
        self.schedules = ScheduleQueries(self.connection)
        self.asks = PendingAsks(self.connection)
        self.asked_once = AskedOnce(self.connection)

    async def open(self) -> None:
        """Connect and run the migrations."""
        await self.connection.open()

    async def close(self) -> None:
        await self.connection.close()
