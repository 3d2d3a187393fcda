"""SQLite store: migrations, transactions, atomic turns, summary offset guard, forget/reset."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg
import pytest

from memora.llm import ChatMessage
from memora.storage import Database, Erased, ForgottenMeanwhile, NewTurn, TurnUsage
from memora.storage.migrations import MIGRATIONS, Migration, applied, migrate, script


async def table_exists(db: Database, name: str) -> bool:
    sql = (
        "SELECT to_regclass(?)::text"
        if db.connection.dialect == "postgresql"
        else "SELECT name FROM sqlite_master WHERE type='table' AND name=?"
    )
    async with db.connection.db.execute(sql, (name,)) as cur:
        row = await cur.fetchone()
    return row is not None and row[0] is not None


async def fail_assistant_inserts(db: Database) -> None:
    """A trigger that makes the second insert of every turn fail, in each engine's dialect."""
    if db.connection.dialect == "postgresql":
        await db.connection.db.execute(
            "CREATE FUNCTION boom() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'disk on fire'; END $$ LANGUAGE plpgsql"
        )
        await db.connection.db.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON messages FOR EACH ROW "
            "WHEN (NEW.role = 'assistant') EXECUTE FUNCTION boom()"
        )
        return
    await db.connection.db.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON messages WHEN NEW.role = 'assistant' "
        "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
    )


def turn(chat: int, user: int, text: str, **usage: int) -> NewTurn:
    return NewTurn(
        chat_id=chat,
        user_id=user,
        user_name=f"u{user}",
        user_text=text,
        reply_text=f"re: {text}",
        context=[ChatMessage("user", text)],
        usage=TurnUsage(**usage),
    )


async def test_migrations_run_once_and_record_the_version(tmp_path: Path) -> None:
    db = Database(tmp_path / "m.sqlite3")
    await db.open()
    assert await db.connection.schema_version() == len(MIGRATIONS)
    assert await applied(db.connection.db) == [m.name for m in MIGRATIONS]
    await db.turns.record_turn(turn(1, 1, "hello"))
    await db.close()
    again = Database(tmp_path / "m.sqlite3")
    await again.open()  # reopening must not re-run (or fail on) the migrations
    assert await again.connection.schema_version() == len(MIGRATIONS)
    assert len(await again.chats.messages(1)) == 2
    async with again.connection.db.execute("PRAGMA journal_mode") as cur:
        assert (await cur.fetchone())[0] == "wal"  # type: ignore[index]
    await again.close()


async def test_turn_usage_and_totals(db: Database) -> None:
    t1 = await db.turns.record_turn(turn(1, 1, "a", actual_input=10, output_tokens=5))
    await db.turns.record_turn(turn(1, 1, "b", actual_input=20, output_tokens=5))
    await db.turns.add_turn_usage(t1, TurnUsage(summary_tokens=7, extraction_tokens=3))
    total = await db.turns.total_usage(1)
    assert total.total == 10 + 5 + 20 + 5 + 7 + 3
    assert (await db.turns.last_usage(1)).actual_input == 20


async def test_summary_offset_never_passes_history_nor_races(db: Database) -> None:
    await db.turns.record_turn(turn(1, 1, "a"))
    assert not await db.chats.save_summary(1, "s", 4, expected_from=0)  # only 2 messages exist
    assert await db.chats.save_summary(1, "s", 2, expected_from=0)
    assert not await db.chats.save_summary(1, "stale", 2, expected_from=0)  # someone moved it
    assert (await db.chats.chat(1)).summary == "s"


async def test_forget_user_removes_their_turns_in_groups_and_their_private_chat(
    db: Database,
) -> None:
    await db.chats.ensure_chat(-9, "group")
    await db.turns.record_turn(turn(-9, 1, "alice in group"))
    await db.turns.record_turn(turn(-9, 2, "bob in group"))
    await db.turns.record_turn(turn(1, 1, "alice private"))
    counts = await db.erasure.forget_user(1)
    assert counts == {"private_messages": 2, "group_messages": 1}
    group = [m.content for m in await db.chats.messages(-9)]
    assert group == ["bob in group", "re: bob in group"]
    assert await db.chats.messages(1) == []
    assert 1 not in await db.chats.chat_ids()
    assert (
        await db.chats.chat(-9)
    ).last_context == []  # it quoted Bob's turn, last; cleared anyway


