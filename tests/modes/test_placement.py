"""/placement (issue 30): an adaptive level test run as ordinary turns. Each question is a reply
pitched from the judged answer before it; the after-reply extraction call judges the answers and
gives the estimate, which goes to the profile with the source "placement" (undoable); a model
that answers badly (no judgement, a level outside A1–C2, broken JSON) never breaks the test.

Real SQLite and PostgreSQL; the model is a scripted fake at the LLM seam."""

from __future__ import annotations

import json
from typing import Any

from memora.engine import Engine
from memora.modes.placement import QUESTIONS, ladder_estimate
from tests.support.fakes import FakeLLM
from tests.support.lessons import (
    ALICE,
    CHAT,
    GROUP,
    NOTICES,
    answer,
    assert_exported_then_forgotten,
    command,
    listen,
    mode_block,
)


def judged(
    correct: bool | None,
    *,
    next_level: str | None = None,
    estimate: str | None = None,
    reason: str = "",
) -> dict[str, Any]:
    """The extraction call's answer for a placement turn, as a model writes it."""
    return {
        "memories": [],
        "placement": {
            "answer_correct": correct,
            "next_level": next_level,
            "estimate": estimate,
            "reason": reason,
        },
    }


async def test_a_full_test_pitches_each_question_and_writes_the_level(
    mem_engine: Engine, llm: FakeLLM
) -> None:
    engine = mem_engine
    await listen(engine)
    llm.replies.append("Question 1: Choose: She ___ to work every day. (go / goes)")
    out = await command(engine, "placement")
    assert "Question 1" in out and "/placement stop" in out
    assert "question 1 of 8" in mode_block(llm) and "at B1" in mode_block(llm)
    # Right, right, wrong, right, ... the model's judgement moves the ladder.
    for n, correct in enumerate([True, True, False, True, False, True, True], start=1):
        llm.parsed.append(judged(correct))
        await answer(engine, f"my answer {n}")
        assert f"answers question {n} " in mode_block(llm)
    status = await command(engine, "status")
    assert "question 8 of 8" in status
    llm.parsed.append(judged(True, estimate="B2", reason="Solid grammar up to B2; C1 slipped."))
    await answer(engine, "my answer 8")
    assert "the last" in mode_block(llm)
    assert await engine.lessons.mode(CHAT.id) is None
    profile = await command(engine, "profile")
    assert "B2" in profile and "placement" in profile
    assert NOTICES and "B2" in NOTICES[-1] and "Solid grammar" in NOTICES[-1]
    # Undoable like any profile change
    await command(engine, "profile", "undo")
    assert (await engine.learner.profile(ALICE.id, engine.state.now())).get("level") is None


async def test_the_ladder_follows_the_judgements(mem_engine: Engine, llm: FakeLLM) -> None:
    engine = mem_engine
    await command(engine, "placement")
    llm.parsed.append(judged(True))
    await answer(engine, "goes")
    mode = await engine.lessons.mode(CHAT.id)
    assert mode is not None and mode.state["level"] == "B2"  # right at B1: one up
    llm.parsed.append(judged(False))
    await answer(engine, "wrong")
    assert "question 2 (vocabulary, B2)" in mode_block(llm)
    assert "at C1 if the answer was right, at B1 if it was wrong" in mode_block(llm)
    mode = await engine.lessons.mode(CHAT.id)
    assert mode is not None and mode.state["level"] == "B1"  # wrong at B2: one down
    assert [a["correct"] for a in mode.state["answers"]] == [True, False]


async def test_bad_model_answers_never_break_the_test(mem_engine: Engine, llm: FakeLLM) -> None:
    engine = mem_engine
    await listen(engine)
    await command(engine, "placement")
    bad: list[object] = ["{not json", judged(None, next_level="Z9"), judged(True, next_level="b2+")]
    bad += [judged(True)] * (QUESTIONS - 4)
    for item in bad:
        llm.parsed.append(item)
        llm.parsed.append(item)  # broken JSON is asked again once
        await answer(engine, "an answer")
        llm.parsed.clear()
    llm.parsed.append(judged(False, estimate="Q7", reason=""))  # out of range: the ladder decides
    await answer(engine, "last answer")
    assert await engine.lessons.mode(CHAT.id) is None
    level = (await engine.learner.profile(ALICE.id, engine.state.now())).get("level")
    assert level is not None and level in {"B2", "C1", "C2"}
    assert "From" in NOTICES[-1]  # the reason was written by code


async def test_no_judged_answer_leaves_the_profile_alone(mem_engine: Engine, llm: FakeLLM) -> None:
    engine = mem_engine
    await listen(engine)
    await command(engine, "placement")
    for _n in range(QUESTIONS):
        llm.parsed.append(judged(None))
        await answer(engine, "?")
    assert await engine.lessons.mode(CHAT.id) is None
    assert (await engine.learner.profile(ALICE.id, engine.state.now())).get("level") is None
    assert "unchanged" in NOTICES[-1]


async def test_stop_cancel_reset_and_groups(engine: Engine, llm: FakeLLM) -> None:
    await command(engine, "placement")
    assert "question 1 of 8" in await command(engine, "context")
    assert "Stopped" in await command(engine, "placement", "stop")
    assert await engine.lessons.mode(CHAT.id) is None
    assert "none" in await command(engine, "status")
    await command(engine, "placement")
    assert "Ended" in await command(engine, "cancel")
    assert "no lesson" in await command(engine, "cancel")
    await command(engine, "placement")
    assert "Ended" in await command(engine, "reset")
    assert await engine.lessons.mode(CHAT.id) is None
    assert "private chat" in await command(engine, "placement", chat=GROUP)


async def test_forgetme_and_export(engine: Engine, llm: FakeLLM) -> None:
    await command(engine, "placement")
    await assert_exported_then_forgotten(engine, "placement")


async def test_start_offers_placement_only_without_a_level(engine: Engine, llm: FakeLLM) -> None:
    assert "/placement" in (await command(engine, "start")).split("/status")[-1]
    await command(engine, "profile", "set level B1")
    assert "New here" not in await command(engine, "start")


def test_ladder_estimate() -> None:
    assert ladder_estimate([]) is None
    assert ladder_estimate([{"level": "B1", "correct": None}]) is None
    assert ladder_estimate([{"level": "B1", "correct": False}]) == "A2"
    assert (
        ladder_estimate(
            [
                {"level": "B1", "correct": True},
                {"level": "B2", "correct": True},
                {"level": "C1", "correct": False},
            ]
        )
        == "B2"
    )


async def test_a_lesson_answer_misread_as_forget_gets_no_notice(
    mem_engine: Engine, llm: FakeLLM
) -> None:
    """SmolLM2 answered `forget: [9]` to a placement answer: nothing is deleted, and the
    learner is not told they asked to forget something."""
    engine = mem_engine
    await listen(engine)
    await command(engine, "placement")
    llm.parsed.append(json.dumps({**judged(True), "forget": [9]}))  # a bare number, as it wrote
    await answer(engine, "Two times.")
    assert NOTICES == []
    mode = await engine.lessons.mode(CHAT.id)
    assert mode is not None and mode.state["answers"][0]["correct"] is True
