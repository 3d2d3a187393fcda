"""Handler tests: real telegram.Update objects through the real Application and handlers, a Bot
whose request layer records every call and answers with canned Bot API JSON, and the real engine
over FakeLLM with a temp SQLite database."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from telegram import Update
from telegram.ext import AIORateLimiter, Application

import bot.telegram.handlers.commands as command_handlers
import bot.telegram.handlers.errors as handler_errors
import bot.telegram.handlers.text as text_handlers
import bot.telegram.messages as messages
import bot.telegram.streaming as streaming
from bot.telegram import ALLOWED_UPDATES, build_application, run_bot
from bot.telegram.processor import PerChatUpdateProcessor
from bot.telegram.render import EMPTY_ANSWER, MAX_TEXT, tg_len
from bot.telegram.webhook import SecretUpdater
from memora.commands import COMMANDS, CommandContext, run_command
from memora.config import ConfigError, Settings
from memora.engine import EMPTY as EMPTY_TEXT
from memora.engine import Engine
from memora.i18n import translator
from memora.llm import ChatMessage
from memora.storage import NewTurn, TurnUsage
from memora.views import Reply
from tests.support.fakes import CutStream, FakeLLM, outage
from tests.support.harness import Harness
from tests.support.recording import (
    ADMIN,
    ALICE,
    BOB,
    BOT_NAME,
    BOT_USER,
    GROUP,
    NAMES,
    Call,
    make_settings,
)


def replies(calls: list[Call]) -> list[str]:
    return [str(c.params["text"]) for c in calls if c.method == "sendMessage"]


@pytest.fixture
async def h(make_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    return await make_harness()


@dataclass
class Recorder:
    """Wraps the real run_command (where the handlers call it) and records what each handler
    asked the core for."""

    seen: list[tuple[str, CommandContext]] = field(default_factory=list)

    async def __call__(self, engine: Engine, name: str, ctx: CommandContext) -> Reply:
        self.seen.append((name, ctx))
        return await run_command(engine, name, ctx)


# -- wiring ----------------------------------------------------------------------------------
async def test_startup_publishes_the_command_menu(h: Harness) -> None:
    calls = h.req.of("setMyCommands")  # one menu per language: the default (English) and zh
    assert [c.params.get("language_code") for c in calls] == [None, "zh"]
    for call in calls:
        listed = [c["command"] for c in call.params["commands"]]
        assert listed == list(COMMANDS)
    assert isinstance(h.app.update_processor, PerChatUpdateProcessor)
    assert isinstance(h.app.bot.rate_limiter, AIORateLimiter)
    assert h.app.bot.base_url.startswith("https://api.telegram.org/bot")


def test_config_errors_come_before_anything_starts() -> None:
    with pytest.raises(ConfigError, match=r"telegram\.token"):
        build_application(Settings())
    with pytest.raises(ConfigError, match=r"llm\.api_key"):
        build_application(make_settings())  # no engine given and no LLM configured
    with pytest.raises(ConfigError, match="webhook_url"):
        build_application(make_settings(mode="webhook"), engine=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="webhook_secret"):
        build_application(
            make_settings(mode="webhook", webhook_url="https://x.org/hook", webhook_secret="a b"),
            engine=object(),  # type: ignore[arg-type]
        )


def test_polling_fetches_only_what_is_handled() -> None:
    assert set(ALLOWED_UPDATES) == {"message", "edited_message", "my_chat_member", "callback_query"}


# -- commands --------------------------------------------------------------------------------
async def test_start_and_help(h: Harness) -> None:
    for cmd in ("/start", "/help"):
        (text,) = await h.say(cmd)
        assert "Memora" in text and "/remember" in text and "/forgetme" in text
    assert await h.history(ALICE) == []  # commands are not turns


@pytest.mark.parametrize("group", [False, True], ids=["private", "group"])
@pytest.mark.parametrize("name", list(COMMANDS))
async def test_every_command_reaches_the_core_with_the_callers_context(
    make_harness: Callable[..., Awaitable[Harness]],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    group: bool,
) -> None:
    rec = Recorder()
    monkeypatch.setattr(command_handlers, "run_command", rec)
    h = await make_harness()
    arg = {"remember": "I like tea", "search": "tea", "forget": "1", "undo": "1"}.get(name, "")
    suffix = f"@{BOT_NAME}" if group else ""
    calls = await h.send(f"/{name}{suffix} {arg}".strip(), user=BOB, group=group)
    ((seen_name, ctx),) = rec.seen
    assert seen_name == name
    assert ctx.user.id == BOB and ctx.user.name == "Bob"
    assert ctx.chat.id == (GROUP if group else BOB)
    assert ctx.chat.kind == ("group" if group else "private")
    assert ctx.arg == arg
    assert ctx.is_admin is False
    sent = [
        c
        for c in calls
        if c.method in ("sendMessage", "sendDocument", "sendPhoto")
        and int(c.params["chat_id"]) == ctx.chat.id  # /review in a group also goes privately
    ]
    assert sent, f"/{name} got no answer"
    first = sent[0].params
    if group:  # in a busy group the answer quotes the question
        assert first["reply_parameters"]["message_id"] == h._message_id
    else:
        assert "reply_parameters" not in first


async def test_plain_command_in_group_and_multiline_argument(
    make_harness: Callable[..., Awaitable[Harness]], monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder()
    monkeypatch.setattr(command_handlers, "run_command", rec)
    h = await make_harness()
    await h.send("/status", group=True)
    await h.send("/search\nmy goals  and plans", group=True)
    assert [(n, c.arg) for n, c in rec.seen] == [("status", ""), ("search", "my goals  and plans")]


async def test_command_for_another_bot_is_ignored(h: Harness) -> None:
    assert await h.send("/status@other_bot", group=True) == []
    assert await h.send("/foo", group=True) == []  # may be another bot's command
    (text,) = await h.say(f"/foo@{BOT_NAME}", group=True)
    assert "/help" in text


async def test_unknown_command_gets_a_short_pointer(h: Harness) -> None:
    (text,) = await h.say("/foo bar")
    assert text == "I don't know /foo. Try /help for the list of commands."
    assert h.llm.calls == [] and await h.history(ALICE) == []


async def test_debug_views_after_turns(h: Harness) -> None:
    await h.say("I am learning English for work.")
    await h.say("How do I say 'meeting' politely?")
    (history,) = await h.say("/history")
    assert "I am learning English for work." in history and "Echo:" in history
    (context,) = await h.say("/context")
    assert "How do I say 'meeting' politely?" in context
    (summary,) = await h.say("/summary")
    assert summary.startswith("Summary")
    (status,) = await h.say("/status")
    assert re.search(r"History messages\s+: 4", status)


async def test_export_is_for_admins(h: Harness) -> None:
    await h.say("hello", user=ADMIN)
    calls = await h.send("/export", user=ADMIN)
    (doc,) = [c for c in calls if c.method == "sendDocument"]
    (name, content, _mime) = doc.files["document"]
    assert name == f"memora-chat-{ADMIN}.json"
    data = json.loads(content)
    assert [m["content"] for m in data["history"]] == ["hello", "Echo: hello"]
    assert doc.params["caption"].startswith(f"Export of chat {ADMIN}")

    (refused,) = await h.say("/export")
    assert refused == "Only the bot's admins can use /export."
    (other,) = await h.say(f"/export {ADMIN}")
    assert "admins" in other


async def test_reset_and_forgetme(h: Harness) -> None:
    await h.say("one")
    (text,) = await h.say("/reset")
    assert "Fresh start" in text and "2 messages" in text
    assert await h.history(ALICE) == []
    await h.say("two")
    (text,) = await h.say("/forgetme")
    assert "Delete everything I stored about you?" in text  # its Yes: test_learner_telegram.py
    assert len(await h.history(ALICE)) == 2  # asked first: nothing deleted yet


async def test_memory_commands_without_a_store_say_so(h: Harness) -> None:
    for cmd in ("/memories", "/remember I like tea", "/search tea", "/forget 1", "/undo 1"):
        (text,) = await h.say(cmd)
        assert text == "Long-term memory is turned off on this bot."
    (text,) = await h.say("/extraction")
    assert "No extraction" in text
    (text,) = await h.say("/remember")
    assert text.startswith("Usage: /remember")


@pytest.mark.slow
async def test_memory_commands_in_a_group_act_on_the_callers_memories(
    make_harness: Callable[..., Awaitable[Harness]], tmp_path: Path
) -> None:
    from memora.longterm import MemoryStore
    from memora.longterm.embeddings import LocalUSE

    store = await MemoryStore.create(tmp_path / "chroma", LocalUSE())
    try:
        h = await make_harness(store=store)
        calls = await h.send(f"/remember@{BOT_NAME} I am preparing for IELTS 7.0", group=True)
        assert any(c.method == "sendChatAction" for c in calls)  # /remember runs a turn
        (saved,) = replies(calls)
        assert saved.startswith("✅ Saved: I am preparing for IELTS 7.0")
        await h.say("/remember I work as a nurse in Taipei", user=BOB, group=True)

        (alice,) = await h.say("/memories", group=True)
        assert "IELTS" in alice and "nurse" not in alice and "for Alice" in alice
        (bob,) = await h.say("/memories", user=BOB, group=True)
        assert "nurse" in bob and "IELTS" not in bob

        (found,) = await h.say("/search exam score", group=True)
        assert "IELTS" in found and "nurse" not in found
        (gone,) = await h.say("/forget 1", user=BOB, group=True)
        assert gone == "Forgotten for good: memory 1."
        (alice,) = await h.say("/memories", group=True)
        assert "IELTS" in alice
        (undo,) = await h.say("/undo 1", group=True)
        assert "nothing to undo" in undo

        history = await h.history(GROUP)
        assert ("user", "I am preparing for IELTS 7.0") in history
    finally:
        await store.close()


# -- turns -----------------------------------------------------------------------------------
async def test_private_turn_is_stored_and_rendered_as_html(h: Harness) -> None:
    h.llm.replies.append("**Good** question: use *could* — e.g. `Could you help?` <3")
    calls = await h.send("How do I ask politely?")
    (sent,) = h.req.of("sendMessage")
    assert sent.params["parse_mode"] == "HTML"
    assert sent.params["text"] == (
        "<b>Good</b> question: use <i>could</i> — e.g. <code>Could you help?</code> &lt;3"
    )
    assert "reply_parameters" not in sent.params
    assert calls[0].method == "sendChatAction" and calls[0].params["action"] == "typing"
    assert await h.history(ALICE) == [
        ("user", "How do I ask politely?"),
        ("assistant", "**Good** question: use *could* — e.g. `Could you help?` <3"),
    ]


async def test_typing_is_repeated_until_the_reply_and_not_after(
    make_harness: Callable[..., Awaitable[Harness]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(messages, "TYPING_EVERY", 0.05)
    h = await make_harness(llm=FakeLLM(delay=0.3))
    calls = await h.send("hello")
    methods = [c.method for c in calls]
    assert methods.count("sendChatAction") >= 3
    assert methods[-1] == "sendMessage"
    await asyncio.sleep(0.15)
    assert [c.method for c in h.req.calls[-1:]] == ["sendMessage"]  # the loop really stopped


async def test_a_10000_character_reply_is_split(h: Harness) -> None:
    paragraphs = [f"Paragraph {i}. " + "Practice makes perfect. " * 40 for i in range(10)]
    answer = "\n\n".join(p.strip() for p in paragraphs)
    assert len(answer) > 9_000
    h.llm.replies.append(answer)
    texts = replies(await h.send("Tell me everything"))
    assert len(texts) == 3
    assert all(tg_len(t) <= MAX_TEXT for t in texts)
    assert all(t.startswith("Paragraph") for t in texts)  # cut between paragraphs
    assert "\n\n".join(texts) == answer  # nothing lost, nothing added


async def test_markdown_the_server_rejects_falls_back_to_plain_text(h: Harness) -> None:
    h.req.reject_html = True
    h.llm.replies.append("**Great** work & keep going")
    await h.send("Check my sentence")
    first, second = h.req.of("sendMessage")
    assert first.params["parse_mode"] == "HTML"
    assert "parse_mode" not in second.params
    assert second.params["text"] == "Great work & keep going"


async def test_llm_outage_gets_a_clear_reply_and_stores_nothing(h: Harness) -> None:
    h.llm.replies.append(outage())
    (text,) = await h.say("Are you there?")
    assert "couldn't reach my language model" in text and "Nothing was saved" in text
    assert await h.history(ALICE) == []
    (text,) = await h.say("Are you there now?")
    assert text == "Echo: Are you there now?"


async def test_a_very_long_history_is_sent_as_a_file(h: Harness) -> None:
    await h.engine.db.chats.ensure_chat(ALICE)
    for i in range(200):
        await h.engine.db.turns.record_turn(
            NewTurn(
                chat_id=ALICE,
                user_id=ALICE,
                user_name="Alice",
                user_text=f"question {i} " + "q" * 150,
                reply_text=f"answer {i} " + "a" * 150,
                context=[ChatMessage("user", "x")],
                usage=TurnUsage(),
            )
        )
    calls = await h.send("/history")
    (doc,) = [c for c in calls if c.method == "sendDocument"]
    assert not replies(calls)
    name, content, _ = doc.files["document"]
    assert name == "history.txt"
    text = content.decode()
    assert "question 0 " in text and "answer 199 " in text and text.count("\n") >= 400
    assert "file" in doc.params["caption"]


# -- groups ----------------------------------------------------------------------------------
async def test_group_stays_quiet_unless_addressed(h: Harness) -> None:
    assert await h.send("good morning everyone", group=True) == []
    assert await h.send("@someone_else what do you think?", group=True) == []
    assert await h.send("I agree", group=True, reply_to_user=BOB) == []
    assert h.llm.calls == []
    assert await h.history(GROUP) == []


async def test_group_mention_is_stripped_and_the_speaker_labelled(h: Harness) -> None:
    calls = await h.send(f"@{BOT_NAME}, how do I say 早安 in English?", group=True)
    (text,) = replies(calls)
    assert text == "Echo: [Alice] how do I say 早安 in English?"
    assert calls[-1].params["reply_parameters"]["message_id"] == h._message_id
    await h.say(f"And at night, @{BOT_NAME}?", user=BOB, group=True)
    history = await h.history(GROUP)
    assert [c for r, c in history if r == "user"] == [
        "how do I say 早安 in English?",
        "And at night?",
    ]
    names = [m.user_name for m in await h.engine.db.chats.messages(GROUP) if m.role == "user"]
    assert names == ["Alice", "Bob"]


async def test_group_reply_to_the_bot_is_answered(h: Harness) -> None:
    (text,) = await h.say("What about 'good evening'?", group=True, reply_to_bot=True)
    assert text == "Echo: [Alice] What about 'good evening'?"


async def test_bare_mention_gets_a_hint_and_stores_nothing(h: Harness) -> None:
    (text,) = await h.say(f"@{BOT_NAME}", group=True)
    assert text == text_handlers.BARE_MENTION
    assert await h.history(GROUP) == []


# -- access control --------------------------------------------------------------------------
async def test_only_allowed_users_are_served(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await make_harness(allowed_user_ids=[ALICE])
    (text,) = await h.say("hello", user=BOB)
    assert text.startswith("Sorry, this bot is private") and str(BOB) in text
    (text,) = await h.say("/history", user=BOB)
    assert text.startswith("Sorry, this bot is private")
    assert await h.history(BOB) == [] and h.llm.calls == []
    assert await h.send("chatting among ourselves", user=BOB, group=True) == []  # quiet
    assert await h.send("/foo", user=BOB, group=True) == []  # maybe another bot's command
    (text,) = await h.say("/status", user=BOB, group=True)
    assert text.startswith("Sorry, this bot is private")
    (text,) = await h.say(f"@{BOT_NAME} hi", user=BOB, group=True)
    assert text.startswith("Sorry, this bot is private")
    assert await h.history(GROUP) == []

    assert await h.say("hello", user=ALICE) == ["Echo: hello"]
    assert await h.say("hello", user=ADMIN) == ["Echo: hello"]  # admins always may


async def test_the_allow_list_covers_every_kind_of_update(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    """A stranger gets silence whatever the kind of update, the bot added to a group included;
    the same updates from a learner go through (the greeting shows the update itself works)."""
    h = await make_harness(allowed_user_ids=[ALICE])
    group = {"id": GROUP, "type": "supergroup", "title": "Study group"}

    def person(user: int) -> dict[str, Any]:
        return {"id": user, "is_bot": False, "first_name": NAMES[user]}

    def added_by(user: int, who: dict[str, Any] = BOT_USER) -> dict[str, Any]:
        return {
            "chat": group,
            "from": person(user),
            "date": 0,
            "old_chat_member": {"status": "left", "user": who, "until_date": 0},
            "new_chat_member": {"status": "member", "user": who, "until_date": 0},
        }

    poll = {
        "id": "p1",
        "question": "Tea or coffee?",
        "options": [{"text": t, "voter_count": 0, "persistent_id": t} for t in ("tea", "coffee")],
        "total_voter_count": 0,
        "is_closed": False,
        "is_anonymous": False,
        "type": "regular",
        "allows_multiple_answers": False,
        "allows_revoting": False,
        "members_only": False,
    }
    tea = {"option_persistent_ids": ["tea"]}
    other_bot = {"id": 777, "is_bot": True, "first_name": "Helper", "username": "helper_bot"}
    strangers = [
        ("my_chat_member", added_by(BOB)),
        ("chat_member", added_by(BOB, person(BOB))),
        ("edited_message", h.message("edited /status", user=BOB, edit_date=1)),
        ("edited_message", h.message(f"@{BOT_NAME} hi", user=BOB, group=True, edit_date=1)),
        ("inline_query", {"id": "q1", "from": person(BOB), "query": "my memories", "offset": ""}),
        ("poll", poll),
        ("poll_answer", {"poll_id": "p1", "user": person(BOB), "option_ids": [0], **tea}),
        ("chat_join_request", {"chat": group, "from": person(BOB), "date": 0, "user_chat_id": 1}),
        ("message", h.message(f"@{BOT_NAME} hi", group=True) | {"from": other_bot}),
    ]
    for kind, payload in strangers:
        assert await h.push(kind, payload) == [], kind
    assert h.llm.calls == [] and await h.history(GROUP) == [] and await h.history(BOB) == []
    (greeting,) = replies(await h.push("my_chat_member", added_by(ALICE)))
    assert f"@{BOT_NAME}" in greeting


# -- everything that is not a text message ----------------------------------------------------
STICKER = {
    "file_id": "s1",
    "file_unique_id": "su1",
    "type": "regular",
    "width": 512,
    "height": 512,
    "is_animated": False,
    "is_video": False,
    "emoji": "👍",
}
PHOTO = [{"file_id": "p1", "file_unique_id": "pu1", "width": 90, "height": 90}]
DOCUMENT = {"file_id": "d1", "file_unique_id": "du1", "file_name": "essay.docx"}


@pytest.mark.parametrize(
    "media",
    [
        {"sticker": STICKER},
        {"photo": PHOTO, "caption": "is this right?"},
        {"document": DOCUMENT},
    ],
    ids=["sticker", "photo", "document"],
)
async def test_non_text_messages_get_one_line_and_store_nothing(
    h: Harness, media: dict[str, Any]
) -> None:
    calls = await h.push("message", h.message(**media))
    assert replies(calls) == [text_handlers.NOT_TEXT]
    assert await h.push("message", h.message(group=True, **media)) == []
    addressed = h.message(group=True, reply_to_bot=True, **media)
    assert replies(await h.push("message", addressed)) == [text_handlers.NOT_TEXT]
    assert h.llm.calls == [] and await h.history(ALICE) == [] and await h.history(GROUP) == []


async def test_edited_messages_change_nothing(h: Harness) -> None:
    await h.say("I goed to school")
    edited = h.message("I went to school", edit_date=int(time.time()))
    assert replies(await h.push("edited_message", edited)) == [text_handlers.EDITED]
    assert await h.push("edited_message", h.message("x", group=True, edit_date=1)) == []
    assert [c for _, c in await h.history(ALICE)] == ["I goed to school", "Echo: I goed to school"]


async def test_channel_posts_are_ignored(h: Harness) -> None:
    chat = {"id": -1009, "type": "channel", "title": "News"}
    post = {"message_id": 5, "date": 0, "chat": chat, "sender_chat": chat, "text": "/status"}
    assert await h.push("channel_post", post) == []
    assert await h.history(-1009) == []


async def test_added_to_a_group_says_hello_once(h: Harness) -> None:
    def change(old: str, new: str) -> dict[str, Any]:
        return {
            "chat": {"id": GROUP, "type": "group", "title": "Study group"},
            "from": {"id": ALICE, "is_bot": False, "first_name": "Alice"},
            "date": 0,
            "old_chat_member": {"status": old, "user": BOT_USER, "until_date": 0},
            "new_chat_member": {"status": new, "user": BOT_USER, "until_date": 0},
        }

    (text,) = replies(await h.push("my_chat_member", change("left", "member")))
    assert f"@{BOT_NAME}" in text and "/help" in text
    assert await h.push("my_chat_member", change("member", "left")) == []
    assert await h.push("my_chat_member", change("member", "kicked")) == []
    assert len(replies(await h.push("my_chat_member", change("kicked", "member")))) == 1
    assert await h.history(GROUP) == []


# -- errors ----------------------------------------------------------------------------------
async def test_errors_are_logged_with_their_traceback_and_the_user_is_told(
    make_harness: Callable[..., Awaitable[Harness]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(engine: Engine, name: str, ctx: CommandContext) -> Reply:
        raise RuntimeError("database exploded")

    monkeypatch.setattr(command_handlers, "run_command", broken)
    h = await make_harness()
    with caplog.at_level(logging.ERROR, logger="bot.telegram.handlers"):
        (text,) = await h.say("/status")
    assert text == handler_errors.ERROR
    (record,) = caplog.records
    assert record.exc_info is not None and str(record.exc_info[1]) == "database exploded"


# -- the processor ---------------------------------------------------------------------------
def _update(chat_id: int, n: int) -> Update:
    return Update.de_json(
        {
            "update_id": n,
            "message": {
                "message_id": n,
                "date": 0,
                "chat": {"id": chat_id, "type": "private"},
                "from": {"id": chat_id, "is_bot": False, "first_name": "U"},
                "text": str(n),
            },
        },
        None,
    )


async def test_processor_keeps_order_per_chat_and_runs_chats_in_parallel() -> None:
    proc = PerChatUpdateProcessor(64)
    await proc.initialize()
    done: dict[int, list[int]] = {1: [], 2: []}
    running: dict[int, int] = {1: 0, 2: 0}
    overlapped = False

    async def work(chat: int, n: int) -> None:
        nonlocal overlapped
        running[chat] += 1
        assert running[chat] == 1  # never two updates of one chat at once
        overlapped = overlapped or all(running.values())
        await asyncio.sleep(0.02 if n % 2 else 0.005)  # later updates would overtake if unordered
        done[chat].append(n)
        running[chat] -= 1

    tasks = [
        asyncio.create_task(proc.process_update(_update(chat, n), work(chat, n)))
        for n in range(6)
        for chat in (1, 2)
    ]
    assert proc.active_chats == 0  # tasks have not started yet
    await asyncio.sleep(0)
    assert proc.active_chats == 2
    await asyncio.gather(*tasks)
    assert done == {1: list(range(6)), 2: list(range(6))}
    assert overlapped  # the two chats ran at the same time
    assert proc.active_chats == 0  # no lock left behind for idle chats
    await proc.shutdown()


async def test_a_busy_chat_does_not_take_the_slots_other_chats_need() -> None:
    proc = PerChatUpdateProcessor(2)
    gate = asyncio.Event()
    other_ran = asyncio.Event()

    async def slow() -> None:
        await gate.wait()

    async def quick() -> None:
        other_ran.set()

    busy = [asyncio.create_task(proc.process_update(_update(1, n), slow())) for n in range(3)]
    other = asyncio.create_task(proc.process_update(_update(2, 1), quick()))
    # Chat 1's first update is still running; chat 2 must not wait behind its queue.
    await asyncio.wait_for(other_ran.wait(), timeout=5)
    gate.set()
    await asyncio.gather(*busy, other)
    assert proc.active_chats == 0


async def test_processor_forgets_locks_of_cancelled_waiters() -> None:
    proc = PerChatUpdateProcessor(8)
    gate = asyncio.Event()

    async def blocked() -> None:
        await gate.wait()

    async def never() -> None:
        raise AssertionError("must not run")

    first = asyncio.create_task(proc.process_update(_update(7, 1), blocked()))
    waiting = asyncio.create_task(proc.process_update(_update(7, 2), never()))
    await asyncio.sleep(0.01)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    gate.set()
    await first
    assert proc.active_chats == 0


async def test_updates_without_a_chat_run_directly() -> None:
    proc = PerChatUpdateProcessor(4)
    ran: list[str] = []

    async def job() -> None:
        ran.append("yes")

    await proc.process_update(object(), job())
    assert ran == ["yes"] and proc.active_chats == 0


async def test_an_empty_model_answer_still_gets_a_reply(h: Harness) -> None:
    h.llm.replies.append("   ")
    assert await h.say("Hello?") == [EMPTY_ANSWER]


# -- run_bot wiring (the loop itself is exercised end to end in test_e2e_telegram) ----------
def _llm_ready(**telegram: Any) -> Settings:
    settings = make_settings(**telegram)
    settings.llm.api_key = "sk-test"
    return settings


def test_run_bot_polls_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(Application, "run_polling", lambda self, **kw: seen.update(kw))
    assert run_bot(_llm_ready(poll_timeout=7)) == 0
    assert seen == {
        "timeout": 7,
        "allowed_updates": ALLOWED_UPDATES,
        "drop_pending_updates": False,
    }


def test_run_bot_webhook_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def run_webhook(self: Application[Any, Any, Any, Any, Any, Any], **kw: Any) -> None:
        seen.update(kw, updater=self.updater)

    monkeypatch.setattr(Application, "run_webhook", run_webhook)
    settings = _llm_ready(
        mode="webhook",
        webhook_url="https://bot.example.org/tg/hook",
        webhook_listen="0.0.0.0",
        webhook_port=8088,
        webhook_secret="s3cret_value" * 3,
    )
    assert run_bot(settings) == 0
    assert seen["url_path"] == "tg/hook"
    assert seen["webhook_url"] == "https://bot.example.org/tg/hook"
    assert (seen["listen"], seen["port"]) == ("0.0.0.0", 8088)
    assert isinstance(seen["updater"], SecretUpdater)  # registers and checks the secret itself


@pytest.mark.parametrize(
    ("secret", "refused"),
    [
        ("", None),  # one is made and kept in the store
        ("a" * 31 + "_-", None),
        ("x" * 31, "too short (31 characters, at least 32)"),
        ("change-me-to-a-long-random-string", "it is a placeholder"),
        ("CHANGEME" * 5, "it is a placeholder"),
        ("replace-me-with-a-long-random-secret-123", "it is a placeholder"),
        ("my example webhook secret of some length", "1-256 characters of A-Z"),
    ],
)
def test_a_webhook_secret_must_be_long_and_no_placeholder(secret: str, refused: str | None) -> None:
    settings = make_settings(
        mode="webhook", webhook_url="https://x.org/hook", webhook_secret=secret
    )
    if refused is None:
        build_application(settings, engine=object())  # type: ignore[arg-type]
        return
    with pytest.raises(ConfigError) as error:
        build_application(settings, engine=object())  # type: ignore[arg-type]
    said = str(error.value)
    assert said.startswith(f"invalid config value for 'telegram.webhook_secret': {refused}")
    assert secret not in said and "\n" not in said


# -- streamed replies (telegram.stream_replies) ----------------------------------------------
LESSON = (
    "**Great** question! Here is how to ask politely:\n\n"
    "- Use *could*: `Could you help me?`\n"
    "- Use *would*: `Would you mind closing the window?`\n\n"
    "Practice a few sentences & send them to me."
)


@pytest.fixture
def fast_edits(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pause between edits, so every delta can show (the throttle test sets its own)."""
    monkeypatch.setattr(streaming, "EDIT_EVERY", 0.0)
    monkeypatch.setattr(streaming, "GROUP_EDIT_EVERY", 0.0)


