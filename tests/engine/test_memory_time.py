"""Memory that knows when (issue 42): dated facts, facts that end, goals that pass, pins, and the
one clock every rule is tested by moving."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memora import clock as memora_clock
from memora.commands import CommandContext, run_command
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.engine.followups import FOLLOW_UP_BLOCK
from memora.extraction.apply import learner_date
from memora.llm import ChatMessage
from memora.longterm import MemoryStore, NewMemory
from memora.longterm.timeline import asks_about_past
from memora.shortterm.instructions import MEMORY_BLOCK
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fakes import Clock, FakeLLM

ALICE = UserRef(1, "Alice")
CHAT = ChatRef(1)
GROUP = ChatRef(-5, "group", "class")
MARCH_1 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> Iterator[Clock]:
    """The one clock, set for the engine and for everything that stamps through memora.clock."""
    moved = Clock(MARCH_1)
    memora_clock.use(moved)
    yield moved
    memora_clock.use(None)


def make_engine(db: Database, clock: Clock, store: MemoryStore, llm: FakeLLM) -> Engine:
    config = EngineConfig(max_input_tokens=4000)
    return Engine(
        db=db, llm=llm, counter=LocalTokenCounter(), store=store, config=config, clock=clock
    )


@pytest.fixture
def llm() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
async def engine(
    sqlite_db: Database, clock: Clock, store: MemoryStore, llm: FakeLLM
) -> AsyncIterator[Engine]:
    eng = make_engine(sqlite_db, clock, store, llm)
    yield eng
    await eng.drain()


def memory(text: str, category: str = "personal", **extra: object) -> dict[str, object]:
    return {"text": text, "category": category, "replaces": None, **extra}


def ctx(arg: str = "", chat: ChatRef = CHAT) -> CommandContext:
    return CommandContext(chat, ALICE, arg)


async def turn(engine: Engine, llm: FakeLLM, text: str, chat: ChatRef = CHAT) -> list[ChatMessage]:
    """One turn; what its reply call was given."""
    await engine.handle_turn(chat, ALICE, text)
    await engine.drain()
    replies = (c for c in reversed(llm.calls) if c.kind == "complete")
    return next(c.messages for c in replies if not llm.is_summary(c.instructions))


def memory_block(messages: list[ChatMessage]) -> str:
    """The memory block's lines (between its <memories> tags), or "" without one."""
    block = next((m.content for m in messages if m.content.startswith(MEMORY_BLOCK)), "")
    return block.removeprefix(MEMORY_BLOCK + "<memories>\n").removesuffix("\n</memories>")


def notes(messages: list[ChatMessage]) -> list[str]:
    return [m.content for m in messages if m.content.startswith(FOLLOW_UP_BLOCK)]


# -- the clock -----------------------------------------------------------------------------------
async def test_every_stamp_comes_from_the_one_clock(
    db: Database, clock: Clock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clock.now = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert memora_clock.utcnow() == "2031-05-06T07:08:09+00:00"
    await db.chats.ensure_chat(CHAT.id, "private", "")
    engine = Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter(), clock=clock)
    await engine.handle_turn(CHAT, ALICE, "hello")
    await engine.drain()
    assert [m.created_at[:10] for m in await db.chats.messages(CHAT.id)] == ["2031-05-06"] * 2
    # The real process: a test-only file moves it, read on every call while the variable is set.
    memora_clock.use(None)
    moved = tmp_path / "now"
    moved.write_text("2030-01-02T03:04:05+00:00")
    monkeypatch.setenv(memora_clock.TEST_CLOCK_ENV, str(moved))
    assert memora_clock.utcnow() == "2030-01-02T03:04:05+00:00"
    moved.write_text("2030-02-01T00:00:00+08:00")
    assert memora_clock.utcnow() == "2030-01-31T16:00:00+00:00"
    monkeypatch.delenv(memora_clock.TEST_CLOCK_ENV)
    assert memora_clock.now().year == datetime.now(UTC).year


