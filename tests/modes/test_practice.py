"""/practice (issue 30): exercises built by code from the learner's own mistakes and words,
answered as ordinary turns; the extraction call's grade (or a code grade when it does not read)
goes to the item's FSRS card exactly as /review grading would.

Real SQLite and PostgreSQL; the model is a scripted fake at the LLM seam."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memora.commands import CommandContext, run_command
from memora.engine import ChatRef, Engine, UserRef
from memora.learner import review
from memora.learner.model import ExtractedMistake, ExtractedWord
from memora.modes.practice import code_grade
from memora.views import Reply
from tests.support.fakes import FakeLLM
from tests.support.lessons import assert_exported_then_forgotten

ALICE = UserRef(1, "Alice")
CHAT = ChatRef(1)
GROUP = ChatRef(-100, "group", "Study group")
NOTICES: list[str] = []
WHO = ("She", "He", "It")


async def command(engine: Engine, name: str, arg: str = "", chat: ChatRef = CHAT) -> str:
    reply = await run_command(engine, name, CommandContext(chat, ALICE, arg))
    await engine.drain()
    return reply.plain


async def listen(engine: Engine) -> None:
    NOTICES.clear()

    async def notify(_chat: ChatRef, _user: UserRef, notice: Reply) -> None:
        NOTICES.append(notice.text)

    engine.state.notify = notify


async def seed(engine: Engine, mistakes: int = 3, words: int = 3) -> None:
    await engine.learner.apply(
        ALICE.id,
        message=" ".join(f"{w} go to school." for w in WHO[:mistakes]),
        profile=[],
        mistakes=[
            ExtractedMistake(
                original=f"{who} go to school.",
                corrected=f"{who} goes to school.",
                category="agreement",
                reason="third person -s",
            )
            for who in WHO[:mistakes]
        ],
        words=[
            ExtractedWord(term=t, meaning=m, example=e)
            for t, m, e in [
                ("reluctant", "不情願的", "He was reluctant to leave."),
                ("thrive", "茁壯", "Plants thrive in sun."),
                ("gloomy", "陰暗的", "A gloomy day."),
            ][:words]
        ],
        now=engine.state.now() - timedelta(days=2),
    )


def graded(grade: str | None) -> dict[str, Any]:
    return {"memories": [], "grade": grade}


async def test_nothing_logged_offers_other_lessons(engine: Engine, llm: FakeLLM) -> None:
    out = await command(engine, "practice")
    assert "/placement" in out and "/roleplay" in out
    assert await engine.lessons.mode(CHAT.id) is None
    assert llm.calls == []


async def test_five_items_due_first_and_each_answer_adds_the_next(
    mem_engine: Engine, llm: FakeLLM
) -> None:
    engine = mem_engine
    await listen(engine)
    await seed(engine)
    out = await command(engine, "practice")
    assert "Exercise 1 of 5" in out and "/practice stop" in out and not llm.calls
    mode = await engine.lessons.mode(CHAT.id)
    assert mode is not None and mode.kind == "practice"
    items = mode.state["items"]
    assert len(items) == 5 and len({i["card"] for i in items}) == 5
    assert "Practice: exercise 1 of 5" in await command(engine, "status")
    before = {c.id: c for c in await engine.learner.cards.cards(ALICE.id)}
    for n in range(5):
        llm.replies.append(f"Feedback {n + 1}")
        llm.parsed.append(graded("good"))
        reply = await engine.handle_turn(CHAT, ALICE, f"answer {n + 1}")
        await engine.drain()
        if n < 4:
            assert f"Exercise {n + 2} of 5" in reply.plain
    after = {c.id: c for c in await engine.learner.cards.cards(ALICE.id)}
    for item in items:
        assert after[item["card"]].reps == before[item["card"]].reps + 1
        assert after[item["card"]].due > engine.state.now()
    assert await engine.lessons.mode(CHAT.id) is None
    assert NOTICES and "5 of 5" in NOTICES[-1]


async def test_a_bad_grade_falls_back_to_the_code_grade(mem_engine: Engine, llm: FakeLLM) -> None:
    engine = mem_engine
    await seed(engine, mistakes=1, words=0)
    await command(engine, "practice")
    mode = await engine.lessons.mode(CHAT.id)
    assert mode is not None and mode.state["items"][0]["type"] == "rewrite"
    llm.replies.append("Right!")
    llm.parsed.append(graded("excellent"))
    await engine.handle_turn(CHAT, ALICE, "She goes to school.")
    await engine.drain()
    card = (await engine.learner.cards.cards(ALICE.id))[0]
    assert card.reps == 1
    assert code_grade({"type": "rewrite", "expected": "She goes."}, "she goes") == "good"
    assert code_grade({"type": "rewrite", "expected": "She goes."}, "xyz") == "again"
    assert code_grade({"type": "gap", "expected": "thrive"}, "Plants thrive in sun.") == "good"
    assert code_grade({"type": "sentence", "expected": "thrive"}, "Kids thrived.") == "good"


async def test_stop_cancel_reset_groups_export_forgetme(engine: Engine, llm: FakeLLM) -> None:
    await seed(engine)
    await command(engine, "practice")
    stopped = await command(engine, "practice", "stop")  # graded answers are on their cards
    assert "Stopped" in stopped and "kept on their review cards" in stopped
    assert "Nothing from it was written" not in stopped
    assert await engine.lessons.mode(CHAT.id) is None
    await command(engine, "practice")
    assert "Ended" in await command(engine, "cancel")
    await command(engine, "practice")
    assert "Ended" in await command(engine, "reset")
    assert await engine.lessons.mode(CHAT.id) is None
    assert "private chat" in await command(engine, "practice", chat=GROUP)
    llm.replies.append("Hello!")
    hello = await engine.handle_turn(CHAT, ALICE, "Hi!")  # the learner's items come from turns
    assert hello.stored
    await command(engine, "practice")
    await assert_exported_then_forgotten(engine, "practice")


async def test_due_cards_come_first(engine: Engine, llm: FakeLLM) -> None:
    await seed(engine)  # six cards, all due
    cards = await engine.learner.cards.cards(ALICE.id)
    await engine.learner.cards.grade(ALICE.id, cards[0].id, "easy", engine.state.now())
    await command(engine, "practice")
    mode = await engine.lessons.mode(CHAT.id)
    assert mode is not None
    picked = [i["card"] for i in mode.state["items"]]
    assert len(picked) == 5 and cards[0].id not in picked


async def test_grades_move_the_card_as_review_would(mem_engine: Engine, llm: FakeLLM) -> None:
    engine = mem_engine
    await seed(engine, mistakes=2, words=0)
    await command(engine, "practice")
    mode = await engine.lessons.mode(CHAT.id)
    assert mode is not None
    first, second = (i["card"] for i in mode.state["items"])
    for card_id, grade, parsed, answer in [
        (first, "hard", graded("hard"), "whatever"),  # the model's grade is used
        (second, "again", {"memories": []}, "no idea"),  # none given: the code grade
    ]:
        card = await engine.learner.cards.card(ALICE.id, card_id)
        expected = review.review(card.state, grade, engine.state.now())
        llm.replies.append("Feedback")
        llm.parsed.append(parsed)
        await engine.handle_turn(CHAT, ALICE, answer)
        await engine.drain()
        after = await engine.learner.cards.card(ALICE.id, card_id)
        assert after.reps == card.reps + 1
        assert abs((after.due - expected.due).total_seconds()) < 2  # stored to the second
    assert await engine.lessons.mode(CHAT.id) is None