async def test_a_turn_in_flight_finds_the_deletions_made_since_it_began(db: Database) -> None:
    """The guard lives in the store, so it holds across replicas: what a turn began at (its
    mark) tells the turn's own transaction who and what was forgotten meanwhile."""
    await db.chats.ensure_chat(-9, "group")
    await db.turns.record_turn(turn(-9, 1, "alice in group"))
    mark = await db.erasure.erasure_mark()
    await db.erasure.forget_user(1)
    await db.erasure.note_memory_erased(2, "memory-of-bob")
    assert await db.erasure.erased_since(mark, 2, -9) == Erased(
        members=frozenset({1}), memories=frozenset({"memory-of-bob"})
    )
    assert not await db.erasure.erased_since(await db.erasure.erasure_mark(), 2, -9)
    # A fold begun before the deletion writes no summary: it may paraphrase the member.
    assert not await db.chats.save_summary(-9, "alice said…", 0, expected_from=0, since=mark)
    seen: list[Erased] = []

    def scrub(erased: Erased) -> list[ChatMessage]:
        seen.append(erased)
        return [ChatMessage("user", "scrubbed")]

    await db.turns.record_turn(turn(-9, 2, "bob in group"), since=mark, scrub=scrub)
    assert seen and seen[0].members == {1}
    assert [m.content for m in (await db.chats.chat(-9)).last_context] == ["scrubbed"]
    with pytest.raises(ForgottenMeanwhile):  # the speaker forgotten meanwhile: nothing stored
        await db.turns.record_turn(turn(-9, 1, "alice again"), since=mark, scrub=scrub)
    assert [m.content for m in await db.chats.messages(-9)] == ["bob in group", "re: bob in group"]


async def test_a_database_that_counted_migrations_in_user_version_is_adopted(
    tmp_path: Path,
) -> None:
    """Databases from before `_migrations` recorded how many ran in PRAGMA user_version."""
    path = tmp_path / "old.sqlite3"
    async with aiosqlite.connect(path) as old:
        await MIGRATIONS[0].apply(old)  # the schema as the old code left it
        await old.execute("PRAGMA user_version = 1")
        await old.commit()
    db = Database(path)
    await db.open()  # re-running m001 would fail: its tables exist
    assert await applied(db.connection.db) == [m.name for m in MIGRATIONS]
    await db.turns.record_turn(turn(1, 1, "still works"))
    assert [m.content for m in await db.chats.messages(1)] == ["still works", "re: still works"]
    await db.close()


async def test_a_migration_added_later_runs_once_on_an_existing_database(db: Database) -> None:
    await db.turns.record_turn(turn(1, 1, "before"))

    async def m900_add_mood(conn: aiosqlite.Connection) -> None:
        await script(conn, "ALTER TABLE chats ADD COLUMN mood TEXT NOT NULL DEFAULT 'calm'")

    later = [*MIGRATIONS, Migration("m900_add_mood", m900_add_mood)]
    assert await migrate(db.connection.db, db.connection.transaction, later) == ["m900_add_mood"]
    assert (
        await migrate(db.connection.db, db.connection.transaction, later) == []
    )  # recorded by name: not again
    async with db.connection.db.execute("SELECT mood FROM chats WHERE chat_id=1") as cur:
        assert tuple(await cur.fetchone() or ()) == ("calm",)
    assert len(await db.chats.messages(1)) == 2


