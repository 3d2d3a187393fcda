"""The turn engine on a real SQLite file with a scripted LLM: window, summary, budget, rollback."""

from __future__ import annotations

import asyncio

import pytest

from memora.commands import CommandContext, run_command
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.llm import ChatMessage, LLMError
from memora.shortterm.instructions import SUMMARY_BLOCK
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database, StoredMessage
from tests.support.fakes import CutStream, FakeLLM

ALICE = UserRef(1, "Alice")
BOB = UserRef(2, "Bob")
CHAT = ChatRef(100)


async def talk(engine: Engine, n: int, chat: ChatRef = CHAT, user: UserRef = ALICE) -> None:
    for i in range(n):
        reply = await engine.handle_turn(chat, user, f"message {i}")
        assert reply.ok, reply.text
        await engine.drain()


async def kept(db: Database) -> tuple[list[StoredMessage], list[ChatMessage]]:
    """What the chat has kept: its stored messages and the context its last reply was given."""
    return await db.chats.messages(CHAT.id), (await db.chats.chat(CHAT.id)).last_context


async def test_reply_is_stored_as_one_pair(engine: Engine, db: Database) -> None:
    reply = await engine.handle_turn(CHAT, ALICE, "Hello, I want to practise English")
    assert reply.ok and reply.stored
    assert reply.text == "Echo: Hello, I want to practise English"
    msgs = await db.chats.messages(CHAT.id)
    assert [(m.role, m.content) for m in msgs] == [
        ("user", "Hello, I want to practise English"),
        ("assistant", reply.text),
    ]
    assert msgs[0].user_id == ALICE.id
    assert reply.stats is not None and reply.stats.usage.counted_input > 0


async def test_context_is_summary_plus_last_turns_plus_message(
    engine: Engine, db: Database, llm: FakeLLM
) -> None:
    await talk(engine, 5)
    await engine.handle_turn(CHAT, ALICE, "current")
    sent = llm.calls[-1].messages  # the reply call just made
    assert sent[0].role == "developer" and sent[0].content.startswith(SUMMARY_BLOCK)
    assert [m.content for m in sent[1:]] == [
        "message 2",
        "Echo: message 2",
        "message 3",
        "Echo: message 3",
        "message 4",
        "Echo: message 4",
        "current",
    ]
    row = await db.chats.chat(CHAT.id)
    assert row.last_context == sent
    await engine.drain()
    assert (await db.chats.chat(CHAT.id)).summarized_count == 6  # turns 0..2 folded
    assert len(await db.chats.messages(CHAT.id)) == 12  # full history is never truncated


async def test_summary_happens_after_the_reply_not_before(
    engine: Engine, llm: FakeLLM, db: Database
) -> None:
    await talk(engine, 3)
    assert llm.count("complete", summary=True) == 0
    calls_before = len(llm.calls)
    reply = await engine.handle_turn(CHAT, ALICE, "fourth")  # turn 0 leaves the window now
    # On the reply path: exactly one LLM call.
    assert len(llm.calls) == calls_before + 1 and reply.ok
    await engine.drain()
    assert llm.count("complete", summary=True) == 1
    summary_call = next(c for c in llm.calls if llm.is_summary(c.instructions))
    assert "message 0" in summary_call.messages[0].content
    assert (await db.chats.chat(CHAT.id)).summarized_count == 2


async def test_llm_failure_leaves_history_exactly_as_before(
    engine: Engine, llm: FakeLLM, db: Database
) -> None:
    await talk(engine, 2)
    before = await kept(db)
    llm.replies.append(LLMError("the model service answered HTTP 503"))
    reply = await engine.handle_turn(CHAT, ALICE, "this one fails")
    assert not reply.ok and not reply.stored
    assert "Nothing was saved" in reply.text and "503" in reply.text
    assert await kept(db) == before
    ok = await engine.handle_turn(CHAT, ALICE, "and this one works")
    assert ok.ok
    roles = [m.role for m in await db.chats.messages(CHAT.id)]
    assert roles == ["user", "assistant"] * 3


async def test_over_budget_turn_folds_oldest_turns_synchronously(
    db: Database, counter: LocalTokenCounter
) -> None:
    llm = FakeLLM()
    engine = Engine(
        db=db,
        llm=llm,
        counter=counter,
        config=EngineConfig(max_input_tokens=400, max_recent_turns=3),
    )
    long = "word " * 60  # ~60 tokens each way
    for i in range(3):
        assert (await engine.handle_turn(CHAT, ALICE, f"{i} {long}")).ok
        await engine.drain()
    reply = await engine.handle_turn(CHAT, ALICE, "short question")
    assert reply.ok and reply.stats is not None
    assert reply.stats.newly_summarized >= 2  # at least the oldest turn was folded first
    assert reply.stats.usage.counted_input <= 400
    assert reply.stats.usage.summary_tokens > 0
    sent = llm.calls[-1].messages
    assert sent[0].content.startswith(SUMMARY_BLOCK)
    assert await counter.count(engine.state.config.instructions, sent) <= 400
    await engine.drain()


