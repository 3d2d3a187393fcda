"""Deletion that no turn in flight can undo (issue 44): the real `memora run` against the fake
Telegram and OpenAI servers, on SQLite and on PostgreSQL.

- `/forget n` from the private chat while the learner's group turn that retrieved that memory
  waits for the model: the turn stores its context without the memory, and the answer to
  /forget does not repeat its words.
- `/forgetme` from the private chat while another member's turn in the group, whose context
  holds the learner's lines, waits for the model: that turn stores none of them, and its
  `/context` shows none of them.

The model's reply to the turn in flight is held until the deletion has answered, so the race is
the same on every run. Then, with the bot still running, every file under data_dir is searched
for the deleted words (the database, its WAL, Chroma's files), and on PostgreSQL, whose files
are outside data_dir, every row of every table.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot import ALICE, WAIT, BotProcess, ask, bot_over_fakes, query
from tests.support.disk import files_holding
from tests.support.fake_openai import (
    Answer,
    FakeOpenAI,
    FakeRequest,
    default_responder,
    minimal_instance,
)
from tests.support.fake_telegram import FakeTelegram

pytestmark = pytest.mark.slow

BOB = 2002
SNACK = "Zephyrquill"  # only in the memory the model extracts, never said
HOBBY = "Quillobastic"  # in what Alice says in the group
LIKES = "I love crunchy snacks"
ASKS = "what do I like to eat?"
BOB_ASKS = "how do I say this better?"


class HeldModel:
    """The fake model, with the reply to one message held until released (the turn in flight);
    it extracts the snack memory from LIKES."""

    def __init__(self) -> None:
        self.hold_for = ""
        self.held = threading.Event()  # the held request has arrived
        self.release = threading.Event()

    def __call__(self, req: FakeRequest) -> Answer:
        said = req.last_user_message
        if req.kind == "structured":
            answer = minimal_instance(req.schema) if req.schema else {}
            if said.split("<user_message>", 1)[-1].find(LIKES) >= 0:
                answer["memories"] = [{"text": f"Loves {SNACK} crackers.", "category": "other"}]
            return answer
        if self.hold_for and said.endswith(self.hold_for):
            self.hold_for = ""
            self.held.set()
            assert self.release.wait(WAIT), "the held reply was never released"
        return default_responder(req)

    def hold(self, text: str) -> None:
        self.hold_for = text
        self.held.clear()
        self.release.clear()


def in_group(tg: FakeTelegram, text: str, user: int = ALICE, name: str = "Alice") -> Any:
    """`text` sent in the group, a command as it is, anything else to the bot by name."""
    return tg.user_sends(
        text if text.startswith("/") else f"@{tg.bot_username} {text}",
        user_id=user,
        first_name=name,
        chat_type="group",
        chat_title="Class",
    )


def forget_me(tg: FakeTelegram) -> str:
    """/forgetme in Alice's private chat, its question answered Yes: what she is told."""
    (asked,) = tg.wait_messages(count=1, after=tg.user_sends("/forgetme"), timeout=WAIT)
    buttons = [b["callback_data"] for row in asked["reply_markup"]["inline_keyboard"] for b in row]
    yes = next(data for data in buttons if data.endswith(":y"))
    tg.user_taps(asked, yes)

    def answered() -> str | None:
        now = next(m for m in tg.sent_messages(ALICE) if m["message_id"] == asked["message_id"])
        return None if now["text"] == asked["text"] else str(now["text"])

    return str(tg.wait_for(answered, WAIT, "the answer to /forgetme's Yes"))


def race(tg: FakeTelegram, model: HeldModel, held: Any, delete: Callable[[], str]) -> str:
    """While the turn of `held` (an update just sent) waits for the model, Alice deletes
    something from her private chat; once that is answered the model answers the turn.
    Returns the deletion's answer."""
    assert model.held.wait(WAIT), "the turn in flight never asked the model"
    answer = delete()
    model.release.set()
    tg.wait_messages(count=1, after=held, timeout=WAIT)
    return answer


def run_races(tg: FakeTelegram, llm: FakeOpenAI, bot: BotProcess) -> list[str]:
    """Both races in one running bot; the texts Bob's and Alice's group /context showed."""
    model = HeldModel()
    llm.responder = model
    bot.start()
    # -- /forget n while a turn that retrieved the memory is in flight ---------------------------
    tg.wait_messages(count=1, after=in_group(tg, LIKES), timeout=WAIT)
    assert SNACK in ask(tg, "/memories")  # in her private chat: all her memories
    model.hold(ASKS)
    asked = in_group(tg, ASKS)
    forgot = race(tg, model, asked, lambda: ask(tg, "/forget 1"))
    assert forgot == "Forgotten for good: memory 1."
    assert any(SNACK in str(r.body) for r in llm.requests_of("reply")), "it was retrieved"
    shown = [_answer(tg, in_group(tg, "/context"))]
    # -- /forgetme while another member's turn holds Alice's lines -------------------------------
    tg.wait_messages(count=1, after=in_group(tg, f"My hobby is {HOBBY} knitting."), timeout=WAIT)
    model.hold(BOB_ASKS)
    bobs = in_group(tg, BOB_ASKS, BOB, "Bob")
    gone = race(tg, model, bobs, lambda: forget_me(tg))
    assert gone.startswith("Deleted everything I stored about you")
    context = _answer(tg, in_group(tg, "/context", BOB, "Bob"))
    assert BOB_ASKS in context
    shown.append(context)
    return shown


def _answer(tg: FakeTelegram, update: Any) -> str:
    (first, *_) = tg.wait_messages(count=1, after=update, timeout=WAIT)
    return str(first.get("text", ""))


def left_over(data: Path) -> list[str]:
    return [f"{word}: {f}" for word in (SNACK, HOBBY) for f in files_holding(data, word)]


def test_deletions_win_the_race_on_sqlite(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with bot_over_fakes(tmp_path, data=data) as (tg, llm, bot):
        bot.env["MEMORA_RETRIEVAL__MIN_SCORE"] = "0"  # every memory reaches the reply
        try:
            shown = run_races(tg, llm, bot)
            assert not [s for s in shown if SNACK in s or HOBBY in s]
            assert left_over(data) == []  # the bot still runs: its WAL is there too
        finally:
            assert bot.stop() == 0, bot.output()
        assert left_over(data) == []


def test_deletions_win_the_race_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    data = tmp_path / "data"
    with bot_over_fakes(tmp_path, data=data) as (tg, llm, bot):
        bot.env["MEMORA_RETRIEVAL__MIN_SCORE"] = "0"
        bot.env["MEMORA_STORAGE__DATABASE_URL"] = postgres_url
        try:
            shown = run_races(tg, llm, bot)
            assert not [s for s in shown if SNACK in s or HOBBY in s]
            assert rows_holding(postgres_url, SNACK, HOBBY) == []
            assert left_over(data) == []  # Chroma's files
        finally:
            assert bot.stop() == 0, bot.output()


def rows_holding(url: str, *words: str) -> list[str]:
    """Every row of every table of the database that holds one of the words."""
    tables = [
        r[0]
        for r in query(
            url,
            "SELECT table_name FROM information_schema.tables WHERE table_schema=current_schema()",
        )
    ]
    assert "messages" in tables and "chats" in tables
    return [
        f"{table}: {str(row)[:200]}"
        for table in tables
        for row in query(url, f'SELECT * FROM "{table}"')
        if any(w.lower() in str(dict(row)).lower() for w in words)
    ]
