"""Lessons end to end: the real `memora run` process against the fake Bot API and the fake
model playing the tutor (tests/support/fake_tutor.py). A learner takes /placement in a private chat
— one reply call per message, a kill -9 mid-test resumes at the same question — and /profile shows
the level the test found. Another practises their own logged slip and word with /practice, across
a kill -9, and the grades reach the items' review cards."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memora.modes.placement import QUESTIONS
from memora.shortterm.instructions import MODE_BLOCK
from tests.support.bot import WAIT, BotProcess, ask, bot_over_fakes
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.fake_tutor import ESTIMATE, SLIPS, tutor_responder
from tests.support.terminal import chat, memora_env

pytestmark = pytest.mark.slow

LEARNER: dict[str, Any] = {"user_id": 3001, "first_name": "Mei"}


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[BotProcess]:
    with bot_over_fakes(tmp_path) as (_tg, llm, process):
        llm.responder = tutor_responder
        process.env["MEMORA_MEMORY__MAX_RECENT_TURNS"] = "10"
        process.start()
        yield process
        if process.proc is not None:
            assert process.stop() == 0, process.output()
        assert "Traceback" not in process.output(), process.output()


def answer_with(tg: FakeTelegram, text: str, needle: str) -> str:
    """Send `text` as the learner; the bot's first later message containing `needle` (a reply
    re-sent after a kill -9 may come first: delivery is at least once)."""
    update = tg.user_sends(text, **LEARNER)

    def found() -> str | None:
        later = tg.wait_messages(count=1, after=update, timeout=WAIT)
        return next((str(m.get("text")) for m in later if needle in str(m.get("text"))), None)

    return tg.wait_for(found, WAIT, f"a message with {needle!r}")


def kill9(bot: BotProcess) -> None:
    assert bot.proc is not None
    bot.proc.send_signal(signal.SIGKILL)
    bot.proc.wait(timeout=10)
    bot.proc = None


def mode_block_of(llm: FakeOpenAI, text: str) -> str:
    found = [r for r in llm.requests_of("reply") if r.last_user_message.endswith(text)]
    assert len(found) == 1, f"{len(found)} reply calls for {text!r}"
    blocks = [m["content"] for m in found[0].messages if m["content"].startswith(MODE_BLOCK)]
    assert len(blocks) == 1, found[0].messages
    return blocks[0]


def wait_extractions(bot: BotProcess, count: int) -> None:
    bot.tg.wait_for(
        lambda: len(bot.llm.requests_of("structured")) >= count, WAIT, "the extraction call"
    )


def test_placement_runs_to_a_level_and_resumes_after_kill_9(bot: BotProcess) -> None:
    tg, llm = bot.tg, bot.llm
    first = ask(tg, "/placement", **LEARNER)
    assert first.startswith("📝 Placement test") and "Question 1: (grammar, B1)" in first
    for n in range(1, QUESTIONS):
        answer = f"my answer {n} is right"
        reply = answer_with(tg, answer, f"Question {n + 1}:")
        assert reply.startswith("Correct."), reply
        assert f"answers question {n} " in mode_block_of(llm, answer)
        if n == 2:  # question 3 was asked: kill -9 once its turn's extraction has been asked
            wait_extractions(bot, len(llm.requests_of("reply")) - 1)
            kill9(bot)
            bot.start()
            status = answer_with(tg, "/status", "Placement test: question 3 of 8")
            assert "Question" not in status, status  # a command, not a turn
    last = "my last answer is right"
    update = tg.user_sends(last, **LEARNER)
    messages = tg.wait_messages(count=2, after=update, timeout=WAIT)
    texts = [str(m.get("text", "")) for m in messages]
    assert f"Your estimated level is {ESTIMATE}" in texts[0], texts
    assert "Placement result" in texts[1] and ESTIMATE in texts[1], texts
    assert "Ask no more questions" in mode_block_of(llm, last)
    assert len(llm.requests_of("reply")) == 1 + QUESTIONS  # one call per message, none redone
    profile = ask(tg, "/profile", **LEARNER)
    assert f"• level: {ESTIMATE}  (placement, " in profile, profile


def test_placement_in_the_terminal_chat(tmp_path: Path) -> None:
    with FakeOpenAI() as llm:
        llm.responder = tutor_responder
        env = memora_env(llm, tmp_path, MEMORA_MEMORY__MAX_RECENT_TURNS="10")
        answers = [f"answer {n} is right" for n in range(1, QUESTIONS + 1)]
        out = chat(env, ["/placement", answers[0], "/status", *answers[1:], "/profile"])
        assert len(llm.requests_of("reply")) == 1 + QUESTIONS  # one reply call per message
    assert "Question 1: (grammar, B1)" in out and "Question 8:" in out, out
    assert "Placement test: question 2 of 8" in out, out
    assert f"Your estimated level is {ESTIMATE}" in out and "Placement result" in out, out
    assert f"• level: {ESTIMATE}  (placement, " in out.split("Placement result")[-1], out


def exercise_answer(prompt: str) -> str:
    """A right answer to an exercise the fake tutor's items give (its slip, its word)."""
    for wrong, (fixed, _kind, _why) in SLIPS.items():
        if wrong in prompt:
            return f"{fixed}."
    assert "itinerary" in prompt or "____" in prompt, prompt
    return "itinerary" if "____" in prompt else "My itinerary for the trip is ready."


