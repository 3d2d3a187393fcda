"""Short-term memory and the durable queues' tables: SQLite by default, PostgreSQL when a URL is
given. `Database` is the store; rows.py holds the values it reads and writes; the schema is in
migrations.py (and learner_schema.py)."""

from memora.storage.database import Database
from memora.storage.rows import (
    ChatRow,
    Erased,
    ExtractionLog,
    ForgottenMeanwhile,
    ModeRow,
    NewTurn,
    SharedChatLock,
    StoredMessage,
    TurnUsage,
)

__all__ = [
    "ChatRow",
    "Database",
    "Erased",
    "ExtractionLog",
    "ForgottenMeanwhile",
    "ModeRow",
    "NewTurn",
    "SharedChatLock",
    "StoredMessage",
    "TurnUsage",
]