async def test_a_failing_migration_leaves_nothing_behind_and_runs_again(db: Database) -> None:
    async def m900_half(conn: aiosqlite.Connection) -> None:
        await script(conn, "CREATE TABLE scratch (user_id INTEGER); CREATE TABLE nope (")

    with pytest.raises((sqlite3.OperationalError, asyncpg.PostgresSyntaxError)):
        await migrate(
            db.connection.db,
            db.connection.transaction,
            [*MIGRATIONS, Migration("m900_half", m900_half)],
        )
    assert not await table_exists(db, "scratch")  # the first statement was rolled back too
    assert "m900_half" not in await applied(db.connection.db)

    async def m900_fixed(conn: aiosqlite.Connection) -> None:
        await script(conn, "CREATE TABLE scratch (user_id INTEGER)")

    fixed = [*MIGRATIONS, Migration("m900_half", m900_fixed)]
    assert await migrate(db.connection.db, db.connection.transaction, fixed) == ["m900_half"]


def test_migration_names_are_unique_and_ordered() -> None:
    names = [m.name for m in MIGRATIONS]
    assert len(set(names)) == len(names)
    assert names == sorted(names)  # mNNN_ prefixes: the file reads in the order they apply


async def test_transaction_rolls_back_everything_on_an_exception(db: Database) -> None:
    with pytest.raises(RuntimeError):
        async with db.connection.transaction() as conn:
            await conn.execute(
                "INSERT INTO chats(chat_id, created_at, updated_at) VALUES (5, 'x', 'x')"
            )
            raise RuntimeError("half-way")
    assert 5 not in await db.chats.chat_ids()
    await db.chats.ensure_chat(6)  # the lock was released and the connection is usable
    assert await db.chats.chat_ids() == [6]


async def test_transaction_rolls_back_when_cancelled(db: Database) -> None:
    inside = asyncio.Event()

    async def slow() -> None:
        async with db.connection.transaction() as conn:
            await conn.execute(
                "INSERT INTO chats(chat_id, created_at, updated_at) VALUES (5, 'x', 'x')"
            )
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(slow())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await db.chats.chat_ids() == []
    assert not db.connection.db.in_transaction


async def test_a_cancelled_commit_that_lands_anyway_still_raises_the_cancellation(
    tmp_path: Path,
) -> None:
    """A COMMIT whose await is cancelled still runs on SQLite's thread; the ROLLBACK after it
    then finds no transaction. That error once replaced the cancellation, and the outbox
    sender, cancelled at shutdown mid-commit, took it for a failure and went on forever."""
    db = Database(tmp_path / "memora.sqlite3")
    await db.open()
    slow = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) "
        "SELECT count(*) FROM c"
    )
    committing = asyncio.Event()
    busy: list[asyncio.Task[Any]] = []

    async def write() -> None:
        async with db.connection.transaction() as conn:
            await conn.execute(
                "INSERT INTO chats(chat_id, created_at, updated_at) VALUES (5, 'x', 'x')"
            )
            # The connection's thread is busy with this when the COMMIT is queued behind it.
            busy.append(asyncio.create_task(conn.execute_fetchall(slow)))
            await asyncio.sleep(0)
            committing.set()

    try:
        task = asyncio.create_task(write())
        await committing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await busy[0]
        assert await db.chats.chat_ids() == [5]  # the COMMIT had been sent: it landed
        assert not db.connection.db.in_transaction
    finally:
        await db.close()


async def test_a_turn_that_fails_half_way_writes_nothing(db: Database) -> None:
    await db.turns.record_turn(turn(1, 1, "first"))
    await fail_assistant_inserts(db)
    with pytest.raises((sqlite3.IntegrityError, asyncpg.RaiseError)):
        await db.turns.record_turn(turn(1, 1, "second"))
    with pytest.raises((sqlite3.IntegrityError, asyncpg.RaiseError)):
        await db.turns.record_turn(turn(2, 2, "a new chat"))
    assert [m.content for m in await db.chats.messages(1)] == ["first", "re: first"]
    assert len(await db.turns.turn_rows(1)) == 1
    assert (await db.chats.chat(1)).last_context == [ChatMessage("user", "first")]
    assert await db.chats.chat_ids() == [1]  # the new chat's row went with its failed turn


async def test_concurrent_turns_in_one_chat_get_contiguous_sequence_numbers(db: Database) -> None:
    await asyncio.gather(*(db.turns.record_turn(turn(1, 1, f"m{i}")) for i in range(20)))
    messages = await db.chats.messages(1)
    assert [m.seq for m in messages] == list(range(40))
    assert all(messages[i].role == "user" for i in range(0, 40, 2))
    assert all(messages[i + 1].content == f"re: {messages[i].content}" for i in range(0, 40, 2))


