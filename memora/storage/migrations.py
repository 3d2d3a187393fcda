"""Schema migrations for the SQLite store: ordered, named, each applied once in its own transaction.

To add a table or a column, append one function at the bottom of this module::

    @migration
    async def m002_reminders(db: aiosqlite.Connection) -> None:
        await script(db, '''
            CREATE TABLE reminders (
                user_id INTEGER PRIMARY KEY,
                at TEXT NOT NULL
            );
        ''')

That is all: `Database.open()` applies every migration whose name is not yet recorded, in the
order they appear here. Rules, because databases in the wild have already run the old ones:

- never edit, rename, reorder or delete a migration that has landed; fix forward with a new one;
- use `script()` (or `db.execute`), never `executescript()`, which would COMMIT half-way;
- the name is the function's name; prefix it with the next number so the file reads in order.

Each migration runs inside one `BEGIN IMMEDIATE` transaction together with the row that records
it in `_migrations`, so a migration that fails leaves no table behind and no record: it runs
again, whole, on the next start. (simonw/llm's migrations.py is the model; it records names the
same way but does not wrap each one in a transaction.) Migrations are recorded by name, not by
count, so two branches that each add one merge without renumbering anyone's database.

The same migrations build PostgreSQL when `[storage] database_url` names one: write them in the
SQL both engines share (see postgres.py for the few SQLite forms it adapts, and what to
avoid); the storage tests run them on both.

Hand-written rather than a tool: the store is raw SQL over aiosqlite with no ORM, and the
migration tools on PyPI (alembic, yoyo) need SQLAlchemy or a synchronous driver of their own;
this module and migrator.py (which applies them) are the few dozen lines that the job takes.
"""

from __future__ import annotations

from collections.abc import Sequence

import aiosqlite

from memora.storage.learner_schema import APP_LANGUAGE_SCHEMA, ASKED_ONCE_SCHEMA, LEARNER_SCHEMA
from memora.storage.migrator import Migration, MigrationFn, Transaction, applied, run, script

__all__ = ["MIGRATIONS", "Migration", "applied", "migrate", "migration", "script"]

MIGRATIONS: list[Migration] = []


def migration(fn: MigrationFn) -> MigrationFn:
    """Register `fn` as the next migration, named after the function."""
    name = getattr(fn, "__name__", "")
    if not name or any(m.name == name for m in MIGRATIONS):
        raise ValueError(f"migration names must be unique: {name!r}")
    MIGRATIONS.append(Migration(name, fn))
    return fn


