"""The learner commands in Telegram: real Update and CallbackQuery objects through the real
Application and handlers (inline keyboard, owner checks, stale and forged callback data, private
review from a group, the progress photo), over a recording Bot API and the real engine."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from bot.telegram.handlers.gate import NOT_ALLOWED_TAP
from memora.commands import answers
from memora.engine import Engine
from memora.learner.learner_commands import ALREADY, FORGED, GONE, NOT_YOURS
from memora.learner.model import ExtractedMistake, ExtractedWord
from tests.support.harness import Harness
from tests.support.recording import ALICE, BOB, GROUP, Call, make_settings


def buttons(call: Call) -> list[tuple[str, str]]:
    markup = call.params.get("reply_markup")
    if isinstance(markup, str):
        markup = json.loads(markup)
    if not markup:
        return []
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


def only(calls: list[Call], method: str) -> Call:
    found = [c for c in calls if c.method == method]
    assert len(found) == 1, [c.method for c in calls]
    return found[0]


@pytest.fixture
async def bot(make_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    return await make_harness()


async def give_cards(engine: Engine, user: int) -> None:
    now = datetime.now(UTC)
    await engine.learner.apply(
        user,
        message="Yesterday I go to the park",
        profile=[],
        mistakes=[
            ExtractedMistake(
                original="I go to the park",
                corrected="I went to the park",
                category="tense",
                reason="past time → past tense",
            )
        ],
        words=[ExtractedWord(term="commute", meaning="通勤", example="My commute is long.")],
        now=now,
    )


async def test_review_keyboard_show_grade_and_next_card(bot: Harness) -> None:
    await give_cards(bot.engine, ALICE)
    first = only(await bot.send("/review"), "sendMessage")
    assert (
        "Fix this sentence" in first.params["text"] and "I go to the park" in first.params["text"]
    )
    ((label, show),) = buttons(first)
    assert label == "Show answer" and show.startswith("rv:s:")

    calls = await bot.tap(first, show)
    assert only(calls, "answerCallbackQuery").params.get("show_alert") in (None, False)
    edit = only(calls, "editMessageText")
    assert "I went to the park" in edit.params["text"]
    grades = buttons(edit)
    assert [g for g, _ in grades] == ["Again", "Hard", "Good", "Easy"]

    good = dict(grades)["Good"]
    calls = await bot.tap(edit, good)
    assert only(calls, "answerCallbackQuery").params["text"] == "Good"
    graded = only(calls, "editMessageText")
    assert "✔ Good — you'll see it again in" in graded.params["text"] and not buttons(graded)
    nxt = only(calls, "sendMessage")  # the next card, the word
    assert "commute" in nxt.params["text"] and buttons(nxt)[0][0] == "Show answer"

    # the same grade button tapped again (an old message): nothing is graded twice
    calls = await bot.tap(edit, good)
    answer = only(calls, "answerCallbackQuery")
    assert answer.params["text"] == ALREADY and answer.params["show_alert"] is True
    assert not [c for c in calls if c.method == "editMessageText"]
    card_id = int(good.split(":")[2])
    assert (await bot.engine.learner.cards.card(ALICE, card_id)).reps == 1


async def test_someone_elses_forged_and_deleted_cards_get_clear_answers(bot: Harness) -> None:
    await give_cards(bot.engine, ALICE)
    first = only(await bot.send("/review"), "sendMessage")
    ((_, show),) = buttons(first)
    card_id = int(show.split(":")[2])

    calls = await bot.tap(first, f"rv:g:{card_id}:0:e", user=BOB)  # Bob grades Alice's card
    assert only(calls, "answerCallbackQuery").params["text"] == NOT_YOURS
    assert (await bot.engine.learner.cards.card(ALICE, card_id)).reps == 0

    for forged in ("rv:g:abc:0:g", "rv:x:1:0", "rv:g:1:0:zz", "hello", ""):
        calls = await bot.tap(first, forged)
        answer = only(calls, "answerCallbackQuery")
        assert answer.params["text"] == FORGED and answer.params["show_alert"] is True

    asked = only(await bot.send("/forgetme"), "sendMessage")
    await bot.tap(asked, buttons(asked)[0][1])  # Yes
    calls = await bot.tap(first, show)
    assert only(calls, "answerCallbackQuery").params["text"] == GONE


async def test_a_tap_from_someone_off_the_allow_list_stops_at_the_gate(bot: Harness) -> None:
    await give_cards(bot.engine, ALICE)
    first = only(await bot.send("/review"), "sendMessage")
    ((_, show),) = buttons(first)
    card_id = int(show.split(":")[2])
    bot.app.bot_data.settings = make_settings(allowed_user_ids=[ALICE])

    calls = await bot.tap(first, f"rv:g:{card_id}:0:e", user=BOB)
    answer = only(calls, "answerCallbackQuery")
    assert answer.params["text"] == NOT_ALLOWED_TAP and answer.params["show_alert"] is True
    assert [c.method for c in calls] == ["answerCallbackQuery"]
    assert (await bot.engine.learner.cards.card(ALICE, card_id)).reps == 0
    calls = await bot.tap(first, show)  # Alice is on the list: her tap goes through
    assert "I went to the park" in only(calls, "editMessageText").params["text"]


async def test_review_in_a_group_goes_to_the_callers_private_chat(bot: Harness) -> None:
    await give_cards(bot.engine, ALICE)
    calls = await bot.send("/review", group=True)
    private = [c for c in calls if c.method == "sendMessage" and int(c.params["chat_id"]) == ALICE]
    public = [c for c in calls if c.method == "sendMessage" and int(c.params["chat_id"]) == GROUP]
    assert len(private) == 1 and "I go to the park" in private[0].params["text"]
    assert buttons(private[0])
    assert len(public) == 1 and "private chat" in public[0].params["text"]
    assert "park" not in public[0].params["text"]

    bot.req.fail("sendMessage", "Forbidden: bot can't initiate conversation with a user")
    calls = await bot.send("/review", user=ALICE, group=True)
    texts = [str(c.params["text"]) for c in calls if c.method == "sendMessage"]
    assert any("can't message you privately yet" in t and "Start" in t for t in texts)


async def test_nothing_due_says_when_and_no_cards_says_how(bot: Harness) -> None:
    (call,) = [c for c in await bot.send("/review") if c.method == "sendMessage"]
    assert "no review cards yet" in call.params["text"]
    await give_cards(bot.engine, ALICE)
    now = datetime.now(UTC)
    for card in await bot.engine.learner.cards.due_cards(ALICE, now):
        await bot.engine.learner.cards.grade(ALICE, card.id, "easy", now)
    (call,) = [c for c in await bot.send("/review") if c.method == "sendMessage"]
    assert "Nothing to review right now" in call.params["text"] and "in " in call.params["text"]


async def test_progress_is_a_photo_with_text(bot: Harness) -> None:
    await give_cards(bot.engine, ALICE)
    calls = await bot.send("/progress")
    photo = only(calls, "sendPhoto")
    content = photo.files["photo"]
    data = content[1] if isinstance(content, tuple) else content
    assert bytes(data).startswith(b"\x89PNG")
    text = " ".join(str(c.params.get("caption") or c.params.get("text") or "") for c in calls)
    assert "Your progress" in text and "Vocabulary: 1 word," in text


@pytest.mark.parametrize(
    ("command", "answer"),
    [
        ("/profile set mood happy", "no profile field 'mood'"),
        ("/profile set level Z9", "not a CEFR level"),
        ("/profile set timezone Mars/Base", "not a time zone"),
        ("/profile frobnicate", "Usage: /profile"),
        ("/profile undo", "Nothing to undo"),
        ("/review maybe", "Usage: /review"),
    ],
)
async def test_bad_learner_input_is_answered_clearly(
    bot: Harness, command: str, answer: str
) -> None:
    calls = await bot.send(command)
    (reply,) = [c for c in calls if c.method == "sendMessage"]
    assert answer in str(reply.params["text"])


async def test_profile_set_then_undo(bot: Harness) -> None:
    calls = await bot.send("/profile set level b2")
    assert "Saved: level = B2" in only(calls, "sendMessage").params["text"]
    await bot.send("/profile set timezone asia/taipei")
    shown = only(await bot.send("/profile"), "sendMessage").params["text"]
    assert "level: B2" in shown and "timezone: Asia/Taipei" in shown
    undo = only(await bot.send("/profile undo"), "sendMessage").params["text"]
    assert "timezone is back to (empty)" in undo
    assert (await bot.engine.learner.profile(ALICE, datetime.now(UTC))).get("timezone") is None


async def test_forgetme_asks_first_and_only_the_asker_in_time_in_that_chat_deletes(
    bot: Harness,
) -> None:
    """A bare /forgetme deletes nothing; its Yes is checked like every button: forged data,
    a closed question, someone else's tap, a tap from another chat, a question too old, No."""
    await give_cards(bot.engine, ALICE)
    learner = bot.engine.learner

    async def cards() -> int:
        return len(await learner.cards.cards(ALICE))

    asked = only(await bot.send("/forgetme"), "sendMessage")
    assert "Delete everything I stored about you?" in asked.params["text"]
    (yes_label, yes), (no_label, no) = buttons(asked)
    assert (yes_label, no_label) == ("Yes, delete", "No, keep it")
    assert await cards() == 2  # asked, nothing deleted

    def alert(calls: list[Call]) -> str:
        answer = only(calls, "answerCallbackQuery")
        assert answer.params["show_alert"] is True
        assert not [c for c in calls if c.method == "editMessageText"]
        return str(answer.params["text"])

    for forged in ("ask:", "ask:x", "ask::y", "ask:abc:maybe"):
        assert alert(await bot.tap(asked, forged)) == answers.FORGED
    assert alert(await bot.tap(asked, "ask:never-made:y")) == answers.CLOSED
    assert alert(await bot.tap(asked, yes, user=BOB)) == answers.NOT_YOURS
    in_group = only(await bot.send("/forgetme", group=True), "sendMessage")
    assert alert(await bot.tap(in_group, yes)) == answers.FORGED  # a private question, tapped there
    assert await cards() == 2

    later = bot.engine.state.now() + timedelta(minutes=31)
    bot.engine.state.clock = lambda: later
    calls = await bot.tap(asked, yes)
    assert only(calls, "answerCallbackQuery").params["text"] == answers.EXPIRED
    assert only(calls, "editMessageText").params["text"] == answers.EXPIRED
    assert await cards() == 2  # silence deletes nothing
    assert alert(await bot.tap(asked, yes)) == answers.CLOSED

    asked = only(await bot.send("/forgetme"), "sendMessage")
    (_, yes), (_, no) = buttons(asked)
    calls = await bot.tap(asked, no)
    assert only(calls, "editMessageText").params["text"] == answers.KEPT
    assert await cards() == 2

    in_group = only(await bot.send("/forgetme", group=True), "sendMessage")
    (_, yes), _no = buttons(in_group)  # asked in the group: Alice answers there
    assert alert(await bot.tap(in_group, yes, user=BOB)) == answers.NOT_YOURS
    calls = await bot.tap(in_group, yes)
    assert "Deleted everything I stored about you" in only(calls, "editMessageText").params["text"]
    assert await cards() == 0
    # a second tap deletes nothing more
    assert alert(await bot.tap(in_group, yes)) == answers.CLOSED
