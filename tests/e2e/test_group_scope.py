"""A group sees only what the group was told (issue 44): the real `memora run` against the fake
Telegram and OpenAI servers. Alice tells the bot private things in her private chat (a memory,
her goal, a mistake, a word); then, in a group, nothing she asks for there and nothing the
group's extraction call is sent holds any of them, and the group's extraction cannot take over
her private memory (no `replaces`, no "was: …" in the group, nothing private to /undo).

Checked from the outside only: every Bot API call to the group, and every model request made
for the group's turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.bot import WAIT, ask, bot_over_fakes
from tests.support.fake_openai import (
    Answer,
    FakeRequest,
    default_responder,
    minimal_instance,
)
from tests.support.fake_telegram import FakeTelegram

pytestmark = pytest.mark.slow

PRIVATE_SAYS = "Yesterday I goed to Vexhaven market to haggle. My salary is 50000 a month."
GROUP_SAYS = "my salary is 60000 a month now"
PRIVATE_WORDS = ("50000", "Zarquon", "Vexhaven", "haggle", "bargain")


def extracting(req: FakeRequest) -> Answer:
    """The model's extraction: the private facts from PRIVATE_SAYS; from the group message, the
    new salary, pointing `replaces` at the first listed memory (m1) whatever the list holds."""
    if req.kind != "structured":
        return default_responder(req)
    answer: dict[str, Any] = minimal_instance(req.schema) if req.schema else {}
    said = req.last_user_message.split("<user_message>", 1)[-1]
    if "goed" in said:
        answer["memories"] = [{"text": "Salary is 50000 a month.", "category": "personal"}]
        answer["profile"] = [
            {"field": "level", "value": "B1"},
            {"field": "goal", "value": "pass the Zarquon exam"},
        ]
        answer["mistakes"] = [
            {
                "original": "I goed to Vexhaven",
                "corrected": "I went to Vexhaven",
                "category": "tense",
                "reason": "go → went",
            }
        ]
        answer["vocabulary"] = [
            {"term": "haggle", "meaning": "to bargain", "example": "to haggle at the market"}
        ]
    elif "60000" in said:
        answer["memories"] = [
            {"text": "Salary is 60000 a month.", "category": "personal", "replaces": "m1"}
        ]
    return answer


def in_group(tg: FakeTelegram, text: str) -> str:
    """`text` from Alice in the group (a command as it is, else to the bot by name); the
    bot's first answer there."""
    update = tg.user_sends(
        text if text.startswith("/") else f"@{tg.bot_username} {text}",
        chat_type="group",
        chat_title="Class",
    )
    (first, *_) = tg.wait_messages(count=1, after=update, timeout=WAIT)
    return str(first.get("text", first.get("caption", "")))


def leaks(text: str) -> list[str]:
    return [w for w in PRIVATE_WORDS if w.lower() in text.lower()]


def test_a_group_sees_only_what_the_group_was_told(tmp_path: Path) -> None:
    with bot_over_fakes(tmp_path) as (tg, llm, bot):
        llm.responder = extracting
        bot.start()
        try:
            ask(tg, PRIVATE_SAYS)
            mine = ask(tg, "/memories")
            assert "Salary is 50000 a month." in mine and "Zarquon" in mine
            assert "Vexhaven" in ask(tg, "/mistakes") and "haggle" in ask(tg, "/words")
            group = FakeTelegram.DEFAULT_GROUP_ID
            asked = len(llm.requests)

            # What the commands show there: the group's part, or a pointer to the private chat.
            assert "private chat" in in_group(tg, "/extraction")
            profile = in_group(tg, "/profile")
            assert "level: B1" in profile and "private chat" in profile
            for name in ("mistakes", "words", "progress"):
                assert "private chat" in in_group(tg, f"/{name}")
            assert not tg.calls_to("sendPhoto"), "the progress chart stays private"

            # The group's turn: its extraction call sees no private memory or profile field.
            in_group(tg, GROUP_SAYS)
            memories = in_group(tg, "/memories")  # after the group turn's extraction
            assert "Salary is 60000 a month." in memories
            extraction = [r for r in llm.requests[asked:] if r.kind == "structured"]
            assert extraction and GROUP_SAYS in extraction[0].last_user_message
            assert [leaks(str(r.body)) for r in llm.requests[asked:]] == [[]] * len(
                llm.requests[asked:]
            )
            assert "was:" not in memories
            assert "nothing to undo" in in_group(tg, "/undo 1")

            # Nothing of Alice's private life reached the group, by any Bot API call.
            to_group = [str(p) for _m, p in tg.calls if str(p.get("chat_id")) == str(group)]
            assert to_group and [leaks(c) for c in to_group if leaks(c)] == []
            # Her private memory is hers still, untouched by the group's `replaces`.
            assert "Salary is 50000 a month." in ask(tg, "/memories")
        finally:
            assert bot.stop() == 0, bot.output()