async def test_message_that_cannot_fit_gets_clear_answer_and_nothing_stored(
    db: Database, counter: LocalTokenCounter
) -> None:
    engine = Engine(
        db=db, llm=FakeLLM(), counter=counter, config=EngineConfig(max_input_tokens=300)
    )
    reply = await engine.handle_turn(CHAT, ALICE, "a " * 600)
    assert not reply.ok
    assert "too long to fit" in reply.text and "300" in reply.text
    assert await db.chats.messages(CHAT.id) == []


async def test_over_long_and_empty_messages(engine: Engine, db: Database) -> None:
    too_long = await engine.handle_turn(CHAT, ALICE, "x" * 5000)
    assert not too_long.ok and "5000 characters" in too_long.text
    empty = await engine.handle_turn(CHAT, ALICE, "   ")
    assert not empty.ok
    assert await db.chats.messages(CHAT.id) == []


async def test_summary_keeps_numbers_the_model_dropped(
    engine: Engine, llm: FakeLLM, db: Database
) -> None:
    await engine.handle_turn(
        CHAT, ALICE, "我的英文程度是 B1，目標是三個月後考多益 850 分，考試日期 2026-03-01"
    )
    await engine.drain()
    await talk(engine, 3)
    llm.summaries.append("The learner wants to take an English exam.")  # lost every number
    await talk(engine, 1)
    summary = (await db.chats.chat(CHAT.id)).summary
    for fact in ["B1", "三個月", "850", "2026-03-01"]:
        assert fact in summary, fact


async def test_background_summary_failure_is_visible_and_retried(
    engine: Engine, llm: FakeLLM, db: Database
) -> None:
    await talk(engine, 3)
    llm.summaries.append(LLMError("the model service timed out"))
    reply = await engine.handle_turn(CHAT, ALICE, "fourth")
    assert reply.ok  # the reply is unaffected
    await engine.drain()
    row = await db.chats.chat(CHAT.id)
    assert row.summarized_count == 0 and "timed out" in row.last_summary_error
    status = await run_command(engine, "status", CommandContext(CHAT, ALICE, ""))
    assert "timed out" in status.text
    await talk(engine, 1)  # next turn retries and catches up
    row = await db.chats.chat(CHAT.id)
    assert row.summarized_count == 4 and row.last_summary_error == ""


async def test_two_chats_never_see_each_other(engine: Engine, llm: FakeLLM) -> None:
    other = ChatRef(200)
    await engine.handle_turn(CHAT, ALICE, "alice secret plan")
    await engine.handle_turn(other, BOB, "bob hello")
    sent = llm.calls[-1].messages
    assert all("alice" not in m.content for m in sent)


async def test_turns_of_one_chat_run_in_order_chats_run_concurrently(
    db: Database, counter: LocalTokenCounter
) -> None:
    llm = FakeLLM(delay=0.02)
    engine = Engine(db=db, llm=llm, counter=counter)
    chats = [ChatRef(1), ChatRef(2), ChatRef(3)]
    jobs = [engine.handle_turn(c, ALICE, f"{c.id}-{i}") for i in range(4) for c in chats]
    replies = await asyncio.gather(*jobs)
    assert all(r.ok for r in replies)
    await engine.drain()
    for c in chats:
        users = [m.content for m in await db.chats.messages(c.id) if m.role == "user"]
        assert users == [f"{c.id}-{i}" for i in range(4)]


async def test_group_messages_carry_the_speaker(engine: Engine, llm: FakeLLM) -> None:
    group = ChatRef(-500, "group", "Study group")
    await engine.handle_turn(group, ALICE, "I am Alice")
    await engine.handle_turn(group, BOB, "and I am Bob")
    sent = llm.calls[-1].messages
    assert sent[0] == ChatMessage("user", "[Alice] I am Alice")
    assert sent[-1] == ChatMessage("user", "[Bob] and I am Bob")


async def test_views(engine: Engine) -> None:
    await talk(engine, 5)
    ctx = CommandContext(CHAT, ALICE, "")
    history = await run_command(engine, "history", ctx)
    assert "message 0" in history.text and "10 messages" in history.text
    context = await run_command(engine, "context", ctx)
    assert "message 4" in context.text and "user: message 0" not in context.text
    assert "[1] system: You are Memora" in context.text  # exactly what was sent, prompt first
    summary = await run_command(engine, "summary", ctx)
    assert "covers 4 messages" in summary.text
    status = await run_command(engine, "status", ctx)
    for label in ["History messages", "Summarized messages", "Session total tokens"]:
        assert label in status.text
    unknown = await run_command(engine, "frobnicate", ctx)
    assert not unknown.ok and "/help" in unknown.text
    reset = await run_command(engine, "reset", ctx)
    assert "10 messages" in reset.text
    assert "(empty" in (await run_command(engine, "history", ctx)).text