async def streamed(
    make_harness: Callable[..., Awaitable[Harness]], answer: str | Exception | CutStream, **kw: Any
) -> tuple[Harness, list[Call]]:
    """One turn with stream_replies on; the harness and the calls it caused."""
    group = kw.pop("group", False)
    kw.setdefault("stream_drafts", False)  # the edited preview (groups; drafts refused)
    h = await make_harness(llm=FakeLLM(deltas=6, delta_delay=0.02), stream_replies=True, **kw)
    h.llm.replies.append(answer)
    calls = await h.send("How do I ask politely?", group=group)
    return h, calls


async def plain_view(
    make_harness: Callable[..., Awaitable[Harness]],
    answer: str,
    question: str = "How do I ask politely?",
    *,
    group: bool = False,
) -> list[tuple[str, list[str]]]:
    """What the chat shows after the same turn without streaming."""
    h = await make_harness()
    h.llm.replies.append(answer)
    await h.send(question, group=group)
    return h.req.chat_view(GROUP if group else ALICE)


def sent_and_edited(calls: list[Call]) -> list[Call]:
    return [c for c in calls if c.method in ("sendMessage", "editMessageText", "deleteMessage")]


@pytest.mark.usefixtures("fast_edits")
async def test_a_streamed_reply_grows_in_one_message_then_is_rendered(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h, calls = await streamed(make_harness, LESSON)
    first, *edits = sent_and_edited(calls)
    assert first.method == "sendMessage" and "parse_mode" not in first.params
    assert "reply_parameters" not in first.params  # private chat: no quote
    assert len(edits) >= 2 and {c.method for c in edits} == {"editMessageText"}
    assert len({c.params["message_id"] for c in edits}) == 1  # always the same message
    previews = [str(first.params["text"])] + [str(c.params["text"]) for c in edits[:-1]]
    assert all("parse_mode" not in c.params for c in edits[:-1])  # previews are plain text
    assert all(LESSON.startswith(p) for p in previews)
    assert all(len(a) < len(b) for a, b in pairwise(previews))  # only edits that change it
    final = edits[-1]
    assert final.params["parse_mode"] == "HTML" and "<b>Great</b>" in final.params["text"]
    assert h.req.chat_view(ALICE) == await plain_view(make_harness, LESSON)
    assert await h.history(ALICE) == [("user", "How do I ask politely?"), ("assistant", LESSON)]
    assert [c.streamed for c in h.llm.calls if c.kind == "complete"] == [True]


async def test_edits_are_throttled(
    make_harness: Callable[..., Awaitable[Harness]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "EDIT_EVERY", 3600.0)  # nothing between the first and last
    h, calls = await streamed(make_harness, LESSON)
    assert [c.method for c in sent_and_edited(calls)] == ["sendMessage", "editMessageText"]
    assert h.req.chat_view(ALICE) == await plain_view(make_harness, LESSON)


@pytest.mark.usefixtures("fast_edits")
async def test_a_long_streamed_reply_ends_as_the_usual_chunks(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    paragraphs = [f"Paragraph {i}. " + "Practice makes perfect. " * 40 for i in range(10)]
    answer = "\n\n".join(p.strip() for p in paragraphs)
    h, calls = await streamed(make_harness, answer)
    methods = [c.method for c in sent_and_edited(calls)]
    assert methods[0] == "sendMessage" and methods[-2:] == ["sendMessage", "sendMessage"]
    previews = [c for c in sent_and_edited(calls) if "parse_mode" not in c.params]
    assert all(tg_len(str(c.params["text"])) <= MAX_TEXT for c in previews)
    assert str(previews[-1].params["text"]).endswith(streaming.MORE)  # cut to one message
    view = h.req.chat_view(ALICE)
    assert len(view) == 3 and view == await plain_view(make_harness, answer)


@pytest.mark.usefixtures("fast_edits")
async def test_a_turn_failing_mid_stream_edits_the_preview_into_the_apology(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h, calls = await streamed(make_harness, CutStream("Good question! The polite way is"))
    first, *edits = sent_and_edited(calls)
    assert first.method == "sendMessage" and edits[-1].method == "editMessageText"
    ((text, tags),) = h.req.chat_view(ALICE)
    assert "couldn't reach my language model" in text and "Nothing was saved" in text
    assert tags == []
    assert await h.history(ALICE) == []


async def test_a_failure_before_any_text_is_answered_as_usual(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h, calls = await streamed(make_harness, outage())
    assert [c.method for c in sent_and_edited(calls)] == ["sendMessage"]
    assert "couldn't reach my language model" in h.req.chat_view(ALICE)[0][0]


@pytest.mark.usefixtures("fast_edits")
async def test_an_unchanged_edit_is_ignored_and_streaming_goes_on(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await make_harness(
        llm=FakeLLM(deltas=6, delta_delay=0.02), stream_replies=True, stream_drafts=False
    )
    h.req.fail(
        "editMessageText", "Bad Request: message is not modified: specified new message content"
    )
    h.llm.replies.append(LESSON)
    calls = await h.send("How do I ask politely?")
    edits = [c for c in calls if c.method == "editMessageText"]
    assert len(edits) >= 3  # the refused one, later previews, the final rendering
    assert h.req.chat_view(ALICE) == await plain_view(make_harness, LESSON)


@pytest.mark.usefixtures("fast_edits")
async def test_refused_edits_stop_the_preview_but_never_lose_the_reply(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await make_harness(
        llm=FakeLLM(deltas=6, delta_delay=0.02), stream_replies=True, stream_drafts=False
    )
    h.req.fail("editMessageText", "Bad Request: message can't be edited", times=100)
    h.llm.replies.append(LESSON)
    calls = await h.send("How do I ask politely?")
    methods = [c.method for c in sent_and_edited(calls)]
    # a refused preview edit stops streaming; the final edit is refused too, so the preview is
    # taken back and the reply sent as usual
    assert methods[0] == "sendMessage" and methods.count("editMessageText") <= 2
    assert methods[-3:] == ["editMessageText", "deleteMessage", "sendMessage"]
    assert h.req.chat_view(ALICE) == await plain_view(make_harness, LESSON)


@pytest.mark.usefixtures("fast_edits")
async def test_a_preview_that_cannot_be_sent_falls_back_to_a_plain_reply(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await make_harness(
        llm=FakeLLM(deltas=6, delta_delay=0.02), stream_replies=True, stream_drafts=False
    )
    h.req.fail("sendMessage", "Bad Request: not enough rights to send text messages")
    h.llm.replies.append(LESSON)
    calls = await h.send("How do I ask politely?")
    assert [c.method for c in sent_and_edited(calls)] == ["sendMessage", "sendMessage"]
    assert h.req.chat_view(ALICE) == await plain_view(make_harness, LESSON)


@pytest.mark.usefixtures("fast_edits")
async def test_html_the_server_rejects_is_edited_in_as_plain_text(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await make_harness(
        llm=FakeLLM(deltas=3, delta_delay=0.02), stream_replies=True, stream_drafts=False
    )
    h.req.reject_html = True
    h.llm.replies.append("**Great** work & keep going")
    await h.send("Check my sentence")
    assert h.req.chat_view(ALICE) == [("Great work & keep going", [])]


@pytest.mark.usefixtures("fast_edits")
async def test_a_streamed_group_reply_quotes_the_learner_once(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    paragraphs = [f"Paragraph {i}. " + "Practice makes perfect. " * 40 for i in range(10)]
    answer = "\n\n".join(p.strip() for p in paragraphs)
    h = await make_harness(llm=FakeLLM(deltas=6, delta_delay=0.02), stream_replies=True)
    h.llm.replies.append(answer)
    question = f"@{BOT_NAME} tell me everything"
    calls = await h.send(question, group=True)
    sends = [c for c in calls if c.method == "sendMessage"]
    assert sends[0].params["reply_parameters"]["message_id"] == h._message_id
    assert all("reply_parameters" not in c.params for c in sends[1:])
    assert h.req.chat_view(GROUP) == await plain_view(make_harness, answer, question, group=True)


async def test_typing_stops_when_the_first_text_arrives(
    make_harness: Callable[..., Awaitable[Harness]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(messages, "TYPING_EVERY", 0.05)
    monkeypatch.setattr(streaming, "EDIT_EVERY", 0.0)
    h = await make_harness(
        llm=FakeLLM(delay=0.3, deltas=4, delta_delay=0.1), stream_replies=True, stream_drafts=False
    )
    calls = await h.send("hello there, how are you today?")
    methods = [c.method for c in calls]
    assert methods.count("sendChatAction") >= 3
    first_text = methods.index("sendMessage")
    assert "sendChatAction" not in methods[first_text:]


@pytest.mark.usefixtures("fast_edits")
async def test_an_unexpected_error_mid_stream_takes_the_preview_back(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    boom = CutStream("Half of an answer", error=RuntimeError("database exploded"))
    h, calls = await streamed(make_harness, boom)
    assert [c.method for c in sent_and_edited(calls)][-2:] == ["deleteMessage", "sendMessage"]
    assert h.req.chat_view(ALICE) == [(handler_errors.ERROR, [])]
    assert await h.history(ALICE) == []


# -- drafts: a private chat's stream (Bot API 9 sendMessageDraft) --------------------------------
@pytest.fixture
def fast_drafts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No pause between drafts; drafts on again for every test (a refusal is per process)."""
    monkeypatch.setattr(streaming, "DRAFT_EVERY", 0.0)
    monkeypatch.setattr(streaming.Drafts, "refused", False)
    yield


@pytest.mark.usefixtures("fast_drafts")
async def test_a_private_reply_streams_as_drafts_then_one_message(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await make_harness(llm=FakeLLM(deltas=6, delta_delay=0.02), stream_replies=True)
    h.llm.replies.append(LESSON)
    calls = await h.send("How do I ask politely?")
    drafts = [c for c in calls if c.method == "sendMessageDraft"]
    assert len(drafts) >= 2
    assert {int(c.params["draft_id"]) for c in drafts} == {h._message_id}  # one draft a reply
    texts = [str(c.params["text"]) for c in drafts]
    assert all(LESSON.startswith(t) for t in texts) and all(
        "parse_mode" not in c.params for c in drafts
    )
    assert all(len(a) < len(b) for a, b in pairwise(texts))
    assert [c.method for c in sent_and_edited(calls)] == ["sendMessage"]  # nothing edited
    assert h.req.chat_view(ALICE) == await plain_view(make_harness, LESSON)


@pytest.mark.usefixtures("fast_drafts")
async def test_a_group_reply_still_streams_by_editing(
    make_harness: Callable[..., Awaitable[Harness]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "GROUP_EDIT_EVERY", 0.0)
    h = await make_harness(llm=FakeLLM(deltas=6, delta_delay=0.02), stream_replies=True)
    h.llm.replies.append(LESSON)
    calls = await h.send(f"@{BOT_NAME} how do I ask politely?", group=True)
    assert not [c for c in calls if c.method == "sendMessageDraft"]
    first, *edits = sent_and_edited(calls)
    assert first.method == "sendMessage" and edits and edits[-1].method == "editMessageText"


@pytest.mark.usefixtures("fast_drafts")
async def test_a_server_refusing_drafts_gets_edited_previews(
    make_harness: Callable[..., Awaitable[Harness]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "EDIT_EVERY", 0.0)
    h = await make_harness(llm=FakeLLM(deltas=6, delta_delay=0.02), stream_replies=True)
    h.req.fail("sendMessageDraft", "Bad Request: method is not available")
    h.llm.replies.append(LESSON)
    calls = await h.send("How do I ask politely?")
    assert [c.method for c in calls if c.method == "sendMessageDraft"] == ["sendMessageDraft"]
    first, *edits = sent_and_edited(calls)
    assert first.method == "sendMessage" and edits[-1].method == "editMessageText"
    assert h.req.chat_view(ALICE) == await plain_view(make_harness, LESSON)
    assert streaming.Drafts.refused  # the next replies do not try again


@pytest.mark.usefixtures("fast_drafts")
async def test_a_draft_is_sent_again_before_it_expires(
    make_harness: Callable[..., Awaitable[Harness]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "DRAFT_REFRESH", 0.05)  # stands for 20 of the 30 seconds
    h = await make_harness(llm=FakeLLM(deltas=3, delta_delay=0.4), stream_replies=True)
    h.llm.replies.append(LESSON)
    calls = await h.send("How do I ask politely?")
    texts = [str(c.params["text"]) for c in calls if c.method == "sendMessageDraft"]
    assert any(a == b for a, b in pairwise(texts))  # the same text again: kept alive
    assert h.req.chat_view(ALICE) == await plain_view(make_harness, LESSON)


async def test_without_stream_replies_nothing_is_streamed(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await make_harness(llm=FakeLLM(deltas=6, delta_delay=0.02))
    h.llm.replies.append(LESSON)
    calls = await h.send("How do I ask politely?")
    assert [c.method for c in sent_and_edited(calls)] == ["sendMessage"]
    assert [c.streamed for c in h.llm.calls] == [False]


@pytest.mark.usefixtures("fast_edits")
async def test_a_streamed_reply_too_long_for_messages_ends_as_a_file(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    answer = "\n\n".join(f"Paragraph {i}. " + "Practice makes perfect. " * 40 for i in range(25))
    h, calls = await streamed(make_harness, answer)
    methods = [c.method for c in calls if c.method != "sendChatAction"]
    assert methods[0] == "sendMessage" and methods[-2:] == ["deleteMessage", "sendDocument"]
    assert h.req.chat_view(ALICE) == []  # the preview is gone; the file is the answer
    (doc,) = h.req.of("sendDocument")
    assert doc.files["document"][1].decode() == answer.strip()


async def test_a_blank_streamed_answer_still_gets_a_reply(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h, calls = await streamed(make_harness, "   ")
    assert [c.method for c in sent_and_edited(calls)] == ["sendMessage"]
    assert h.req.chat_view(ALICE) == [(EMPTY_ANSWER, [])]


# -- input hygiene (issue 7 item 10; bot/inputs.py) --------------------------------------
async def test_telegram_messages_are_cleaned_before_the_core_sees_them(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await make_harness()
    assert await h.say("\u200b\u200b") == [EMPTY_TEXT]
    assert await h.history(ALICE) == []  # not a turn
    assert await h.say("I like tea\x00") == ["Echo: I like tea"]
    assert await h.say("caf\udce9 au lait") == ["Echo: caf\ufffd au lait"]
    stored = [text for _, text in await h.history(ALICE)]
    assert "\x00" not in "".join(stored) and "caf\ufffd au lait" in stored


# -- the learner's language ------------------------------------------------------------------
# The app's language_code picks 繁體 or 简体, /language overrides it, the adapter's own notices
# follow, and the command menu is registered per language.
HANT_HELP = "我是 Memora，你的英文家教。我會記得："
HANS_HELP = "我是 Memora，你的英语老师。我会记得："


async def test_a_zh_tw_user_reads_traditional_and_a_zh_cn_user_simplified(h: Harness) -> None:
    (hant,) = await h.say("/help", language="zh-TW")
    assert hant.startswith(HANT_HELP)
    assert (
        "/memories 你的長期記憶（有編號）" in hant and "/language [en|zh-Hant|zh-Hans|auto]" in hant
    )
    (hans,) = await h.say("/help", user=BOB, language="zh-CN")
    assert hans.startswith(HANS_HELP) and "/memories 你的长期记忆（带编号）" in hans
    (english,) = await h.say("/help", user=BOB, language="en")
    assert english.startswith("I'm Memora, your English tutor.")


async def test_language_en_switches_back_and_auto_follows_the_app(h: Harness) -> None:
    assert (await h.say("/help", language="zh-hant"))[0].startswith(HANT_HELP)
    assert await h.say("/language en", language="zh-hant") == [
        "From now on I speak English to you."
    ]
    (help_text,) = await h.say("/help", language="zh-hant")
    assert help_text.startswith("I'm Memora, your English tutor.")
    assert await h.say("/frobnicate", language="zh-hant") == [
        "I don't know /frobnicate. Try /help for the list of commands."
    ]
    assert await h.say("/language auto", language="zh-hant") == ["之後我會用繁體中文跟你說話。"]
    assert await h.say("/frobnicate", language="zh-hant") == [
        "我不認識 /frobnicate。輸入 /help 看指令清單。"
    ]


async def test_the_adapters_own_notices_follow_the_language(
    make_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await make_harness(allowed_user_ids=[ALICE])
    (refused,) = await h.say("hello", user=BOB, language="zh-CN")
    assert (
        refused == f"抱歉，这是私人机器人，你不在学习者名单上。请管理者添加你的用户 ID（{BOB}）。"
    )
    sticker = await h.push("message", h.message(sticker=STICKER, language="zh-TW"))
    assert replies(sticker) == ["我能讀文字、也能聽語音訊息，請打字或用說的。"]
    assert h.llm.calls == []


async def test_the_command_menu_is_registered_per_language(h: Harness) -> None:
    menus = {c.params.get("language_code"): c.params["commands"] for c in h.req.of("setMyCommands")}
    assert set(menus) == {None, "zh"}
    english = {c["command"]: c["description"] for c in menus[None]}
    chinese = {c["command"]: c["description"] for c in menus["zh"]}
    assert list(english) == list(chinese) == list(COMMANDS)
    assert english["help"] == "what I remember and the command list"
    assert chinese["help"] == "我会记得什么，以及命令列表"  # zh is 简体 (see bot.telegram.MENUS)
    hans = translator("zh_Hans")
    assert all(chinese[c.name].endswith(hans(c.help)[:200]) for c in COMMANDS.values())


async def test_a_learner_whose_language_is_not_their_apps_menu_gets_a_chat_menu(
    h: Harness,
) -> None:
    """A zh-TW app sees the `zh` menu (简体): the learner's private chat gets a 繁體 one, once;
    /language en makes it English; back on the app's language, the chat menu goes."""
    hant = translator("zh_Hant")

    def chat_menus(calls: list[Call]) -> list[tuple[str, Any]]:
        return [
            (c.method, c.params.get("commands"))
            for c in calls
            if c.method in ("setMyCommands", "deleteMyCommands")
        ]

    calls = await h.send("/help", language="zh-TW")
    ((method, menu),) = chat_menus(calls)
    scope = next(c for c in calls if c.method == method).params["scope"]
    assert method == "setMyCommands" and (scope["type"], scope["chat_id"]) == ("chat", ALICE)
    assert {c["command"]: c["description"] for c in menu}["help"] == hant(
        "what I remember and the command list"
    )
    assert chat_menus(await h.send("/help", language="zh-TW")) == []  # set once
    ((method, menu),) = chat_menus(await h.send("/language en", language="zh-TW"))
    assert {c["command"]: c["description"] for c in menu}[
        "help"
    ] == "what I remember and the command list"
    ((method, _),) = chat_menus(await h.send("/language zh-Hans", language="zh-TW"))
    assert method == "deleteMyCommands"  # 简体 is what the zh app menu shows
    assert chat_menus(await h.send("/help", user=BOB, language="zh-CN")) == []  # app menu fits
