"""The learner model's tables (migration m002_learner; learner_profile.py, learner_entries.py and
learner_cards.py read and write them) and the format their times are kept in. Every table has a
user_id column, and /forgetme deletes a user's rows from each of :data:`USER_TABLES` in its one
transaction."""

from __future__ import annotations

from datetime import UTC, datetime

LEARNER_SCHEMA = """
CREATE TABLE learner_profile (
    user_id INTEGER NOT NULL,
    field TEXT NOT NULL,
    value TEXT NOT NULL,
    source TEXT NOT NULL,
    chat_id INTEGER,
    message_id INTEGER,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user_id, field)
);
CREATE TABLE learner_profile_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    field TEXT NOT NULL,
    old_value TEXT,
    old_source TEXT,
    old_updated_at TEXT,
    new_value TEXT,
    source TEXT NOT NULL,
    at TEXT NOT NULL,
    undone_at TEXT
);
CREATE INDEX learner_profile_history_user ON learner_profile_history(user_id, id);
CREATE TABLE learner_mistakes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    chat_id INTEGER,
    message_id INTEGER,
    original TEXT NOT NULL,
    corrected TEXT NOT NULL,
    category TEXT NOT NULL,
    reason TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX learner_mistakes_user ON learner_mistakes(user_id, at);
CREATE TABLE learner_words (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    term TEXT NOT NULL,
    meaning TEXT NOT NULL,
    example TEXT NOT NULL,
    chat_id INTEGER,
    message_id INTEGER,
    at TEXT NOT NULL,
    UNIQUE (user_id, key)
);
CREATE TABLE learner_cards (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('word', 'mistake')),
    ref_id INTEGER NOT NULL,
    fsrs TEXT NOT NULL,
    due TEXT NOT NULL,
    reps INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    UNIQUE (kind, ref_id)
);
CREATE INDEX learner_cards_due ON learner_cards(user_id, due);
CREATE TABLE learner_reviews (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    card_id INTEGER NOT NULL,
    rating INTEGER NOT NULL,
    at TEXT NOT NULL
);
CREATE TABLE learner_days (
    user_id INTEGER NOT NULL,
    day TEXT NOT NULL,
    messages INTEGER NOT NULL DEFAULT 0,
    reviews INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day)
)
"""

APP_LANGUAGE_SCHEMA = """
CREATE TABLE learner_app_language (
    user_id INTEGER PRIMARY KEY,
    lang TEXT NOT NULL,
    updated_at TEXT NOT NULL
)
"""
"""Added by migration m012: the language the learner's app named last."""

ASKED_ONCE_SCHEMA = """
CREATE TABLE learner_asked_once (
    user_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    asked_at TEXT NOT NULL,
    PRIMARY KEY (user_id, key)
)
"""
"""Added by migration m017: what the tutor was told to ask about once (storage/asked_once.py)."""

USER_TABLES = (
    "learner_profile",
    "learner_profile_history",
    "learner_mistakes",
    "learner_words",
    "learner_cards",
    "learner_reviews",
    "learner_days",
    "learner_app_language",
    "learner_asked_once",
)


def iso(when: datetime) -> str:
    """A time as the learner tables keep it: UTC, to the second, in one fixed format, so times
    compare correctly as text in SQL."""
    utc = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return utc.isoformat(timespec="seconds")


def as_datetime(text: str) -> datetime:
    """A stored ISO time as an aware UTC datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)