def test_practice_from_logged_items_survives_kill_9_and_grades_the_cards(bot: BotProcess) -> None:
    tg, llm = bot.tg, bot.llm
    nothing = ask(tg, "/practice", **LEARNER)
    assert "nothing to practise yet" in nothing and "/placement" in nothing, nothing
    ask(tg, "Yesterday I goed to the park with my sister.", **LEARNER)
    ask(tg, "What does 'itinerary' mean?", **LEARNER)
    wait_extractions(bot, 2)
    assert "“I goed to the park” → “I went to the park”" in answer_with(tg, "/mistakes", "goed")
    assert "itinerary" in ask(tg, "/words", **LEARNER)
    calls = len(llm.requests_of("reply"))

    started = ask(tg, "/practice", **LEARNER)
    assert started.startswith("🏋️ Practice: 2 short exercises"), started
    assert len(llm.requests_of("reply")) == calls  # the first exercise is written by code
    first = started.split("Exercise 1 of 2: ", 1)[1]
    reply = answer_with(tg, exercise_answer(first), "Exercise 2 of 2: ")
    assert reply.startswith("Well done!"), reply
    wait_extractions(bot, 3)
    # The grade of exercise 1 is stored (/extraction waits for the after-reply work; the request
    # having reached the model is not enough: a kill -9 before the answer is settled loses it)
    answer_with(tg, "/extraction", "exercise 1 graded")
    kill9(bot)  # before exercise 2
    bot.start()
    assert "Practice: exercise 2 of 2" in answer_with(tg, "/status", "Lesson mode")
    second = reply.split("Exercise 2 of 2: ", 1)[1]
    update = tg.user_sends(exercise_answer(second), **LEARNER)
    messages = tg.wait_messages(count=2, after=update, timeout=WAIT)
    texts = [str(m.get("text", "")) for m in messages]
    assert texts[0].startswith("Well done!") and "That was the last one." in texts[0], texts
    assert texts[1].startswith("✅ Practice done: 2 of 2 right. Next reviews: 20"), texts
    assert len(llm.requests_of("reply")) == calls + 2  # one reply call per answer
    graded = [r for r in llm.requests_of("structured") if "<practice>" in r.last_user_message]
    assert len(graded) == 2, [r.last_user_message for r in graded]
    assert "Lesson mode: none" in ask(tg, "/status", **LEARNER)
    review = ask(tg, "/review", **LEARNER)
    assert "goed" not in review and "itinerary" not in review, review  # both graded: not due