async def test_new_turns_never_land_below_the_summary_offset(db: Database) -> None:
    await db.chats.ensure_chat(-9, "group")
    await db.turns.record_turn(turn(-9, 1, "alice 1"))
    await db.turns.record_turn(turn(-9, 2, "bob 1"))
    assert await db.chats.save_summary(-9, "alice and bob met", 4, expected_from=0)
    await db.erasure.forget_user(1)  # leaves seqs 2-3 only; the offset stays at 4
    await db.turns.record_turn(turn(-9, 2, "bob 2"))
    unsummarized = await db.chats.messages(-9, from_seq=(await db.chats.chat(-9)).summarized_count)
    assert [m.content for m in unsummarized] == ["bob 2", "re: bob 2"]


async def test_reset_starts_the_chat_over_and_keeps_other_chats(db: Database) -> None:
    await db.turns.record_turn(turn(1, 1, "a"))
    await db.turns.record_turn(turn(1, 1, "b"))
    await db.turns.record_turn(turn(2, 2, "other"))
    assert await db.chats.save_summary(1, "s", 2, expected_from=0)
    assert await db.chats.reset_chat(1) == 4
    row = await db.chats.chat(1)
    assert (row.summary, row.summarized_count, row.last_context) == ("", 0, [])
    assert await db.turns.total_usage(1) == TurnUsage()
    await db.turns.record_turn(turn(1, 1, "fresh"))
    assert [m.seq for m in await db.chats.messages(1)] == [0, 1]
    assert len(await db.chats.messages(2)) == 2


async def test_add_turn_usage_adds_every_field_of_the_typed_usage(db: Database) -> None:
    t = await db.turns.record_turn(turn(1, 1, "a", counted_input=9, actual_input=10))
    extra = TurnUsage(summary_tokens=1, extraction_tokens=2, embedding_tokens=3)
    await db.turns.add_turn_usage(t, extra)
    await db.turns.add_turn_usage(t, extra)
    assert await db.turns.last_usage(1) == TurnUsage(
        counted_input=9, actual_input=10, summary_tokens=2, extraction_tokens=4, embedding_tokens=6
    )


async def test_a_known_chat_is_not_written_again_each_turn(tmp_path: Path) -> None:
    """ensure_chat runs every turn: when the chat's kind and title are as stored it writes
    nothing (each write was a commit, an fsync, on the one connection every chat shares)."""
    db = Database(tmp_path / "memora.sqlite3")
    await db.open()
    try:
        await db.chats.ensure_chat(-9, "group", "Study group")
        before = db.connection.db.total_changes
        await db.chats.ensure_chat(-9, "group", "Study group")
        await db.chats.ensure_chat(-9, "group")  # no title given: the stored one stays
        assert db.connection.db.total_changes == before
        await db.chats.ensure_chat(-9, "group", "Renamed")
        await db.chats.ensure_chat(7)  # a new chat
        assert db.connection.db.total_changes == before + 2
        assert ((await db.chats.chat(-9)).kind, (await db.chats.chat(-9)).title) == (
            "group",
            "Renamed",
        )
        assert 7 in await db.chats.chat_ids()
    finally:
        await db.close()


async def test_a_server_key_is_made_once_and_shared_by_every_connection(
    db: Database, tmp_path: Path
) -> None:
    first = await db.keys.server_key("webhook_secret")
    assert len(first) >= 43 and first == await db.keys.server_key("webhook_secret")
    assert await db.keys.server_key("provider_identifier") != first
    # another replica on the same store reads the same key, and racing asks agree
    other = Database(url=db.connection.url) if db.connection.url else Database(db.connection.path)
    await other.open()
    try:
        both = await asyncio.gather(other.keys.server_key("new"), db.keys.server_key("new"))
        assert both[0] == both[1] and await other.keys.server_key("webhook_secret") == first
    finally:
        await other.close()
