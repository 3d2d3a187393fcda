"""End to end over real HTTP: the real `memora run` process, real python-telegram-bot, real
openai SDK, real SQLite and Chroma, against the fake Telegram and OpenAI servers in this process.
The tests play users; they only look at what Telegram and the model were sent."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.telegram.context import NEWCOMER_SECONDS
from memora.shortterm.instructions import MEMORY_BLOCK
from tests.support.bot import ADMIN, ALICE, WAIT, BotProcess, ask, bot_over_fakes
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow





@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeTelegram, FakeOpenAI]]:
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        yield tg, llm


@pytest.fixture(scope="module")
def bot(
    servers: tuple[FakeTelegram, FakeOpenAI], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BotProcess]:
    tg, llm = servers
    tmp = tmp_path_factory.mktemp("e2e")
    process = BotProcess(tg, llm, tmp / "data", tmp / "bot.log")
    process.start()
    yield process
    if process.proc is not None:
        code = process.stop()
        assert code == 0, process.output()
    assert "Traceback" not in process.output(), process.output()
    assert process.env["MEMORA_TELEGRAM__TOKEN"] not in process.output()




def reply_request_for(llm: FakeOpenAI, text: str) -> Any:
    found = [r for r in llm.requests_of("reply") if r.last_user_message.endswith(text)]
    assert found, f"no reply request for {text!r}"
    return found[-1]


def test_a_learner_is_remembered_across_a_restart(bot: BotProcess) -> None:
    tg, llm = bot.tg, bot.llm
    assert [c["command"] for c in tg.commands()][:2] == ["start", "help"]
    assert "Memora" in ask(tg, "/start")
    for text in (
        "Hi! I'm Alice, a nurse in Taipei.",
        "My English level is B1 and I want to improve my speaking.",
        "I usually study for 30 minutes after work.",
    ):
        assert ask(tg, text) == f"Echo: {text}"
    summary = ask(tg, "/summary")
    covered = re.match(r"Summary \(covers (\d+) messages\)\n(.+)", summary, re.DOTALL)
    assert covered and int(covered.group(1)) >= 2 and "nurse in Taipei" in covered.group(2)
    assert tg.chat_actions and tg.chat_actions[0] == (ALICE, "typing")

    saved = ask(tg, "/remember I am preparing for IELTS 7.0")
    assert saved.startswith("✅ Saved: I am preparing for IELTS 7.0")

    assert bot.stop() == 0, bot.output()
    bot.start()

    assert ask(tg, "/reset").startswith("Fresh start")  # the memory must come from long-term
    question = "Can you give me a plan for my IELTS exam preparation?"
    assert ask(tg, question) == f"Echo: {question}"
    request = reply_request_for(llm, question)
    memory_blocks = [m["content"] for m in request.messages if MEMORY_BLOCK in m["content"]]
    assert memory_blocks and "IELTS 7.0" in memory_blocks[0], request.messages
    assert not any("nurse in Taipei" in m["content"] for m in request.messages)  # history reset

    tg.user_sends(f"/export {ALICE}", user_id=ADMIN, first_name="Ada")
    (doc,) = tg.wait_documents(chat_id=ADMIN, timeout=WAIT)
    assert doc["filename"] == f"memora-chat-{ALICE}.json"
    data = json.loads(doc["content"])
    assert [m["content"] for m in data["history"]] == [question, f"Echo: {question}"]
    memories = data["participants"][str(ALICE)]["memories"]
    assert [m["text"] for m in memories if m["source"] == "manual"] == [
        "I am preparing for IELTS 7.0"
    ]
    assert ask(tg, "/export") == "Only the bot's admins can use /export."


def test_flood_control_is_retried_and_the_reply_arrives(bot: BotProcess) -> None:
    tg = bot.tg
    tg.fail_next("sendMessage", retry_after=1)
    assert ask(tg, "Is this sentence correct?", user_id=2001, first_name="Bo") == (
        "Echo: Is this sentence correct?"
    )
    assert any(status == 429 for method, _, status, _ in tg.errors if method == "sendMessage")


def test_an_llm_outage_gets_a_clear_reply_and_leaves_no_half_turn(bot: BotProcess) -> None:
    tg, llm = bot.tg, bot.llm
    user: dict[str, Any] = {"user_id": 2002, "first_name": "Chen"}
    assert ask(tg, "First message", **user) == "Echo: First message"
    llm.down = True
    try:
        answer = ask(tg, "Are you there?", **user)
    finally:
        llm.down = False
    assert "couldn't reach my language model" in answer and "Nothing was saved" in answer
    history = ask(tg, "/history", **user)
    assert "First message" in history and "Are you there?" not in history
    assert history.startswith("History (2 messages")
    assert ask(tg, "Back again", **user) == "Echo: Back again"


def test_a_group_message_without_a_mention_is_ignored(bot: BotProcess) -> None:
    tg = bot.tg
    group: dict[str, Any] = {
        "chat_type": "group",
        "chat_id": -100777,
        "user_id": 2003,
        "first_name": "Dee",
    }
    quiet = tg.user_sends("Good morning everyone!", **group)
    answered = ask(tg, f"@{tg.bot_username} how do I say 加油 in English?", **group)
    assert answered == "Echo: [Dee] how do I say 加油 in English?"
    history = ask(tg, "/history", **group)
    assert "Good morning everyone" not in history and "加油" in history
    texts = [m["text"] for m in tg.sent_messages(-100777)]
    assert len(texts) == 2  # the answer and /history: nothing for the unaddressed message
    assert quiet["message"]["message_id"] not in [
        m.get("reply_to_message", {}).get("message_id") for m in tg.sent_messages(-100777)
    ]


def test_a_learner_reads_the_bot_in_their_language(bot: BotProcess) -> None:
    """A zh-TW user gets 繁體, a zh-CN user 简体, /language en switches back; the menu is
    registered for the default (English) and for zh."""
    tg = bot.tg
    assert tg.menu_languages() == ["", "zh"]
    english, chinese = tg.commands(), tg.commands("zh")
    assert [c["command"] for c in english] == [c["command"] for c in chinese]
    assert {c["command"]: c["description"] for c in chinese}["help"] == "我会记得什么，以及命令列表"
    taiwan: dict[str, Any] = {"user_id": 2101, "first_name": "美玲", "language_code": "zh-TW"}
    china: dict[str, Any] = {"user_id": 2102, "first_name": "小明", "language_code": "zh-CN"}
    assert ask(tg, "/help", **taiwan).startswith("我是 Memora，你的英文家教。")
    tg.wait_for(lambda: tg.chat_commands(2101) != [], WAIT, "the 繁體 menu of the chat")
    taiwan_menu = {c["command"]: c["description"] for c in tg.chat_commands(2101)}
    assert taiwan_menu["help"] == "我會記得什麼，以及指令清單"  # its own: `zh` is 简体
    assert ask(tg, "/help", **china).startswith("我是 Memora，你的英语老师。")
    assert ask(tg, "/language en", **taiwan) == "From now on I speak English to you."
    assert ask(tg, "/help", **taiwan).startswith("I'm Memora, your English tutor.")
    english_menu = {c["command"]: c["description"] for c in tg.chat_commands(2101)}
    assert english_menu["help"] == "what I remember and the command list"
    assert tg.chat_commands(2102) == []  # the zh menu is already 简体
    assert ask(tg, "/help", **china).startswith("我是 Memora，你的英语老师。")  # theirs alone


def test_a_config_error_is_one_line_and_nothing_starts(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_", "OPENAI_"))}
    env.pop("TELEGRAM_BOT_TOKEN", None)
    env["MEMORA_STORAGE__DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "run"],
        cwd=tmp_path if (ROOT / "config.toml").exists() else ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "memora: config error: missing config key 'telegram.token' (set TELEGRAM_BOT_TOKEN, "
        "MEMORA_TELEGRAM__TOKEN or [telegram] token)"
    ]
    assert not (tmp_path / "data").exists()


def test_a_rejected_token_is_a_config_error(
    servers: tuple[FakeTelegram, FakeOpenAI], tmp_path: Path
) -> None:
    tg, llm = servers
    wrong = "999:WRONG-token-that-must-not-be-logged"
    process = BotProcess(tg, llm, tmp_path / "data", tmp_path / "bot.log")
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "run"],
        cwd=ROOT,
        env={**process.env, "MEMORA_TELEGRAM__TOKEN": wrong},
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "memora: config error: the Bot API rejected 'telegram.token' (Unauthorized): "
        "check the token from @BotFather"
    )
    assert wrong not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def test_a_streamed_reply_is_drafts_in_private_and_edits_in_a_group(tmp_path: Path) -> None:
    answer = (
        "**Well done!** Your sentence is almost right. Say *I went to school yesterday*, "
        "because the past of *go* is *went*, not *goed*. Irregular verbs like this one "
        "are worth practising a few at a time, out loud, until they feel natural."
    )
    group = FakeTelegram.DEFAULT_GROUP_ID
    with bot_over_fakes(tmp_path, limits=True) as (tg, llm, process):
        process.env["MEMORA_TELEGRAM__STREAM_REPLIES"] = "true"
        process.start()
        try:
            llm.stream_delay = 0.1  # about 4 s of words: room for a few drafts and edits
            llm.queue_reply(answer, kind="reply")
            tg.user_sends("Is 'I goed to school yesterday' correct?")
            done = tg.wait_for(
                lambda: [m for m in tg.sent_messages(ALICE) if m.get("parse_mode") == "HTML"],
                WAIT,
                "the streamed reply to be rendered",
            )
            llm.queue_reply(answer, kind="reply")
            tg.user_sends(
                f"@{tg.bot_username} is 'I goed' correct?", chat_type="group", chat_title="Class"
            )
            in_group = tg.wait_for(
                lambda: [m for m in tg.sent_messages(group) if m.get("parse_mode") == "HTML"],
                WAIT,
                "the streamed group reply to be rendered",
            )
        finally:
            llm.stream_delay = 0.0
            assert process.stop() == 0, process.output()
    (message,) = tg.sent_messages(ALICE)
    assert done[0]["message_id"] == message["message_id"]
    assert message["text"].startswith("Well done! Your sentence is almost right.")
    assert "**" not in message["text"] and message["entities"][0]["type"] == "bold"
    drafts = tg.calls_to("sendMessageDraft")
    assert len(drafts) >= 2 and {int(d["chat_id"]) for d in drafts} == {ALICE}
    assert message["edits"] == 0  # drafts, then one message: nothing edited
    assert tg.draft(ALICE) is None  # the reply took the draft's place
    (group_message,) = tg.sent_messages(group)
    assert in_group[0]["message_id"] == group_message["message_id"]
    assert group_message["edits"] >= 2  # at least one preview edit, then the formatted text
    assert not [e for e in tg.errors if e[2] == 429]  # within Telegram's limits
    assert all(request.stream for request in llm.requests_of("reply"))
    assert "Traceback" not in process.output(), process.output()


def test_a_second_instance_on_the_same_token_is_told_in_one_line(tmp_path: Path) -> None:
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        first = BotProcess(tg, llm, tmp_path / "a", tmp_path / "a.log")
        second = BotProcess(tg, llm, tmp_path / "b", tmp_path / "b.log")
        first.start()
        assert ask(tg, "Hello?") == "Echo: Hello?"
        time.sleep(NEWCOMER_SECONDS)  # the first one has polled a while
        second.start()
        try:
            tg.wait_for(lambda: first.exited() or second.exited(), WAIT, "one instance to stop")
            stopped = first if first.exited() else second
            assert stopped is second  # the newcomer stops; the first goes on
            assert stopped.proc is not None and stopped.proc.wait() == 3
            said = [line for line in stopped.output().splitlines() if "409 Conflict" in line]
            assert len(said) == 1 and "another bot instance is polling" in said[0]
            assert "Traceback" not in stopped.output()
            stopped.proc = None
            assert ask(tg, "Still there?") == "Echo: Still there?"  # the other one goes on
        finally:
            for bot in (first, second):
                if bot.proc is not None:
                    bot.stop()
