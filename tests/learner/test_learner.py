"""The learner model's core on a real SQLite file: profile with history and undo, mistakes and
their screens, vocabulary without duplicates, FSRS review state, progress figures and chart,
reminder facts, export and /forgetme — every read and write scoped to its user."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memora.commands import CommandContext, run_command
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.errors import AlreadyGraded, CardGone, NotYourCard
from memora.learner import progress, review
from memora.learner.learner_commands import review_command
from memora.learner.model import ExtractedMistake, ExtractedWord, ProfileUpdate
from memora.learner.profile import ProfileError, clean_value, known_field
from memora.learner.screen import mistake_problem, vocab_key
from memora.learner.service import Learner
from memora.llm import ChatMessage
from memora.longterm import MemoryStore
from memora.shortterm.instructions import TUTOR_INSTRUCTIONS
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fakes import FakeLLM

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ALICE, BOB = 1, 2


def mistake(original: str, corrected: str, category: str = "tense") -> ExtractedMistake:
    return ExtractedMistake.model_validate(
        {"original": original, "corrected": corrected, "category": category, "reason": "why"}
    )


def word(term: str, meaning: str = "意思", example: str = "") -> ExtractedWord:
    return ExtractedWord(term=term, meaning=meaning, example=example or f"I {term} today.")


async def goes_there_yesterday(learner: Learner, user: int = ALICE, now: datetime = NOW) -> None:
    """`user` said "I go there yesterday": one tense mistake and one word (commute, 通勤)
    logged, each with its review card."""
    await learner.apply(
        user,
        message="I go there yesterday",
        profile=[],
        mistakes=[mistake("I go there yesterday", "I went there yesterday")],
        words=[word("commute", "通勤")],
        now=now,
    )


@pytest.fixture
def learner(db: Database) -> Learner:
    return Learner(db)


# -- profile --------------------------------------------------------------------------------------
def test_values_are_validated_with_clear_reasons() -> None:
    assert clean_value("level", " b2 ") == "B2"
    assert clean_value("timezone", "asia/taipei") == "Asia/Taipei"
    assert clean_value("goal_date", "2027-01-10") == "2027-01-10"
    with pytest.raises(ProfileError, match="not a CEFR level"):
        clean_value("level", "advanced")
    with pytest.raises(ProfileError, match="not a time zone"):
        clean_value("timezone", "Mars/Olympus_Mons")
    with pytest.raises(ProfileError, match="YYYY-MM-DD"):
        clean_value("goal_date", "next spring")
    with pytest.raises(ProfileError, match="no profile field 'mood'"):
        known_field("mood")
    assert known_field("Explanation-Language") == "explanation_language"
    with pytest.raises(ProfileError, match="password"):
        clean_value("interests", "my password is hunter22")


async def test_profile_changes_keep_history_and_undo_step_by_step(learner: Learner) -> None:
    s = learner.profiles
    assert await s.set_field(ALICE, "level", "B1", source="conversation", now=NOW)
    assert not await s.set_field(ALICE, "level", "B1", source="conversation", now=NOW)
    assert await s.set_field(ALICE, "level", "B2", source="you", now=NOW + timedelta(days=1))
    assert await s.set_field(ALICE, "goal", "TOEIC 900", source="you", now=NOW)
    assert await s.set_field(ALICE, "goal", None, source="you", now=NOW)  # clear
    profile = await learner.profile(ALICE, NOW)
    assert profile.get("level") == "B2" and profile.get("goal") is None
    assert [(c.field, c.old_value, c.new_value) for c in await s.history(ALICE)] == [
        ("level", None, "B1"),
        ("level", "B1", "B2"),
        ("goal", None, "TOEIC 900"),
        ("goal", "TOEIC 900", None),
    ]
    undone = await s.undo(ALICE, NOW)
    assert undone is not None and undone.field == "goal"
    assert (await learner.profile(ALICE, NOW)).get("goal") == "TOEIC 900"
    await s.undo(ALICE, NOW)
    await s.undo(ALICE, NOW)
    profile = await learner.profile(ALICE, NOW)
    assert profile.get("goal") is None and profile.get("level") == "B1"
    assert profile.fields["level"].source == "conversation"  # restored with where it came from
    assert (await learner.profile(BOB, NOW)).empty  # Alice's profile is hers alone
    assert await s.undo(BOB, NOW) is None


async def test_apply_refuses_bad_values_from_the_model(learner: Learner) -> None:
    applied = await learner.apply(
        ALICE,
        message="I'm B2 now and I live in Taipei",
        profile=[
            ProfileUpdate(field="level", value="B2"),
            ProfileUpdate(field="timezone", value="Taipei Standard Time"),
        ],
        mistakes=[],
        words=[],
        now=NOW,
    )
    assert applied.profile == ["level: B2"]
    assert applied.rejected and "not a time zone" in applied.rejected[0][1]
    assert (await learner.profile(ALICE, NOW)).get("timezone") is None


# -- mistakes -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("message", "original", "why"),
    [
        ("我昨天去了台北，很好玩 go", "go", "the message is in Chinese"),
        ("Goed", "Goed", "a one-word reply"),
        ('My boss wrote "we has a meeting" today, is it right?', "we has a meeting", "a quote"),
        ("I go to school yesterday.", "he go to school", "not the learner's own words"),
        ("My password is hunter2 and I go there yesterday", "my password is hunter2", "secret"),
    ],
)
def test_what_is_not_a_mistake(message: str, original: str, why: str) -> None:
    problem = mistake_problem(mistake(original, original + " fixed"), message)
    assert problem is not None and why in problem


def test_a_real_mistake_passes() -> None:
    assert (
        mistake_problem(mistake("I go to school", "I went to school"), "Yesterday I go to school.")
        is None
    )


async def test_recurring_categories_become_difficulties(learner: Learner) -> None:
    msgs = ["I go there yesterday", "She go home yesterday", "We eat lunch yesterday"]
    for i, text in enumerate(msgs):
        await learner.apply(
            ALICE,
            message=text,
            profile=[],
            mistakes=[mistake(text, text + "!fixed")],
            words=[],
            now=NOW - timedelta(days=i),
        )
    await learner.apply(  # an old one does not count
        ALICE,
        message="They goes away",
        profile=[],
        mistakes=[mistake("They goes away", "They go away", "agreement")],
        words=[],
        now=NOW - timedelta(days=30),
    )
    profile = await learner.profile(ALICE, NOW)
    assert [(d.category, d.count) for d in profile.difficulties] == [("tense", 3)]
    lines = await learner.context_lines(ALICE, NOW)
    assert any("recurring difficulties" in line and "tense" in line for line in lines)
    assert (await learner.profile(BOB, NOW)).difficulties == ()
    # the same wrong sentence is logged once
    again = await learner.apply(
        ALICE,
        message=msgs[0],
        profile=[],
        mistakes=[mistake(msgs[0], msgs[0] + "!fixed")],
        words=[],
        now=NOW,
    )
    assert again.mistakes == 0


# -- vocabulary -----------------------------------------------------------------------------------
def test_vocab_key_folds_case_and_inflection() -> None:
    assert vocab_key("book a table") == vocab_key("Booked a table") == vocab_key("BOOKS a TABLE")
    assert vocab_key("ran out of") == vocab_key("run out of")
    assert vocab_key("book a table") != vocab_key("book a room")


async def test_words_have_no_duplicates_per_user(learner: Learner) -> None:
    first = await learner.apply(
        ALICE,
        message="what is book a table",
        profile=[],
        mistakes=[],
        words=[word("book a table"), word("Booked a table")],
        now=NOW,
    )
    assert first.words == 1 and first.rejected[0][1] == "repeated in the same answer"
    later = await learner.apply(
        ALICE, message="x y", profile=[], mistakes=[], words=[word("booked a table")], now=NOW
    )
    assert later.words == 0
    other = await learner.apply(
        BOB, message="x y", profile=[], mistakes=[], words=[word("book a table")], now=NOW
    )
    assert other.words == 1  # Bob's list is his own
    assert [w["term"] for w in await learner.entries.words(ALICE)] == ["book a table"]


# -- review ---------------------------------------------------------------------------------------
async def test_review_grades_with_fsrs_and_checks_the_owner(learner: Learner, db: Database) -> None:
    await goes_there_yesterday(learner)
    due = await learner.cards.due_cards(ALICE, NOW)
    assert [c.kind for c in due] == ["mistake", "word"]
    assert "I go there yesterday" in due[0].front and "went" in due[0].back
    assert await learner.cards.due_cards(BOB, NOW) == []
    with pytest.raises(NotYourCard):
        await learner.cards.grade(BOB, due[0].id, "good", NOW)
    with pytest.raises(CardGone):
        await learner.cards.grade(ALICE, 999_999, "good", NOW)
    graded = await learner.cards.grade(ALICE, due[0].id, "easy", NOW, reps=0)
    assert graded.due - NOW > timedelta(days=1)
    with pytest.raises(AlreadyGraded):  # a second tap on the same message
        await learner.cards.grade(ALICE, due[0].id, "easy", NOW, reps=0)
    again = await learner.cards.grade(ALICE, due[1].id, "again", NOW, reps=0)
    assert again.due - NOW < timedelta(minutes=5)
    assert await learner.cards.due_count(ALICE, NOW + timedelta(minutes=5)) == 1
    # the state is in the database file: a fresh connection sees it
    other = Database(db.connection.path, url=db.connection.url)
    await other.open()
    try:
        fresh = Learner(other)
        assert (await fresh.cards.card(ALICE, due[0].id)).reps == 1
        assert await fresh.cards.next_due(ALICE) == again.due.replace(microsecond=0)
    finally:
        await other.close()


async def test_after_a_grade_the_next_due_line_agrees_with_the_grades(learner: Learner) -> None:
    """After "Good — again in 10 minutes", no "your next card is due in under a minute": the
    next one is another card, and when the graded card is next, its grade said when."""
    one = [mistake("I go there yesterday", "I went there yesterday")]
    await learner.apply(
        ALICE, message="I go there yesterday", profile=[], mistakes=one, words=[], now=NOW
    )
    await learner.apply(
        ALICE,
        message="x y",
        profile=[],
        mistakes=[],
        words=[word("commute")],
        now=NOW + timedelta(seconds=30),
    )
    first = await review_command(learner, ALICE, "good", NOW, group=False)
    assert "Good — you'll see it again in 10 minutes." in first.text
    assert "Another card is due in under a minute" in first.text
    assert "Your next card" not in first.text
    await learner.apply(
        BOB, message="I go there yesterday", profile=[], mistakes=one, words=[], now=NOW
    )
    alone = await review_command(learner, BOB, "good", NOW, group=False)  # his only card
    assert "Good — you'll see it again in 10 minutes." in alone.text
    assert "Nothing else to review right now." in alone.text and "due in" not in alone.text


def test_grades_parse_words_numbers_and_prefixes() -> None:
    assert [review.parse_grade(w) for w in ("Good", "1", "e", "ha", "x", "")] == [
        "good",
        "again",
        "easy",
        "hard",
        None,
        None,
    ]


# -- progress, reminders, export, forget ----------------------------------------------------------
async def test_progress_figures_chart_and_reminder_facts(learner: Learner) -> None:
    s = learner.profiles
    await s.set_field(ALICE, "timezone", "Asia/Taipei", source="you", now=NOW)
    await s.set_field(ALICE, "goal", "TOEIC 900", source="you", now=NOW)
    await s.set_field(ALICE, "goal_date", "2027-01-10", source="you", now=NOW)
    await s.set_field(ALICE, "level", "B1", source="conversation", now=NOW - timedelta(days=20))
    await s.set_field(ALICE, "level", "B2", source="you", now=NOW)
    for days_ago in (0, 1, 2, 5):
        await learner.note_message(ALICE, NOW - timedelta(days=days_ago))
    await goes_there_yesterday(learner, now=NOW - timedelta(days=8))
    p = await learner.progress(ALICE, NOW)
    assert (p.days_studied, p.streak) == (4, 3)
    assert [lvl for _, lvl in p.level_history] == ["B1", "B2"]
    assert p.messages_per_week[-1] + p.messages_per_week[-2] == 4
    assert sum(p.mistakes_per_week["tense"]) == 1
    assert (p.vocabulary, p.cards, p.due_now) == (1, 2, 2)
    assert p.countdown == "TOEIC 900 in 41 days (2027-01-10)"
    text = progress.render(p, NOW)
    assert "streak: 3 days" in text and "B1" in text and "TOEIC 900 in 41 days" in text
    png = progress.chart(p)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    facts = await learner.reminder_facts(ALICE, NOW)
    assert (facts.timezone, facts.due_cards, facts.streak) == ("Asia/Taipei", 2, 3)
    assert facts.goal_countdown and "41 days" in facts.goal_countdown
    assert (await learner.reminder_facts(BOB, NOW)).due_cards == 0


async def test_export_and_forget_cover_every_learner_table(learner: Learner, db: Database) -> None:
    for user in (ALICE, BOB):
        await learner.profiles.set_field(user, "level", "B1", source="you", now=NOW)
        await learner.note_message(user, NOW)
        await goes_there_yesterday(learner, user)
        card = (await learner.cards.due_cards(user, NOW))[0]
        await learner.cards.grade(user, card.id, "good", NOW)
    data = await learner.export(ALICE, NOW)
    assert data["profile"]["level"]["value"] == "B1"
    assert len(data["mistakes"]) == len(data["vocabulary"]) == 1
    assert len(data["review_cards"]) == 2 and data["reviews"] and data["days"]
    await db.erasure.forget_user(ALICE)
    gone = await learner.export(ALICE, NOW)
    assert not any(gone[k] for k in gone), gone
    kept = await learner.export(BOB, NOW)
    assert kept["profile"] and kept["mistakes"] and kept["review_cards"]


def test_streak_counts_back_from_today_or_yesterday() -> None:
    today = NOW.date()
    days = [(today - timedelta(days=n)).isoformat() for n in (1, 2, 4)]
    assert progress.streak(days, today) == 2
    assert progress.streak([], today) == 0


def test_schema_lists_every_learner_table(tmp_path: Path) -> None:
    from memora.storage.learner_schema import (
        APP_LANGUAGE_SCHEMA,
        ASKED_ONCE_SCHEMA,
        LEARNER_SCHEMA,
        USER_TABLES,
    )

    schema = LEARNER_SCHEMA + APP_LANGUAGE_SCHEMA + ASKED_ONCE_SCHEMA
    created = [part.split("(")[0].split()[-1] for part in schema.split("CREATE TABLE")[1:]]
    assert sorted(created) == sorted(USER_TABLES)


# -- in the reply path ----------------------------------------------------------------------------
async def test_the_profile_is_in_the_reply_context_counted_and_framed_as_data(
    engine: Engine, llm: FakeLLM
) -> None:
    from memora.shortterm.instructions import PROFILE_BLOCK

    chat, alice, bob = ChatRef(5, "group", "study"), UserRef(ALICE, "Alice"), UserRef(BOB, "Bob")
    await engine.learner.profiles.set_field(ALICE, "level", "B1", source="you", now=NOW)
    await engine.learner.profiles.set_field(ALICE, "goal", "TOEIC 900", source="you", now=NOW)
    reply = await engine.handle_turn(chat, alice, "How do I say 訂位?")
    assert reply.ok and reply.stats is not None
    sent = llm.calls[-1].messages
    assert sent[0].role == "developer" and sent[0].content.startswith(PROFILE_BLOCK)
    # In a group only what pitches the English: the goal is Alice's own (like her memories).
    assert "- level: B1" in sent[0].content and "TOEIC 900" not in sent[0].content
    counter = LocalTokenCounter()
    assert reply.stats.usage.counted_input == await counter.count(TUTOR_INSTRUCTIONS, sent)
    assert llm.count("complete") == 1  # still one call on the reply path
    await engine.drain()
    shown = await run_command(engine, "context", CommandContext(chat, bob, ""))
    assert "learner profile of Alice, hidden" in shown.text and "TOEIC" not in shown.text
    # Bob's turn carries no one's profile
    await engine.handle_turn(chat, bob, "And 取消?")
    assert not any(m.content.startswith(PROFILE_BLOCK) for m in llm.calls[-1].messages)
    await engine.drain()
    assert (await engine.learner.reminder_facts(ALICE, datetime.now(UTC))).streak == 1
    # Her private chat carries the whole profile, and so does a group that widened the scope.
    await engine.handle_turn(ChatRef(ALICE, "private", "Alice"), alice, "How do I say 訂位?")
    assert "TOEIC 900" in llm.calls[-1].messages[0].content
    engine.state.config = replace(engine.state.config, group_memories="all")
    await engine.handle_turn(chat, alice, "And 改期?")
    assert "TOEIC 900" in llm.calls[-1].messages[0].content
    await engine.drain()


async def test_a_tight_budget_drops_the_profile_before_refusing(db: Database, llm: FakeLLM) -> None:
    from memora.shortterm.instructions import PROFILE_BLOCK

    floor = await LocalTokenCounter().count(TUTOR_INSTRUCTIONS, [ChatMessage("user", "hi " * 40)])
    eng = Engine(
        db=db, llm=llm, counter=LocalTokenCounter(), config=EngineConfig(max_input_tokens=floor)
    )
    await eng.learner.profiles.set_field(
        ALICE, "interests", "football " * 10, source="you", now=NOW
    )
    reply = await eng.handle_turn(ChatRef(9), UserRef(ALICE), "hi " * 40)
    assert reply.ok
    assert not any(m.content.startswith(PROFILE_BLOCK) for m in llm.calls[-1].messages)
    await eng.drain()


# -- the one extraction call, wider --------------------------------------------------------------
async def test_the_extraction_call_also_fills_the_learner_model(
    mem_engine: Engine, llm: FakeLLM, store: MemoryStore
) -> None:
    llm.parsed.append(
        {
            "memories": [
                {"text": "The user's English level is B1.", "category": "level", "replaces": None},
                {"text": "The user works as a nurse.", "category": "personal", "replaces": None},
            ],
            "profile": [
                {"field": "level", "value": "B1"},
                {"field": "timezone", "value": "Asia/Taipei"},
            ],
            "mistakes": [
                {
                    "original": "I work in hospital since 2019",
                    "corrected": "I have worked in a hospital since 2019",
                    "category": "tense",
                    "reason": "since + a point in time → present perfect",
                },
                {  # the learner quoted someone else: not their mistake
                    "original": "we has a meeting",
                    "corrected": "we have a meeting",
                    "category": "agreement",
                    "reason": "we → have",
                },
            ],
            "vocabulary": [
                {"term": "night shift", "meaning": "夜班", "example": "I work the night shift."},
                {"term": "my PIN is 4321", "meaning": "x", "example": "my PIN is 4321"},
            ],
        }
    )
    text = 'I am B1, I work in hospital since 2019. My boss wrote "we has a meeting". Night shift?'
    reply = await mem_engine.handle_turn(ChatRef(3), UserRef(ALICE, "Alice"), text, message_id=9)
    assert reply.ok
    await mem_engine.drain()
    assert llm.count("parse") == 1 and llm.count("complete") == 1  # no new call
    call = next(c for c in llm.calls if c.kind == "parse")
    assert call.schema == "LearnerExtractionResult" and "<profile>" in call.messages[0].content
    learner = mem_engine.learner
    profile = await learner.profile(ALICE, NOW)
    assert (profile.get("level"), profile.get("timezone")) == ("B1", "Asia/Taipei")
    assert profile.fields["level"].source == "conversation"
    # the level is in the profile, so it is not also a memory (no fact stored twice)
    assert [m.text for m in await store.memories(ALICE)] == ["The user works as a nurse."]
    mistakes = await learner.entries.mistakes(ALICE)
    assert [(m["category"], m["message_id"]) for m in mistakes] == [("tense", 9)]
    assert [w["term"] for w in await learner.entries.words(ALICE)] == ["night shift"]
    log = await mem_engine.db.turns.extraction(ALICE)
    assert log is not None and "4321" not in log.raw and "4321" not in log.detail
    assert "learner mistakes logged: 1" in log.detail
    assert "a quote of someone else" in log.detail
    # the next reply sees the new profile
    await mem_engine.handle_turn(ChatRef(3), UserRef(ALICE, "Alice"), "What should I study?")
    assert "- level: B1" in llm.calls[-1].messages[0].content
    await mem_engine.drain()


async def test_with_the_learner_model_off_the_extraction_stays_narrow(
    db: Database, llm: FakeLLM, store: MemoryStore
) -> None:
    eng = Engine(
        db=db,
        llm=llm,
        counter=LocalTokenCounter(),
        store=store,
        config=EngineConfig(learner_enabled=False),
    )
    await eng.learner.profiles.set_field(ALICE, "level", "B1", source="you", now=NOW)
    await eng.handle_turn(ChatRef(3), UserRef(ALICE), "Hello there, I like tea")
    await eng.drain()
    call = next(c for c in llm.calls if c.kind == "parse")
    assert call.schema == "ExtractionResult" and "<profile>" not in call.messages[0].content
    assert not any("level: B1" in m.content for m in llm.calls[0].messages)


async def test_forgetme_leaves_no_learner_words_on_disk(learner: Learner, db: Database) -> None:
    if db.connection.path is None:
        pytest.skip("the on-disk check is for the embedded SQLite file")
    secret_word = "Quorblesnatch"
    await learner.profiles.set_field(
        ALICE, "interests", f"{secret_word} racing", source="you", now=NOW
    )
    await learner.apply(
        ALICE,
        message=f"I goes to {secret_word} club yesterday",
        profile=[],
        mistakes=[mistake(f"I goes to {secret_word} club", f"I went to the {secret_word} club")],
        words=[word(f"{secret_word} club", "俱樂部")],
        now=NOW,
    )
    await learner.profiles.undo(ALICE, NOW)  # history rows too
    await db.erasure.forget_user(ALICE)
    files = [p for p in db.connection.path.parent.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert secret_word.encode() not in path.read_bytes(), path


async def test_the_chat_export_carries_each_participants_learner_data(engine: Engine) -> None:
    await engine.handle_turn(ChatRef(4), UserRef(ALICE, "Alice"), "Hello there")
    await engine.drain()
    await engine.learner.profiles.set_field(ALICE, "level", "B2", source="you", now=NOW)
    await goes_there_yesterday(engine.learner)
    data = await engine.export.export_chat(4)
    assert data is not None
    learner = data["participants"][str(ALICE)]["learner"]
    assert learner["profile"]["level"]["value"] == "B2"
    assert learner["mistakes"][0]["corrected"] == "I went there yesterday"
    assert [w["term"] for w in learner["vocabulary"]] == ["commute"]
    assert {c["kind"] for c in learner["review_cards"]} == {"word", "mistake"}
    assert learner["days"][0]["messages"] == 1


async def test_a_wrong_mistake_or_word_can_be_deleted_with_its_card(engine: Engine) -> None:
    from memora.commands import CommandContext, run_command

    learner = engine.learner
    await goes_there_yesterday(learner)
    card = (await learner.cards.due_cards(ALICE, NOW))[0]
    await learner.cards.grade(ALICE, card.id, "good", NOW)
    alice, bob = CommandContext(ChatRef(ALICE), UserRef(ALICE), ""), UserRef(BOB)
    listed = await run_command(engine, "mistakes", alice)
    assert "1. “I go there yesterday” → “I went there yesterday” [tense]" in listed.text
    bobs = await run_command(engine, "mistakes", CommandContext(ChatRef(BOB), bob, "delete 1"))
    assert not bobs.ok and "no number 1" in bobs.text  # Bob has none; Alice's stay
    done = await run_command(
        engine, "mistakes", CommandContext(ChatRef(ALICE), UserRef(ALICE), "delete 1")
    )
    assert done.text == "Deleted: I go there yesterday (and its review card)."
    assert await learner.entries.mistakes(ALICE) == []
    assert [c.kind for c in await learner.cards.cards(ALICE)] == ["word"]
    export = await learner.export(ALICE, NOW)
    assert export["reviews"] == []  # the deleted card's reviews went with it
    words = await run_command(engine, "words", alice)
    assert "1. commute — 通勤" in words.text
    bad = await run_command(
        engine, "words", CommandContext(ChatRef(ALICE), UserRef(ALICE), "delete x")
    )
    assert not bad.ok and "needs the number" in bad.text
