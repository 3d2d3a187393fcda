"""SQLite store: migrations, atomic turns, summary offset guard, forget/reset."""

from __future__ import annotations

from pathlib import Path

from memora.llm import ChatMessage
from memora.storage import MIGRATIONS, Database, NewTurn, TurnUsage


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
    assert await db.schema_version() == len(MIGRATIONS)
    await db.record_turn(turn(1, 1, "hello"))
    await db.close()
    again = Database(tmp_path / "m.sqlite3")
    await again.open()  # reopening must not re-run (or fail on) the migrations
    assert await again.schema_version() == len(MIGRATIONS)
    assert len(await again.messages(1)) == 2
    async with again.db.execute("PRAGMA journal_mode") as cur:
        assert (await cur.fetchone())[0] == "wal"  # type: ignore[index]
    await again.close()


async def test_turn_usage_and_totals(db: Database) -> None:
    t1 = await db.record_turn(turn(1, 1, "a", actual_input=10, output_tokens=5))
    await db.record_turn(turn(1, 1, "b", actual_input=20, output_tokens=5))
    await db.add_turn_usage(t1, summary_tokens=7, extraction_tokens=3)
    total = await db.total_usage(1)
    assert total.total == 10 + 5 + 20 + 5 + 7 + 3
    assert (await db.last_usage(1)).actual_input == 20


async def test_summary_offset_never_passes_history_nor_races(db: Database) -> None:
    await db.record_turn(turn(1, 1, "a"))
    assert not await db.save_summary(1, "s", 4, expected_from=0)  # only 2 messages exist
    assert await db.save_summary(1, "s", 2, expected_from=0)
    assert not await db.save_summary(1, "stale", 2, expected_from=0)  # someone moved it
    assert (await db.chat(1)).summary == "s"


async def test_forget_user_removes_their_turns_in_groups_and_their_private_chat(
    db: Database,
) -> None:
    await db.ensure_chat(-9, "group")
    await db.record_turn(turn(-9, 1, "alice in group"))
    await db.record_turn(turn(-9, 2, "bob in group"))
    await db.record_turn(turn(1, 1, "alice private"))
    counts = await db.forget_user(1)
    assert counts == {"private_messages": 2, "group_messages": 1}
    group = [m.content for m in await db.messages(-9)]
    assert group == ["bob in group", "re: bob in group"]
    assert await db.messages(1) == []
    assert 1 not in await db.chat_ids()
    assert (await db.chat(-9)).last_context == []  # it quoted Bob's turn, last; cleared anyway
