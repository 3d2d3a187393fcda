"""Long-term memory through the engine: extraction after the reply, retrieval inside the budget,
the memory commands, privacy between users, and memories surviving a restart."""

from __future__ import annotations

import asyncio
import json
import math
from collections import deque
from datetime import UTC, datetime
from pathlib import Path

from memora.commands import CommandContext, run_command
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.llm import ChatMessage, LLMError, Usage
from memora.longterm import MemoryStore, NewMemory
from memora.longterm.embeddings import Embedded, Kind, LocalUSE
from memora.shortterm.instructions import MEMORY_BLOCK, SUMMARY_BLOCK, TUTOR_INSTRUCTIONS
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fakes import FakeLLM, forgetme
from tests.support.paths import DATA

ALICE = UserRef(1, "Alice")
BOB = UserRef(2, "Bob")
CHAT = ChatRef(1)


def facts(*items: tuple[str, str]) -> dict[str, object]:
    return {"memories": [{"text": t, "category": c, "replaces": None} for t, c in items]}


def ctx(user: UserRef = ALICE, arg: str = "", chat: ChatRef = CHAT) -> CommandContext:
    return CommandContext(chat, user, arg)


async def test_extraction_runs_after_the_reply_and_feeds_the_next_turn(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    from tests.support.fake_openai import extraction_answer

    llm.parsed.append(
        extraction_answer(
            ("使用者的英文程度是 B1", "level", ("English level", "程度", "B1")),
            ("目標是多益 850 分", "goal", ("TOEIC", "多益", "850", "goal", "目標")),
        )
    )
    reply = await mem_engine.handle_turn(
        CHAT, ALICE, "我的英文程度是 B1，想考多益 850 分", message_id=77
    )
    assert reply.ok
    assert llm.count("parse") == 0  # not on the reply path
    await mem_engine.drain()
    assert llm.count("parse") == 1
    assert [m.text for m in await store.memories(ALICE.id)] == [
        "使用者的英文程度是 B1",
        "目標是多益 850 分",
    ]
    first = (await store.memories(ALICE.id))[0]
    assert (first.source, first.chat_id, first.message_id) == ("extracted", CHAT.id, 77)
    extraction = await run_command(mem_engine, "extraction", ctx())
    assert "ok, memories written: 2" in extraction.text and "850" in extraction.text
    await mem_engine.handle_turn(CHAT, ALICE, "What level am I? 我的程度適合什麼練習？")
    sent = llm.calls[-1].messages
    assert sent[0].role == "developer" and sent[0].content.startswith(MEMORY_BLOCK)
    assert "B1" in sent[0].content
    await mem_engine.drain()


async def test_nothing_worth_keeping_stores_nothing_and_no_block(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    await mem_engine.handle_turn(CHAT, ALICE, "hi!")
    await mem_engine.drain()
    assert await store.count(ALICE.id) == 0
    await mem_engine.handle_turn(CHAT, ALICE, "give me three airport words")
    assert all(not m.content.startswith(MEMORY_BLOCK) for m in llm.calls[-1].messages)
    assert "nothing worth keeping" in (await run_command(mem_engine, "extraction", ctx())).text


async def test_failed_extraction_never_touches_the_reply_and_is_visible(
    mem_engine: Engine, llm: FakeLLM, db: Database
) -> None:
    llm.parsed.append(LLMError("the model service answered HTTP 500"))
    reply = await mem_engine.handle_turn(CHAT, ALICE, "I live in Taipei")
    assert reply.ok and reply.text == "Echo: I live in Taipei"
    await mem_engine.drain()
    shown = (await run_command(mem_engine, "extraction", ctx())).text
    assert "failed" in shown and "HTTP 500" in shown
    assert len(await db.chats.messages(CHAT.id)) == 2


async def test_extraction_tokens_count_in_the_session_totals(
    mem_engine: Engine, llm: FakeLLM, db: Database
) -> None:
    llm.parsed.append(facts(("The user likes football", "preference")))
    reply = await mem_engine.handle_turn(CHAT, ALICE, "I like football")
    assert reply.stats is not None
    await mem_engine.drain()
    usage = await db.turns.total_usage(CHAT.id)
    assert usage.extraction_tokens > 0
    assert usage.total > reply.stats.session_total
    status = (await run_command(mem_engine, "status", ctx())).text
    assert "Long-term memories" in status and ": 1" in status


async def test_remember_saves_directly_and_skips_extraction(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    reply = await run_command(mem_engine, "remember", ctx(arg="I am preparing for IELTS 7.0"))
    assert reply.ok and reply.note == "✅ Saved: I am preparing for IELTS 7.0"
    assert reply.text == "Echo: I am preparing for IELTS 7.0"  # it is also a normal turn
    assert reply.markdown  # the model's answer; the note is the adapter's to show
    await mem_engine.drain()
    assert llm.count("parse") == 0
    [memory] = await store.memories(ALICE.id)
    assert memory.source == "manual" and memory.chat_id == CHAT.id
    assert "manual" in (await run_command(mem_engine, "extraction", ctx())).text
    usage = await run_command(mem_engine, "remember", ctx())
    assert not usage.ok and usage.text.startswith("Usage: /remember")
    secret = await run_command(mem_engine, "remember", ctx(arg="my password is hunter22"))
    assert "never store" in secret.text
    assert await store.count(ALICE.id) == 1


async def test_memory_commands(mem_engine: Engine, store: MemoryStore) -> None:
    for text in ["I live in Taipei", "My English level is B1", "I love jazz music"]:
        await store.writer.add(ALICE.id, NewMemory(text, "manual", category="personal"))
    listed = (await run_command(mem_engine, "memories", ctx())).text
    assert "1. I live in Taipei" in listed and "3. I love jazz music" in listed
    found = (await run_command(mem_engine, "search", ctx(arg="我住在哪裡？"))).text
    assert "I live in Taipei (learned " in found.splitlines()[2]
    assert (await run_command(mem_engine, "search", ctx())).text.startswith("Usage")
    # B1 → B2 supersedes, keeps the old text, and can be undone.
    update = await store.writer.add(ALICE.id, NewMemory("My English level is B2", "manual"))
    assert update.action == "superseded"
    listed = (await run_command(mem_engine, "memories", ctx())).text
    assert "My English level is B2" in listed and "was: My English level is B1" in listed
    undone = await run_command(mem_engine, "undo", ctx(arg="2"))
    assert "Restored: My English level is B1" in undone.text
    forget = await run_command(mem_engine, "forget", ctx(arg="1"))
    assert forget.text == "Forgotten for good: memory 1."  # its words are not repeated
    assert await store.count(ALICE.id) == 2
    for bad in ["9", "abc", ""]:
        assert not (await run_command(mem_engine, "forget", ctx(arg=bad))).ok


async def test_a_long_memory_block_folds_the_oldest_turn_instead_of_overflowing(
    db: Database, store: MemoryStore
) -> None:
    llm = FakeLLM()
    counter = LocalTokenCounter()
    question = "Help me prepare for my London business trip"
    long_fact = "The user is preparing a business trip to London " + "with many meetings " * 12
    # The budget fits three turns + the question, but not the memory block on top of them.
    budget = 250 + await counter.count(TUTOR_INSTRUCTIONS, [ChatMessage("user", question)])
    engine = Engine(
        db=db,
        llm=llm,
        counter=counter,
        store=store,
        config=EngineConfig(max_input_tokens=budget, max_recent_turns=3, min_score=0.0),
    )
    llm.summaries.extend(["Learner asked airport questions."] * 3)
    for word in ["alpha", "beta", "gamma"]:
        text = f"travel question {word}: " + "how do I say this at the airport " * 3
        await engine.handle_turn(CHAT, ALICE, text)
        await engine.drain()
    assert llm.count("complete", summary=True) == 0
    await store.writer.add(ALICE.id, NewMemory(long_fact, "manual", category="goal"))
    factor_before = counter.calibration.factor
    reply = await engine.handle_turn(CHAT, ALICE, question)
    assert reply.ok and reply.stats is not None
    sent = llm.calls[-1].messages
    assert sent[0].content.startswith(MEMORY_BLOCK) and "London" in sent[0].content
    assert any(m.content.startswith(SUMMARY_BLOCK) for m in sent)  # a turn was folded
    assert reply.stats.newly_summarized >= 2
    # counted with the factor learned from the fake's usage at build time (see tokens.py)
    assert reply.stats.usage.counted_input <= budget
    assert reply.stats.usage.counted_input == math.ceil(
        counter.raw_count(engine.state.config.instructions, sent) * factor_before
    )
    await engine.drain()


async def test_one_users_memories_never_reach_another_users_context(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    group = ChatRef(-7, "group", "class")
    await store.writer.add(ALICE.id, NewMemory("Alice is allergic to peanuts", "manual"))
    toefl = NewMemory("Bob wants to pass the TOEFL", "manual", chat_id=group.id)
    await store.writer.add(BOB.id, toefl)
    await mem_engine.handle_turn(group, BOB, "Am I allergic to anything? peanuts?")
    sent = " ".join(m.content for m in llm.calls[-1].messages)
    assert "allergic to peanuts" not in sent.split("[Bob]")[0]
    memories = (await run_command(mem_engine, "memories", ctx(BOB, chat=group))).text
    assert "TOEFL" in memories and "peanuts" not in memories
    await mem_engine.drain()


async def test_forgetme_deletes_everything_about_the_caller(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore, db: Database
) -> None:
    llm.parsed.append(facts(("Alice lives in Tainan", "personal")))
    await mem_engine.handle_turn(CHAT, ALICE, "I live in Tainan")
    await mem_engine.drain()
    await store.writer.add(BOB.id, NewMemory("Bob likes tea", "manual"))
    text = await forgetme(mem_engine, CHAT, ALICE)
    assert "1 long-term memor" in text and "2 messages" in text
    assert await store.count(ALICE.id) == 0
    assert await db.chats.messages(CHAT.id) == []
    assert await db.turns.extraction(ALICE.id) is None
    assert await store.count(BOB.id) == 1


async def test_forgetting_a_learner_deletes_their_files_and_no_one_elses(tmp_path: Path) -> None:
    """The terminal keeps a learner's chart and exports in their folder under data_dir."""
    db = Database(tmp_path / "memora.sqlite3")
    await db.open()
    config = EngineConfig(files_dir=tmp_path / "files")
    engine = Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter(), config=config)
    folders = [engine.queries.learner_files(who.id) for who in (ALICE, BOB)]
    for folder in folders:
        assert folder is not None and folder.parent == tmp_path / "files"
        (folder / "exports").mkdir(parents=True)
        (folder / "progress.png").write_bytes(b"chart")
        (folder / "exports" / "memora-chat-1.json").write_text("{}")
    alices, bobs = (folder or tmp_path for folder in folders)
    counts = await engine.forget_user(ALICE.id)
    assert counts["files"] == 2 and not alices.exists()
    assert (bobs / "progress.png").read_bytes() == b"chart"
    assert (await engine.forget_user(ALICE.id))["files"] == 0  # nothing left: nothing to do
    await db.close()


async def test_memories_survive_a_restart(tmp_path: Path, embedder: LocalUSE) -> None:
    for attempt in range(2):
        db = Database(tmp_path / "memora.sqlite3")
        await db.open()
        store = await MemoryStore.create(tmp_path / "chroma", embedder)
        llm = FakeLLM()
        engine = Engine(db=db, llm=llm, counter=LocalTokenCounter(), store=store)
        if attempt == 0:
            llm.parsed.append(facts(("The user is a nurse in Kaohsiung", "personal")))
            await engine.handle_turn(CHAT, ALICE, "I'm a nurse in Kaohsiung")
        else:
            await engine.handle_turn(CHAT, ALICE, "What vocabulary do I need for my job?")
            assert "nurse" in llm.calls[-1].messages[0].content
        await engine.drain()
        await store.close()
        await db.close()


class BrokenEmbedder(LocalUSE):
    """The real model, except that storing fails (an embeddings outage)."""

    async def embed(self, texts: list[str], kind: Kind = "passage") -> Embedded:
        if kind == "passage":
            raise RuntimeError("embeddings service unavailable")
        return await super().embed(texts, kind)


async def test_a_store_failure_after_the_reply_is_logged_not_raised(
    db: Database, tmp_path: Path, llm: FakeLLM
) -> None:
    store = await MemoryStore.create(tmp_path / "broken", BrokenEmbedder())
    engine = Engine(db=db, llm=llm, counter=LocalTokenCounter(), store=store)
    llm.parsed.append(facts(("The user likes tea", "preference")))
    reply = await engine.handle_turn(CHAT, ALICE, "I like tea")
    assert reply.ok
    await engine.drain()
    shown = (await run_command(engine, "extraction", ctx())).text
    assert "failed" in shown and "embeddings service unavailable" in shown
    await store.close()


async def test_forgetme_from_a_group_reaches_the_private_chat_and_keeps_the_group_working(
    mem_engine: Engine, store: MemoryStore, db: Database, llm: FakeLLM
) -> None:
    group = ChatRef(-42, "group", "class")
    await mem_engine.handle_turn(CHAT, ALICE, "alice in private")
    for i in range(3):
        await mem_engine.handle_turn(group, ALICE, f"alice says {i}")
        await mem_engine.handle_turn(group, BOB, f"bob says {i}")
    await mem_engine.drain()
    text = await forgetme(mem_engine, group, ALICE)
    assert "2 messages of our private chat" in text and "3 of your messages" in text
    assert await db.chats.messages(CHAT.id) == []
    left = [m.content for m in await db.chats.messages(group.id) if m.role == "user"]
    assert left == ["bob says 0", "bob says 1", "bob says 2"]
    assert (await db.chats.chat(group.id)).summary == ""  # it may have quoted Alice
    # The group goes on: new turns fold correctly across the gaps Alice left.
    for i in range(4):
        assert (await mem_engine.handle_turn(group, BOB, f"bob again {i}")).ok
        await mem_engine.drain()
    row = await db.chats.chat(group.id)
    pending = await db.chats.messages(group.id, from_seq=row.summarized_count)
    assert [m.content for m in pending if m.role == "user"] == [
        "bob again 1",
        "bob again 2",
        "bob again 3",
    ]
    assert all("alice" not in m.content for c in llm.calls[-4:] for m in c.messages)


async def test_forgetme_covers_work_still_running_elsewhere(
    mem_engine: Engine, store: MemoryStore, db: Database, llm: FakeLLM
) -> None:
    group, bob_private = ChatRef(-5, "group", "class"), ChatRef(BOB.id)
    # An extraction of Bob's is still running when he asks to be forgotten.
    llm.parsed.append(facts(("Bob's English level is B1", "level")))
    assert (await mem_engine.handle_turn(group, BOB, "My level is B1")).ok
    llm.delay = 0.2  # the extraction task has not called the model yet
    await forgetme(mem_engine, bob_private, BOB)
    await mem_engine.drain()
    assert await store.count(BOB.id) == 0
    assert await db.turns.extraction(BOB.id) is None
    # A turn of Bob's waiting for the model in the group is answered but not stored.
    llm.delay = 0.3
    pending = asyncio.create_task(mem_engine.handle_turn(group, BOB, "I work at TSMC"))
    await asyncio.sleep(0.05)
    await forgetme(mem_engine, bob_private, BOB)
    reply = await pending
    assert reply.ok and not reply.stored
    await mem_engine.drain()
    assert [m for m in await db.chats.messages(group.id) if m.user_id == BOB.id] == []


async def test_turns_after_a_forgetme_are_neither_lost_nor_counted_as_summarized(
    mem_engine: Engine, db: Database, llm: FakeLLM
) -> None:
    group = ChatRef(-6, "group", "class")
    await mem_engine.handle_turn(group, ALICE, "hello all")
    for i in range(5):
        await mem_engine.handle_turn(group, BOB, f"bob turn {i}")
        await mem_engine.drain()
    await forgetme(mem_engine, group, BOB)
    await mem_engine.handle_turn(group, ALICE, "My exam date is 2026-05-10")
    await mem_engine.drain()
    await mem_engine.handle_turn(group, ALICE, "when is my exam?")
    sent = [m.content for m in llm.calls[-1].messages]
    assert "[Alice] My exam date is 2026-05-10" in sent
    row = await db.chats.chat(group.id)
    assert row.summarized_count <= (await db.chats.messages(group.id))[-1].seq + 1


async def test_context_in_a_group_hides_another_members_memories(
    mem_engine: Engine, store: MemoryStore
) -> None:
    group = ChatRef(-8, "group", "class")
    interview = NewMemory("Bob has a job interview at Google in March", "manual", chat_id=group.id)
    await store.writer.add(BOB.id, interview)
    await mem_engine.handle_turn(group, BOB, "Help me prepare for my Google interview")
    alice_view = (await run_command(mem_engine, "context", ctx(ALICE, chat=group))).text
    assert "Google in March" not in alice_view
    assert "(1 long-term memory of Bob, hidden: only they can see it)" in alice_view
    bob_view = (await run_command(mem_engine, "context", ctx(BOB, chat=group))).text
    assert "Google in March" in bob_view
    await mem_engine.drain()


async def test_export_is_refused_in_groups_and_empty_memories_are_refused(
    mem_engine: Engine,
) -> None:
    group = ChatRef(-9, "group", "class")
    await mem_engine.handle_turn(group, ALICE, "hi")
    admin = CommandContext(group, ALICE, "", is_admin=True)
    refused = await run_command(mem_engine, "export", admin)
    assert not refused.ok and refused.document is None and "private chat" in refused.text
    nothing = await run_command(mem_engine, "remember", ctx(arg="... 😀"))
    assert not nothing.ok and "nothing to remember" in nothing.text
    await mem_engine.drain()


async def test_a_repeated_item_never_blanks_the_accepted_memory_in_extraction(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    """Only secrets are masked: a duplicate rejection shows, and so does the memory it repeats."""
    llm.parsed.append(
        facts(
            ("The user is a nurse", "personal"),
            ("The user is a nurse", "personal"),
            ("My password is hunter22-Secret!", "other"),
        )
    )
    await mem_engine.handle_turn(CHAT, ALICE, "I am a nurse. My password is hunter22-Secret!")
    await mem_engine.drain()
    assert [m.text for m in await store.memories(ALICE.id)] == ["The user is a nurse"]
    shown = (await run_command(mem_engine, "extraction", ctx())).text
    raw = shown.split("Raw output:\n")[1].split("\n\nResult:")[0]
    assert raw.count("The user is a nurse") == 2 and "hunter22" not in shown
    assert "rejected (repeated in the same answer): The user is a nurse" in shown
    assert "rejected (looks like a secret): [redacted]" in shown


async def test_a_memory_budget_sends_every_memory_that_fits_and_ranks_past_it(
    db: Database, llm: FakeLLM, store: MemoryStore
) -> None:
    """An inference hop: "plan my weekend" never mentions the daughter, the budget sends it."""
    for text in ("The user has a 6-year-old daughter.", "The user's level is B1.",
                 "The user lives in Taichung."):  # fmt: skip
        await store.writer.add(ALICE.id, NewMemory(text, "manual"))
    # the default budget (DEFAULT_MEMORY_TOKENS) holds all three
    roomy = Engine(db=db, llm=llm, counter=LocalTokenCounter(), store=store,
                   config=EngineConfig())  # fmt: skip
    await roomy.handle_turn(CHAT, ALICE, "Can you help me plan my weekend in English?")
    block = llm.calls[-1].messages[0].content
    assert block.startswith(MEMORY_BLOCK)
    assert all(w in block for w in ("daughter", "B1", "Taichung"))
    await roomy.drain()

    # no budget: top_k and min_score, and the message never mentions the daughter
    ranked = Engine(db=db, llm=llm, counter=LocalTokenCounter(), store=store,
                    config=EngineConfig(memory_tokens=0))  # fmt: skip
    await ranked.handle_turn(ChatRef(3), ALICE, "Can you help me plan my weekend in English?")
    assert "daughter" not in llm.calls[-1].messages[0].content
    await ranked.drain()

    tight = Engine(db=db, llm=llm, counter=LocalTokenCounter(), store=store,
                   config=EngineConfig(memory_tokens=12))  # fmt: skip
    await tight.handle_turn(ChatRef(2), ALICE, "What is my English level again? B1?")
    block = llm.calls[-1].messages[0].content
    assert "B1" in block and "daughter" not in block and "Taichung" not in block
    await tight.drain()


async def test_past_the_memory_budget_the_best_ranked_fill_it(
    db: Database, llm: FakeLLM, store: MemoryStore
) -> None:
    """A learner whose memories do not all fit the budget: the best-ranked fill it whatever
    their score (an inference hop's memory often ranks below min_score), the rest stay out;
    /search marks what a reply sends."""
    from memora.engine import MAX_BUDGETED_MEMORIES

    texts = ("The user has a 6-year-old daughter.", "The user's level is B1.",
             "The user lives in Taichung.", "喜歡看棒球，支持統一獅", "在高雄的銀行上班",
             "The user is vegetarian.", "The user plays the guitar in a band.",
             "The user is preparing for the TOEIC exam.")  # fmt: skip
    for text in texts:
        await store.writer.add(ALICE.id, NewMemory(text, "manual"))
    engine = Engine(db=db, llm=llm, counter=LocalTokenCounter(), store=store,
                    config=EngineConfig(memory_tokens=40))  # fmt: skip
    message = "Can you help me plan my weekend in English?"
    hits = (
        await engine.queries.search_memories(ALICE.id, message, top_k=MAX_BUDGETED_MEMORIES)
    ).hits
    assert len(hits) == len(texts)
    sent = engine.retrieval.used_in_reply(hits)
    assert 1 < len(sent) < len(texts) and sent == hits[: len(sent)]  # the best, as many as fit
    assert min(h.score for h in sent) < engine.retrieval.policy.min_score  # a cut would drop them
    await engine.handle_turn(CHAT, ALICE, message)
    block = str(llm.calls[-1].messages[0].content)
    assert block.startswith(MEMORY_BLOCK)
    assert [h.memory.text in block for h in hits] == [h in sent for h in hits]
    shown = (await run_command(engine, "search", ctx(arg=message))).text
    assert "else the best-ranked until they are spent" in shown
    assert sum("✓" in line for line in shown.splitlines()[2:]) == len(sent)
    await engine.drain()


async def test_without_a_budget_the_best_top_k_above_min_score_are_sent(
    db: Database, llm: FakeLLM, store: MemoryStore
) -> None:
    """memory_tokens 0: the first top_k at or above min_score, as /search says and marks."""
    await store.writer.add(ALICE.id, NewMemory("喜歡看棒球，支持統一獅", "manual"))
    await store.writer.add(ALICE.id, NewMemory("在高雄的銀行上班", "manual"))
    engine = Engine(db=db, llm=llm, counter=LocalTokenCounter(), store=store,
                    config=EngineConfig(memory_tokens=0))  # fmt: skip
    await engine.handle_turn(CHAT, ALICE, "我支持的球隊昨天贏了棒球比賽，我想用英文跟朋友分享")
    assert "統一獅" in str(llm.calls[-1].messages[0].content)
    shown = (await run_command(engine, "search", ctx(arg="我喜歡的棒球隊"))).text
    min_score = engine.retrieval.policy.min_score
    assert f"the best {engine.state.config.top_k} at or above min_score {min_score:.2f}" in shown
    assert "✓" in shown.split("\n", 2)[2]
    await engine.drain()


async def test_an_imported_exchange_is_stored_and_extracted_at_its_own_date(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    """import_exchange (the LoCoMo harness's ingestion): no reply call, the turn kept, the
    engine's own extraction run at once, dated when the exchange was said."""
    llm.parsed.append(facts(("The user adopted a cat in May 2023.", "personal")))
    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    await mem_engine.import_exchange(CHAT, ALICE, "I adopted a cat last week!", "Lovely!", at=said)
    assert llm.count("complete") == 0 and llm.count("parse") == 1
    assert "Message date: 2023-05-08" in llm.calls[0].messages[0].content
    assert [(m.role, m.content) for m in await mem_engine.queries.history(CHAT.id)] == [
        ("user", "I adopted a cat last week!"),
        ("assistant", "Lovely!"),
    ]
    assert [m.text for m in await store.memories(ALICE.id)] == [
        "The user adopted a cat in May 2023."
    ]
    assert await store.memories(BOB.id) == []


async def test_search_terms_are_exported_but_not_listed(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    """/memories shows what the learner said, not the index; /export carries everything."""
    from tests.support.fake_openai import extraction_answer

    terms = ("family", "mother", "家人", "媽媽")
    llm.parsed.append(extraction_answer(("媽媽是英文老師", "personal", terms)))
    await mem_engine.handle_turn(CHAT, ALICE, "我媽媽是英文老師")
    await mem_engine.drain()
    listed = (await run_command(mem_engine, "memories", ctx())).text
    assert "1. 媽媽是英文老師" in listed and "family" not in listed
    data = await mem_engine.export.export_chat(CHAT.id)
    assert data is not None
    (exported,) = data["participants"][str(ALICE.id)]["memories"]
    assert exported["text"] == "媽媽是英文老師" and exported["terms"] == list(terms)
    # the terms find the memory for an English message that shares no word with its text
    await mem_engine.handle_turn(CHAT, ALICE, "What does my mother do?")
    assert "媽媽是英文老師" in llm.calls[-1].messages[0].content


async def test_a_follow_up_uses_the_learners_previous_message(
    db: Database, llm: FakeLLM, store: MemoryStore
) -> None:
    """'那如果他們要去火車站呢' names no topic: the learner's previous message brings it."""
    for text in ("Drives a taxi in Kaohsiung and often has foreign passengers",
                 "Is allergic to peanuts"):  # fmt: skip
        await store.writer.add(ALICE.id, NewMemory(text, "manual"))
    follow_up = "那如果他們要去火車站呢"
    for chat, use_last_turn in ((ChatRef(5), True), (ChatRef(6), False)):
        config = EngineConfig(memory_tokens=0, use_last_turn=use_last_turn)
        engine = Engine(db=db, llm=llm, counter=LocalTokenCounter(), store=store, config=config)
        await engine.handle_turn(chat, ALICE, "passenger ask me go airport, how say")
        await engine.handle_turn(chat, ALICE, follow_up)
        reply_call = next(c for c in reversed(llm.calls) if c.messages[-1].content == follow_up)
        context = "\n".join(str(m.content) for m in reply_call.messages[:-1])
        assert ("Drives a taxi" in context) is use_last_turn
        assert "peanuts" not in context
        await engine.drain()


def test_the_previous_message_is_the_learners_own() -> None:
    from memora.engine import previous_message
    from memora.storage import StoredMessage

    def msg(seq: int, role: str, content: str, user_id: int | None) -> StoredMessage:
        return StoredMessage(seq, role, content, user_id, "", "2026-12-01T00:00:00+00:00")

    pending = [
        msg(1, "user", "Alice's question", ALICE.id),
        msg(2, "assistant", "the reply", None),
        msg(3, "user", "Bob's question", BOB.id),
        msg(4, "assistant", "another reply", None),
    ]
    assert previous_message(pending, ALICE.id) == "Alice's question"
    assert previous_message(pending, BOB.id) == "Bob's question"
    assert previous_message(pending, 99) is None
    assert previous_message([], ALICE.id) is None


HEAVY_LEARNER = json.loads(
    (DATA / "heavy_learner_memories.json").read_text("utf-8")
)


class O200kLLM(FakeLLM):
    """Reports the usage an OpenAI model reports (o200k), so the budget's calibration stays 1."""

    @staticmethod
    def _usage(instructions: str, messages: list[ChatMessage], out: str) -> Usage:
        raw = LocalTokenCounter()
        return Usage(raw.raw_count(instructions, messages), raw.text_tokens(out))


async def _pre_reply_folds(db: Database, store: MemoryStore, config: EngineConfig) -> int:
    """Summary calls made before the reply, over 6 turns of ~150-token tutor replies, for a
    learner whose memories fill the memory budget."""
    from memora.shortterm.tokens import o200k

    enc = o200k()
    text = " ".join(["Use 'for' with a length of time, 'since' with a start. 你可以先造句。"] * 20)
    reply = str(enc.decode(enc.encode(text)[:150]))
    llm = O200kLLM(replies=deque([reply] * 6))
    engine = Engine(db=db, llm=llm, counter=LocalTokenCounter(), store=store, config=config)
    folds = 0
    for n in range(6):
        start = len(llm.calls)
        await engine.handle_turn(CHAT, ALICE, f"Can you check my sentence number {n} for me?")
        calls = llm.calls[start:]
        reply_at = next(i for i, c in enumerate(calls) if c.kind == "complete"
                        and not llm.is_summary(c.instructions))  # fmt: skip
        folds += sum(c.kind == "complete" for c in calls[:reply_at])
        block = next(
            m.content for m in calls[reply_at].messages if m.content.startswith(MEMORY_BLOCK)
        )
        assert len(enc.encode(block)) > config.memory_tokens * 0.8  # the budget is nearly full
        await engine.drain()
    return folds


async def test_a_full_memory_block_leaves_the_recent_turns_their_room(
    db: Database, store: MemoryStore
) -> None:
    """The default input budget holds the memory budget beside the seeds' 1000 for the
    conversation: a learner with more memories than fit (the first development heavy learner's
    120) and replies of ~150 tokens gets no fold before the reply (an extra LLM call on the
    reply path); within the seeds' 1000 alone the same turns fold before the reply."""
    from memora.longterm.memories import NewMemory

    await store.writer.add_many(ALICE.id, [NewMemory(text) for text in HEAVY_LEARNER["memories"]])
    assert await store.count(ALICE.id) > 100
    assert await _pre_reply_folds(db, store, EngineConfig()) == 0
    await db.chats.reset_chat(CHAT.id)
    assert await _pre_reply_folds(db, store, EngineConfig(max_input_tokens=1000)) >= 3
