"""The learner model end to end: the real `memora run` process, the fake Bot API and the fake
OpenAI server (which answers the one extraction call with the widened structured output). A
learner makes a mistake and asks a word; the profile, a review card with an inline keyboard, a
grade that survives kill -9, and the progress photo follow."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot import ALICE, WAIT, ask, bot_over_fakes, keyboard
from tests.support.fake_telegram import FakeTelegram

pytestmark = pytest.mark.slow

WIDE = {
    "memories": [{"text": "The user walks in the park.", "category": "personal", "replaces": None}],
    "profile": [{"field": "level", "value": "B1"}, {"field": "timezone", "value": "Asia/Taipei"}],
    "mistakes": [
        {
            "original": "Yesterday I go to the park",
            "corrected": "Yesterday I went to the park",
            "category": "tense",
            "reason": "yesterday → past tense",
        }
    ],
    "vocabulary": [{"term": "commute", "meaning": "通勤", "example": "My commute takes an hour."}],
}


def last_to(tg: FakeTelegram, chat_id: int) -> dict[str, Any]:
    return tg.sent_messages(chat_id)[-1]


def edits_sent(tmp_path: Path) -> list[int]:
    """The attempts each sent edit row needed (once the sender has marked every one sent)."""
    with sqlite3.connect(tmp_path / "data" / "memora.sqlite3") as conn:
        rows = conn.execute("SELECT state, attempts FROM outbox WHERE kind='edit'").fetchall()
    return [int(a) for _, a in rows] if rows and all(s == "sent" for s, _ in rows) else []


def test_mistake_to_card_to_grade_survives_kill_9(tmp_path: Path) -> None:
    with bot_over_fakes(tmp_path) as (tg, llm, bot):
        bot.start()
        try:
            llm.queue_reply(WIDE, kind="structured")
            text = "Yesterday I go to the park. What does commute mean?"
            assert ask(tg, text) == f"Echo: {text}"
            profile = ask(tg, "/profile")  # waits for the chat's after-reply work
            assert "level: B1" in profile and "Asia/Taipei" in profile
            (extraction,) = llm.requests_of("structured")
            assert extraction.schema_name == "LearnerExtractionResult"
            assert len(llm.requests_of("reply")) == 1  # one call on the reply path

            card = tg.user_sends("/review")
            (first,) = tg.wait_messages(count=1, after=card, timeout=WAIT)
            assert "Yesterday I go to the park" in first["text"]
            # Flood control beyond the rate limiter's 3 retries: the tap is answered at once
            # (answerCallbackQuery is no chat message), the edit is kept and sent later.
            tg.fail_next("editMessageText", 5, retry_after=1)
            tg.user_taps(first, keyboard(first)["Show answer"])
            tg.wait_for(lambda: tg.callback_answers, WAIT, "the tap answered")
            assert tg.sent_messages(ALICE)[-1]["text"] == first["text"]  # not edited yet
            shown = tg.wait_for(
                lambda: [m for m in tg.sent_messages(ALICE) if "Good" in keyboard(m)],
                WAIT,
                "the answer with grade buttons",
            )[0]
            assert "Yesterday I went to the park" in shown["text"]
            assert shown["message_id"] == first["message_id"]  # the tapped card, edited
            edit = [s for m, _, s, _ in tg.errors if m == "editMessageText"]
            assert edit == [429] * 5
            # The outbox's sender retried it (attempts), and knows it went out.
            (attempts,) = tg.wait_for(lambda: edits_sent(tmp_path), WAIT, "the edit marked sent")
            assert attempts >= 1
            good = keyboard(shown)["Good"]
            before = len(tg.sent_messages(ALICE))
            tg.user_taps(shown, good)
            tg.wait_for(lambda: len(tg.sent_messages(ALICE)) > before, WAIT, "the next card")
            assert [a["text"] for a in tg.callback_answers][-1] == "Good"
            assert "commute" in last_to(tg, ALICE)["text"]  # the next card: the word

            assert bot.proc is not None
            bot.proc.kill()  # kill -9 mid-review
            bot.proc.wait()
            bot.proc = None
            bot.start()

            again = tg.user_sends("/review")
            (nxt,) = tg.wait_messages(count=1, after=again, timeout=WAIT)
            assert "commute" in nxt["text"]  # the graded card is not due again
            tg.user_taps(shown, good)  # the old Good button, after the restart
            tg.wait_for(lambda: len(tg.callback_answers) >= 3, WAIT, "the stale tap's answer")
            stale = tg.callback_answers[-1]
            assert stale["show_alert"] and "already graded" in stale["text"]
            tg.user_taps(nxt, "rv:g:1:0:x")  # forged
            tg.wait_for(lambda: len(tg.callback_answers) >= 4, WAIT, "the forged tap's answer")
            assert "isn't one I can use" in tg.callback_answers[-1]["text"]

            tg.fail_next("sendPhoto", 5, retry_after=1)  # kept in the outbox, sent later
            progress = tg.user_sends("/progress")
            tg.wait_for(lambda: tg.photos(ALICE), WAIT, "the progress chart")
            assert [s for m, _, s, _ in tg.errors if m == "sendPhoto"] == [429] * 5
            (photo,) = tg.photos(ALICE)
            assert photo["content"].startswith(b"\x89PNG")
            texts = [m.get("caption") or m.get("text") or "" for m in tg.sent_messages(ALICE)]
            assert any("Your progress" in t and "Vocabulary: 1 word," in t for t in texts)
            assert progress["message"]["message_id"] > 0
        finally:
            if bot.proc is not None:
                assert bot.stop() == 0, bot.output()
        assert "Traceback" not in bot.output(), bot.output()
