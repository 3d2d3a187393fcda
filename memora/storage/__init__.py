"""Every SQL statement of Memora: short-term memory, the durable queues, the learner model's
tables and the schedules, on SQLite by default, PostgreSQL when a URL is given. `Database` is the
store, a facade of named query parts over one connection; rows.py holds the values they read and
write; the schema is in migrations.py (and learner_schema.py, whose tables learner_profile.py,
learner_entries.py and learner_cards.py read and write)."""

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