async def migrate(
    db: aiosqlite.Connection,
    transaction: Transaction,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction; return their names."""
    return await run(db, transaction, migrations)


# -- the migrations, oldest first: append only ----------------------------------------------------
@migration
async def m001_initial(db: aiosqlite.Connection) -> None:
    await script(
        db,
        """
        CREATE TABLE chats (
            chat_id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL DEFAULT 'private',
            title TEXT NOT NULL DEFAULT '',
            summary TEXT NOT NULL DEFAULT '',
            summarized_count INTEGER NOT NULL DEFAULT 0,
            last_context TEXT NOT NULL DEFAULT '[]',
            last_summary_error TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            chat_id INTEGER NOT NULL REFERENCES chats(chat_id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            content TEXT NOT NULL,
            user_id INTEGER,
            user_name TEXT NOT NULL DEFAULT '',
            turn_id INTEGER NOT NULL,
            external_id INTEGER,
            created_at TEXT NOT NULL,
            UNIQUE (chat_id, seq)
        );
        CREATE INDEX messages_user ON messages(user_id);
        CREATE TABLE turns (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            chat_id INTEGER NOT NULL REFERENCES chats(chat_id) ON DELETE CASCADE,
            user_id INTEGER,
            created_at TEXT NOT NULL,
            counted_input INTEGER NOT NULL DEFAULT 0,
            actual_input INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            summary_tokens INTEGER NOT NULL DEFAULT 0,
            extraction_tokens INTEGER NOT NULL DEFAULT 0,
            embedding_tokens INTEGER NOT NULL DEFAULT 0,
            memories_used INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX turns_chat ON turns(chat_id);
        CREATE TABLE extraction_log (
            user_id INTEGER PRIMARY KEY,
            chat_id INTEGER,
            at TEXT NOT NULL,
            status TEXT NOT NULL,
            raw TEXT NOT NULL DEFAULT '',
            detail TEXT NOT NULL DEFAULT '',
            tokens INTEGER NOT NULL DEFAULT 0
        );
        """,
    )


@migration
async def m002_learner(db: aiosqlite.Connection) -> None:
    """The learner model (issue 9): profile and its history, mistakes, vocabulary, review."""
    await script(db, LEARNER_SCHEMA)


@migration
async def m003_transcription_usage(db: aiosqlite.Connection) -> None:
    """What a voice message's transcription cost: tokens, or seconds for duration-billed models."""
    await script(
        db,
        """
        ALTER TABLE turns ADD COLUMN transcription_tokens INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE turns ADD COLUMN transcription_seconds INTEGER NOT NULL DEFAULT 0
        """,
    )


@migration
async def m004_reminders(db: aiosqlite.Connection) -> None:
    """Practice reminders (memora.reminders): one per learner, with the day it last went out."""
    await script(
        db,
        """
        CREATE TABLE reminders (
            user_id INTEGER PRIMARY KEY,
            chat_id INTEGER NOT NULL,
            at TEXT NOT NULL,
            days TEXT NOT NULL,
            enabled INTEGER NOT NULL DEFAULT 1,
            updated_at TEXT NOT NULL,
            last_sent TEXT NOT NULL DEFAULT '',
            off_reason TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX reminders_enabled ON reminders(enabled)
        """,
    )


@migration
async def m005_inbox_outbox(db: aiosqlite.Connection) -> None:
    """The durable inbox and outbox (issue 7): updates kept from arrival until handled, replies
    kept until delivered; each turn records the update it answers, and whether it was delivered."""
    await script(
        db,
        """
        CREATE TABLE inbox (
            update_id INTEGER PRIMARY KEY,
            chat_id INTEGER,
            user_id INTEGER,
            payload TEXT NOT NULL,
            received_at TEXT NOT NULL,
            done_at TEXT
        );
        CREATE INDEX inbox_pending ON inbox(done_at, update_id);
        CREATE TABLE outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            chat_id INTEGER NOT NULL,
            user_id INTEGER,
            update_id INTEGER UNIQUE,
            body TEXT NOT NULL,
            created_at TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_at REAL NOT NULL DEFAULT 0,
            last_error TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed'))
        );
        CREATE INDEX outbox_pending ON outbox(state, chat_id, id);
        ALTER TABLE turns ADD COLUMN update_id INTEGER;
        ALTER TABLE turns ADD COLUMN delivered_at TEXT;
        CREATE UNIQUE INDEX turns_update ON turns(update_id) WHERE update_id IS NOT NULL;
        """,
    )


@migration
async def m006_outbox_leases(db: aiosqlite.Connection) -> None:
    """Who is sending a chat's answers right now (replicas on one store send each answer once,
    in order): one row per chat while a sender holds it, until `expires` (unix time)."""
    await script(
        db,
        """
        CREATE TABLE outbox_leases (
            chat_id INTEGER PRIMARY KEY,
            holder TEXT NOT NULL,
            expires REAL NOT NULL
        )
        """,
    )


@migration
async def m007_replicas(db: aiosqlite.Connection) -> None:
    """Replicas on one store (issue 11): each process beats in `replicas`; an inbox row names the
    replica handling it, and a gone replica's rows are taken over by a live one."""
    await script(
        db,
        """
        CREATE TABLE replicas (
            replica_id TEXT PRIMARY KEY,
            seen REAL NOT NULL,
            started_at TEXT NOT NULL
        );
        ALTER TABLE inbox ADD COLUMN owner TEXT;
        CREATE INDEX inbox_chat_pending ON inbox(chat_id, update_id) WHERE done_at IS NULL
        """,
    )


@migration
async def m008_outbox_kinds(db: aiosqlite.Connection) -> None:
    """More than answers in the outbox (issue 11): a row's `kind` says what it is and how the
    platform sends it (an answer, a reminder, a message, an edit of a sent message), and one that
    is useless late (a reminder, once its day is over) carries `expires` (unix time)."""
    await script(
        db,
        """
        ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT 'answer';
        ALTER TABLE outbox ADD COLUMN expires REAL
        """,
    )


@migration
async def m009_usage(db: aiosqlite.Connection) -> None:
    """What each learner spends (memora/usage.py): per UTC day, kind of call and model. Kept
    apart from the conversation, so `/reset` keeps it; `/forgetme` deletes it."""
    await script(
        db,
        """
        CREATE TABLE usage (
            user_id INTEGER NOT NULL,
            day TEXT NOT NULL,
            kind TEXT NOT NULL,
            model TEXT NOT NULL,
            calls INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            audio_seconds REAL NOT NULL DEFAULT 0,
            turns INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (user_id, day, kind, model)
        );
        CREATE INDEX usage_by_day ON usage(day)
        """,
    )


@migration
async def m010_weekly_reports(db: aiosqlite.Connection) -> None:
    """The weekly report (memora.reminders.weekly): who wants it and on which weekday, and each week
    (ISO year-week of the learner's local send day) claimed, so no week is sent twice."""
    await script(
        db,
        """
        CREATE TABLE weekly_reports (
            user_id INTEGER PRIMARY KEY,
            chat_id INTEGER NOT NULL,
            weekday INTEGER NOT NULL,
            enabled INTEGER NOT NULL DEFAULT 1,
            updated_at TEXT NOT NULL,
            off_reason TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX weekly_reports_enabled ON weekly_reports(enabled);
        CREATE TABLE weekly_sent (
            user_id INTEGER NOT NULL,
            week TEXT NOT NULL,
            claimed_at TEXT NOT NULL,
            PRIMARY KEY (user_id, week)
        )
        """,
    )


@migration
async def m011_chat_modes(db: aiosqlite.Connection) -> None:
    """The lesson mode a chat is in (memora/modes: placement, role-play, practice), with its
    state as JSON; one row per chat, written with the turn that moves it on."""
    await script(
        db,
        """
        CREATE TABLE chat_modes (
            chat_id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL,
            kind TEXT NOT NULL,
            step INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL,
            started_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX chat_modes_user ON chat_modes(user_id)
        """,
    )


@migration
async def m012_app_language(db: aiosqlite.Connection) -> None:
    """The language the learner's app last named (Telegram's language_code), kept so reminders
    and weekly reports, which no message prompts, speak it too (memora.learner.Learner.language)."""
    await script(db, APP_LANGUAGE_SCHEMA)


@migration
async def m013_server_keys(db: aiosqlite.Connection) -> None:
    """The deployment's own keys (storage/keys.py): the webhook secret, the provider identifier's
    key. No learner data."""
    await script(
        db,
        """
        CREATE TABLE server_keys (
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            created_at TEXT NOT NULL
        )
        """,
    )


@migration
async def m014_cached_and_reasoning_tokens(db: aiosqlite.Connection) -> None:
    """Cached input and reasoning tokens (issue 39): per turn for each kind of call (reply,
    summary, extraction), and in the usage ledger per day, kind and model, so the estimated cost
    can price cached input apart."""
    await script(
        db,
        """
        ALTER TABLE turns ADD COLUMN reply_cached INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE turns ADD COLUMN reply_reasoning INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE turns ADD COLUMN summary_cached INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE turns ADD COLUMN summary_reasoning INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE turns ADD COLUMN extraction_cached INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE turns ADD COLUMN extraction_reasoning INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE usage ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE usage ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0
        """,
    )


@migration
async def m015_erasures(db: aiosqlite.Connection) -> None:
    """What was deleted, for the turns in flight (storage/erasure.py): a row per /forgetme (the
    user, and each group they wrote in) and per forgotten memory (its id). Ids and numbers only,
    never text; rows older than a day are pruned (no turn runs that long)."""
    await script(
        db,
        """
        CREATE TABLE erasures (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id INTEGER NOT NULL,
            chat_id INTEGER,
            memory_id TEXT,
            at TEXT NOT NULL
        )
        """,
    )


@migration
async def m016_pending_asks(db: aiosqlite.Connection) -> None:
    """Questions waiting for a Yes before a deletion (storage/pending_asks.py): /forgetme, and the
    memories a learner asked in words to forget. Memory ids only, never their words."""
    await script(
        db,
        """
        CREATE TABLE pending_asks (
            token TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL,
            chat_id INTEGER NOT NULL,
            kind TEXT NOT NULL,
            memory_ids TEXT NOT NULL,
            expires_at TEXT NOT NULL
        );
        CREATE INDEX pending_asks_user ON pending_asks(user_id)
        """,
    )


@migration
async def m017_asked_once(db: aiosqlite.Connection) -> None:
    """What the tutor was told to ask a learner about once, so it is not asked again (a goal whose
    day has passed; storage/asked_once.py). Learner data: erased with the learner."""
    await script(db, ASKED_ONCE_SCHEMA)