# -- dated facts and facts that end --------------------------------------------------------------
async def test_a_trip_leaves_the_context_after_its_last_day_and_is_asked_about_once(
    engine: Engine, llm: FakeLLM, clock: Clock, store: MemoryStore
) -> None:
    llm.parsed.append({"memories": [memory("The user is in Tokyo for a trip", until="2026-03-10")]})
    await turn(engine, llm, "I'm in Tokyo for ten days from today!")
    [trip] = await store.memories(ALICE.id)
    assert (trip.until, trip.created_at[:10]) == ("2026-03-10", "2026-03-01")
    clock.now = datetime(2026, 3, 10, 20, tzinfo=UTC)  # its last day: still true
    sent = await turn(engine, llm, "Where should I eat in Tokyo tonight?")
    assert "Tokyo" in memory_block(sent) and notes(sent) == []
    clock.now = datetime(2026, 3, 11, 9, tzinfo=UTC)  # over
    calls = llm.count("complete", summary=False), llm.count("parse")
    sent = await turn(engine, llm, "Where should I eat in Tokyo tonight?")
    after = llm.count("complete", summary=False), llm.count("parse")
    assert after == (calls[0] + 1, calls[1] + 1)  # one reply call, one extraction: no new call
    assert "Tokyo" not in memory_block(sent)
    [note] = notes(sent)
    assert "The user is in Tokyo" in note and "2026-03-10" in note
    assert notes(await turn(engine, llm, "Let's practise.")) == []  # once
    extraction = next(c for c in reversed(llm.calls) if c.kind == "parse")
    assert "The user is in Tokyo for a trip (until 2026-03-10)" in extraction.messages[-1].content
    searched = (await run_command(engine, "search", ctx("Tokyo"))).text.splitlines()
    tokyo = next(line for line in searched if "The user is in Tokyo" in line)
    assert "✓" not in tokyo and "past" in tokyo  # listed, but no reply would use it
    listed = (await run_command(engine, "memories", ctx())).text
    assert "The user is in Tokyo" in listed and "until 2026-03-10" in listed
    assert "learned 2026-03-01" in listed and "past" in listed  # kept, as past


async def test_a_superseded_fact_stays_out_unless_the_learner_asks_about_the_past(
    engine: Engine, llm: FakeLLM, clock: Clock, store: MemoryStore
) -> None:
    llm.parsed.append({"memories": [memory("The user's English level is B1", "level")]})
    await turn(engine, llm, "My level is B1.")
    clock.now += timedelta(days=40)
    llm.parsed.append(
        {"memories": [memory("The user's English level is B2", "level", replaces="m1")]}
    )
    await turn(engine, llm, "The placement test says B2 now!")
    [level] = await store.memories(ALICE.id)
    assert level.text.endswith("B2") and level.history[-1].replaced_at.startswith("2026-04-10")
    block = memory_block(await turn(engine, llm, "Which book suits my level?"))
    assert "B2" in block and "B1" not in block
    for question in ("What was my level before?", "我以前的程度是什麼？", "我之前是什么水平"):
        block = memory_block(sent := await turn(engine, llm, question))
        assert "B2" in block, (question, sent)
        assert "(until 2026-04-10, no longer true) The user's English level is B1" in block


def test_a_question_about_the_past_is_told_by_its_words() -> None:
    for past in (
        "what was my level before?",
        "I used to live in Taipei",
        "我以前住哪",
        "原本的目標",
    ):
        assert asks_about_past(past)
    for present in ("What should I read today?", "幫我練習口說", "Which level am I?"):
        assert not asks_about_past(present)


def test_only_dates_the_model_wrote_as_dates_are_kept() -> None:
    assert [learner_date(v) for v in ("2026-03-10", "2026-03", "2026", None)] == [
        "2026-03-10",
        "2026-03",
        "2026",
        None,
    ]
    assert [learner_date(v) for v in ("next week", "2026-13", "2026-02-30", "")] == [None] * 4


# -- pins ----------------------------------------------------------------------------------------
async def test_a_pinned_memory_always_reaches_the_context_first(
    sqlite_db: Database, clock: Clock, store: MemoryStore, llm: FakeLLM
) -> None:
    engine = make_engine(sqlite_db, clock, store, llm)
    engine.state.config = EngineConfig(
        max_input_tokens=4000, memory_tokens=14
    )  # one memory's worth
    facts = (
        "The user is allergic to peanuts",
        "The user's daughter is called Mei",
        "The user works night shifts at a hospital",
        "The user plays the saxophone",
    )
    for text in facts:
        await store.writer.add(ALICE.id, NewMemory(text, "manual", chat_id=CHAT.id))
    unrelated = "Give me three airport words"
    before = memory_block(await turn(engine, llm, unrelated))
    left_out = [n for n, text in enumerate(facts, 1) if text not in before]
    assert len(left_out) == 3  # the budget holds only the best-ranked one
    first, second, third = left_out
    reply = await run_command(engine, "pin", ctx(str(first)))
    assert reply.ok and facts[first - 1] in reply.text and "only the newest" not in reply.text
    block = memory_block(await turn(engine, llm, unrelated))
    assert block == f"- {facts[first - 1]}"
    listed = (await run_command(engine, "memories", ctx())).text
    assert f"{first}. {facts[first - 1]} [other, manual; 📌" in listed
    searched = (await run_command(engine, "search", ctx(unrelated))).text
    assert f"✓ {facts[first - 1]}" in searched  # a reply uses it, whatever the message
    # pins alone over the budget: the newest first, and /pin says so
    clock.now += timedelta(minutes=1)
    crowded = await run_command(engine, "pin", ctx(str(second)))
    assert "only the newest 1 of 2" in crowded.text
    block = memory_block(await turn(engine, llm, unrelated))
    assert block == f"- {facts[second - 1]}"
    export = await engine.export.export_chat(CHAT.id)
    assert export is not None
    pinned = [m["text"] for m in export["participants"]["1"]["memories"] if m["pinned_at"]]
    assert sorted(pinned) == sorted([facts[first - 1], facts[second - 1]])
    assert (await run_command(engine, "unpin", ctx(str(second)))).ok
    assert not (await run_command(engine, "unpin", ctx(str(second)))).ok  # not pinned now
    assert not (await run_command(engine, "unpin", ctx(str(third)))).ok
    block = memory_block(await turn(engine, llm, unrelated))
    assert block == f"- {facts[first - 1]}"
    # In a group, only the pins the group may see (what was said there): none here
    group = memory_block(await turn(engine, llm, "hi @bot, airport words?", GROUP))
    assert facts[first - 1] not in group
    said_there = "The user leads the class's weekly quiz"
    await store.writer.add(ALICE.id, NewMemory(said_there, "manual", chat_id=GROUP.id))
    assert (await run_command(engine, "pin", ctx("1", GROUP))).ok  # the group's own numbering
    group = memory_block(await turn(engine, llm, "hi @bot, airport words?", GROUP))
    assert group == f"- {said_there}"
    await engine.drain()