async def test_per_chat_bookkeeping_does_not_grow(engine: Engine) -> None:
    import gc

    for i in range(20):
        await engine.handle_turn(ChatRef(1000 + i), ALICE, "hi")
    await engine.drain()
    gc.collect()
    assert len(engine.lanes.locks) == 0
    assert len(engine.lanes.after) == len(engine.lanes.extracting) == 0


async def test_a_message_that_can_never_fit_costs_no_summary_calls(
    db: Database, counter: LocalTokenCounter
) -> None:
    llm = FakeLLM()
    engine = Engine(db=db, llm=llm, counter=counter, config=EngineConfig(max_input_tokens=600))
    await talk(engine, 3)
    calls = len(llm.calls)
    reply = await engine.handle_turn(CHAT, ALICE, "word " * 700)
    assert not reply.ok and "too long to fit" in reply.text
    assert len(llm.calls) == calls  # refused before any fold


# -- streamed replies ------------------------------------------------------------------------------
class Deltas:
    """An on_delta callback that records the texts it gets (optionally failing)."""

    def __init__(self, fail: bool = False) -> None:
        self.texts: list[str] = []
        self.fail = fail

    async def __call__(self, text: str) -> None:
        self.texts.append(text)
        if self.fail:
            raise RuntimeError("the adapter broke")


async def test_a_streamed_turn_shows_progress_and_is_stored_once(
    engine: Engine, llm: FakeLLM, db: Database
) -> None:
    await talk(engine, 3)
    seen = Deltas()
    answer = "A longer answer that arrives in several pieces, word by word."
    llm.replies.append(answer)
    reply = await engine.handle_turn(CHAT, ALICE, "stream this", on_delta=seen)
    assert reply.ok and reply.stored and reply.text == answer
    assert len(seen.texts) >= 3 and seen.texts[-1] == answer
    assert all(answer.startswith(t) for t in seen.texts)
    await engine.drain()  # the summary of the turn that left the window is not streamed
    assert [c.streamed for c in llm.calls if c.kind == "complete"] == [False] * 3 + [True, False]
    msgs = await db.chats.messages(CHAT.id)
    assert [(m.role, m.content) for m in msgs[-2:]] == [
        ("user", "stream this"),
        ("assistant", answer),
    ]
    assert len(msgs) == 8


async def test_a_failure_mid_stream_stores_nothing(
    engine: Engine, llm: FakeLLM, db: Database
) -> None:
    await talk(engine, 2)
    before = await kept(db)
    seen = Deltas()
    llm.replies.append(CutStream("Half of an answer that never"))
    reply = await engine.handle_turn(CHAT, ALICE, "this one breaks", on_delta=seen)
    assert not reply.ok and not reply.stored and "Nothing was saved" in reply.text
    assert seen.texts and seen.texts[-1] == "Half of an answer that never"
    await engine.drain()
    assert await kept(db) == before


async def test_a_failing_callback_never_breaks_the_turn(engine: Engine, db: Database) -> None:
    seen = Deltas(fail=True)
    reply = await engine.handle_turn(CHAT, ALICE, "one two three four five six", on_delta=seen)
    assert reply.ok and reply.stored
    assert len(seen.texts) == 1  # not called again after it failed
    assert len(await db.chats.messages(CHAT.id)) == 2


async def test_a_reply_is_the_models_markdown_with_no_ui_text_in_it(engine: Engine) -> None:
    seen = Deltas()
    reply = await engine.handle_turn(CHAT, ALICE, "hello", on_delta=seen)
    assert seen.texts[-1] == reply.text == reply.plain == "Echo: hello"
    assert reply.markdown and reply.stored and reply.note == ""
    view = await run_command(engine, "status", CommandContext(CHAT, ALICE, ""))
    assert not view.markdown and not view.stored  # views are plain text


async def test_the_input_budget_learns_from_the_usage_the_server_reports(
    engine: Engine, counter: LocalTokenCounter, db: Database
) -> None:
    assert counter.calibration.factor == 1.0
    await engine.handle_turn(CHAT, ALICE, "I live in Taipei and I am preparing for IELTS.")
    usage = await db.turns.last_usage(CHAT.id)
    assert usage is not None and usage.actual_input > 0
    assert counter.calibration.factor == pytest.approx(
        usage.actual_input / usage.counted_input, rel=0.05
    )