# -- goals that pass -----------------------------------------------------------------------------
async def test_a_passed_goal_is_asked_about_once_on_the_next_private_turn(
    db: Database, clock: Clock, store: MemoryStore, llm: FakeLLM
) -> None:
    engine = make_engine(db, clock, store, llm)
    profiles = engine.learner.profiles
    for name, value in (
        ("goal", "IELTS 7"),
        ("goal_date", "2026-03-14"),
        ("timezone", "Asia/Taipei"),
    ):
        await profiles.set_field(ALICE.id, name, value, source="you", now=clock.now)
    clock.now = datetime(2026, 3, 14, 15, 0, tzinfo=UTC)  # 23:00 on the day, in Taipei
    assert notes(await turn(engine, llm, "Tomorrow I rest.")) == []
    progress = (await run_command(engine, "progress", ctx())).text
    assert "IELTS 7 today" in progress
    assert (await engine.learner.reminder_facts(ALICE.id, clock.now)).goal_countdown
    clock.now = datetime(2026, 3, 14, 16, 30, tzinfo=UTC)  # 00:30 the next day, in Taipei
    await turn(engine, llm, "hello class", GROUP)  # a group turn does not take it
    [note] = notes(await turn(engine, llm, "Good morning!"))
    assert "IELTS 7" in note and "2026-03-14" in note
    assert notes(await turn(engine, llm, "What shall we do?")) == []  # once
    progress = (await run_command(engine, "progress", ctx())).text
    assert "IELTS 7 (2026-03-14, done)" in progress and "days ago" not in progress
    facts = await engine.learner.reminder_facts(ALICE.id, clock.now)
    assert facts.goal_countdown is None  # a reminder does not push a goal that is over
    kept = await engine.learner.profile(ALICE.id, clock.now)
    assert kept.get("goal") == "IELTS 7"  # kept as done, never silently deleted
    await engine.drain()


async def test_asked_once_is_kept_per_learner_and_erased_with_them(db: Database) -> None:
    asked = db.asked_once
    assert not await asked.asked(1, "goal:2026-03-14:IELTS 7")
    await asked.note(1, "goal:2026-03-14:IELTS 7")
    await asked.note(1, "goal:2026-03-14:IELTS 7")  # twice: still one record
    assert await asked.asked(1, "goal:2026-03-14:IELTS 7")
    assert not await asked.asked(2, "goal:2026-03-14:IELTS 7")
    await db.erasure.forget_user(1)
    assert not await asked.asked(1, "goal:2026-03-14:IELTS 7")


def test_json_of_a_memory_keeps_its_dates() -> None:
    from memora.longterm.memories import Memory, from_record, to_metadata

    m = Memory("m1", 1, "in Tokyo", "extracted", "personal", "2026-03-01T09:00:00+00:00",
               "2026-03-01T09:00:00+00:00", since="2026-03-01", until="2026-03-10",
               pinned_at="2026-03-02T00:00:00+00:00")  # fmt: skip
    meta = to_metadata(m, 3)
    assert json.loads(json.dumps(meta)) == meta  # plain values only (Chroma metadata)
    assert from_record("m1", "in Tokyo", meta) == (m, 3)


def test_a_group_asking_about_the_past_gets_only_what_was_said_there() -> None:
    from memora.longterm.memories import Memory, Revision
    from memora.longterm.timeline import past_notes

    said = "2026-03-01T09:00:00+00:00"
    level = Memory("m1", 1, "The user's level is B2", "extracted", "level", said, said,
                   chat_id=GROUP.id, history=(Revision("The user's level is B1", said, "updated",
                   CHAT.id),))  # fmt: skip
    today = MARCH_1.date()
    assert "B1" in past_notes([level], today)["m1"]  # in their private chat: all of it
    assert past_notes([level], today, origin_chat=GROUP.id) == {}  # B1 was said in private
