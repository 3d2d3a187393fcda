"""The fake Telegram server, driven by the real python-telegram-bot over real HTTP."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from telegram import Bot, BotCommand, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ParseMode
from telegram.error import BadRequest, Forbidden, NetworkError
from telegram.ext import (
    AIORateLimiter,
    Application,
    BaseHandler,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    TypeHandler,
    filters,
)

from tests.fake_telegram import (
    FakeTelegram,
    WaitTimeout,
    parse_html,
    parse_markdown,
    parse_markdown_v2,
)

USER = FakeTelegram.DEFAULT_USER_ID
GROUP = FakeTelegram.DEFAULT_GROUP_ID


@pytest.fixture(autouse=True)
def ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    """PTB 22.x warns (PTBDeprecationWarning, an error under filterwarnings=error) whenever a
    duration attribute is read as int, and RetryAfter.__init__ reads its own ``retry_after``: a
    429 would surface as that warning instead of RetryAfter. Opting in to timedelta avoids it."""
    monkeypatch.setenv("PTB_TIMEDELTA", "1")


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


def api(
    tg: FakeTelegram, method: str, params: dict[str, Any] | None = None, *, form: bool = False
) -> tuple[int, dict[str, Any]]:
    """A raw Bot API call (JSON body, or x-www-form-urlencoded like PTB sends)."""
    params = params or {}
    if form:
        encoded = {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}
        body = urllib.parse.urlencode(encoded).encode()
        content_type = "application/x-www-form-urlencoded"
    else:
        body, content_type = json.dumps(params).encode(), "application/json"
    request = urllib.request.Request(
        f"{tg.api_url}/{method}", data=body, headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


# -- the real PTB Application against the fake ----------------------------------------------------
async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.effective_message and update.effective_user
    await update.effective_message.reply_text(f"Welcome, {update.effective_user.first_name}!")


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.effective_message and update.effective_message.text
    await update.effective_message.reply_text(update.effective_message.text)


async def send_doc(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.effective_message
    await update.effective_message.reply_document(
        document=b"line 1\r\nline 2\x00\xff", filename="notes.txt", caption="your notes"
    )


async def on_sticker(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.effective_message and update.effective_message.sticker
    await update.effective_message.reply_text(f"nice {update.effective_message.sticker.emoji}")


@asynccontextmanager
async def running(
    tg: FakeTelegram,
    *handlers: BaseHandler[Any, Any, Any],
    rate_limiter: AIORateLimiter | None = None,
) -> AsyncIterator[tuple[Application[Any, Any, Any, Any, Any, Any], list[object]]]:
    builder: Any = (
        Application.builder().token(tg.token).base_url(tg.base_url).base_file_url(tg.base_file_url)
    )
    if rate_limiter is not None:
        builder = builder.rate_limiter(rate_limiter)
    app = builder.build()
    for handler in handlers:
        app.add_handler(handler)
    seen: list[object] = []
    errors: list[object] = []

    async def collect(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        seen.append(update)

    async def on_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        errors.append(context.error)

    app.add_handler(TypeHandler(Update, collect), group=-1)
    app.add_error_handler(on_error)
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=1)
        try:
            yield app, seen
        finally:
            await app.updater.stop()
            await app.stop()
    assert errors == [], errors


async def test_start_command_reaches_command_handler_and_text_is_echoed(tg: FakeTelegram) -> None:
    async with running(
        tg,
        CommandHandler("start", start),
        MessageHandler(filters.TEXT & ~filters.COMMAND, echo),
    ) as _:
        first = tg.user_sends("/start")
        (welcome,) = await tg.await_messages(after=first, timeout=5)
        assert welcome["text"] == "Welcome, Alice!"
        assert welcome["from"]["username"] == "memora_test_bot"
        assert welcome["chat"]["id"] == USER

        second = tg.user_sends("How are you?")
        (reply,) = await tg.await_messages(after=second, timeout=5)
        assert reply["text"] == "How are you?"
        assert reply["message_id"] > second["message"]["message_id"] > welcome["message_id"]

        # In a group the command carries the bot's @username; PTB checks it against getMe.
        group = tg.user_sends(
            "/start@memora_test_bot", chat_type="group", user_id=7, first_name="Bo"
        )
        (hello,) = await tg.await_messages(after=group, timeout=5)
        assert hello["text"] == "Welcome, Bo!" and hello["chat"]["id"] == GROUP

    assert [c for c in tg.calls if c[0] == "getMe"]
    assert tg.calls_to("deleteWebhook")
    assert tg.pending_updates == []  # all confirmed by the final getUpdates on stop


async def test_flood_control_is_retried_by_aioratelimiter(tg: FakeTelegram) -> None:
    async with running(
        tg,
        MessageHandler(filters.TEXT & ~filters.COMMAND, echo),
        rate_limiter=AIORateLimiter(max_retries=2),
    ):
        tg.fail_next("sendMessage", n=1, retry_after=1)
        sent = tg.user_sends("slow down")
        (reply,) = await tg.await_messages(after=sent, timeout=6)
        assert reply["text"] == "slow down"

    attempts = tg.calls_to("sendMessage")
    assert len(attempts) == 2
    assert [(m, status) for m, _, status, _ in tg.errors] == [("sendMessage", 429)]
    assert tg.errors[0][3] == "Too Many Requests: retry after 1"


async def test_reply_document_is_recorded_with_its_bytes(tg: FakeTelegram) -> None:
    async with running(tg, CommandHandler("notes", send_doc)):
        tg.user_sends("/notes")
        (doc,) = await tg.await_documents(USER, timeout=5)
    assert doc["filename"] == "notes.txt"
    assert doc["content"] == b"line 1\r\nline 2\x00\xff"
    assert doc["caption"] == "your notes"
    (message,) = tg.sent_messages(USER)
    assert message["document"]["file_name"] == "notes.txt"
    assert message["message_id"] == doc["message_id"]


async def test_set_my_commands_is_recorded(tg: FakeTelegram) -> None:
    async with running(tg) as (app, _):
        commands = [BotCommand("start", "Start"), BotCommand("forget", "Forget me")]
        assert await app.bot.set_my_commands(commands)
        assert await app.bot.get_my_commands() == tuple(commands)
    (params,) = tg.calls_to("setMyCommands")
    assert params["commands"] == [
        {"command": "start", "description": "Start"},
        {"command": "forget", "description": "Forget me"},
    ]
    assert tg.commands() == params["commands"]


async def test_non_text_updates_are_parsed_by_ptb_without_errors(tg: FakeTelegram) -> None:
    async with running(
        tg,
        MessageHandler(filters.Sticker.ALL, on_sticker),
        MessageHandler(filters.TEXT & ~filters.COMMAND, echo),
    ) as (app, seen):
        sticker = tg.user_sends_sticker("🦊")
        (reply,) = await tg.await_messages(after=sticker, timeout=5)
        assert reply["text"] == "nice 🦊"
        original = tg.user_sends("helo")
        tg.user_edits(original, "hello")
        tg.user_sends_photo(caption="look")
        tg.user_sends_voice(duration=3)
        tg.channel_post("news")
        tg.bot_added_to_group(chat_title="Study group")
        await tg.await_for(lambda: len(seen) == 7, timeout=5, what="7 updates")
    updates = [u for u in seen if isinstance(u, Update)]
    assert updates[0].message and updates[0].message.sticker
    assert updates[2].edited_message and updates[2].edited_message.text == "hello"
    assert updates[3].message and updates[3].message.photo[-1].width == 800
    assert updates[4].message and updates[4].message.voice
    assert updates[4].message.voice.duration == dt.timedelta(seconds=3)
    assert updates[5].channel_post and updates[5].channel_post.text == "news"
    member = updates[6].my_chat_member
    assert member and member.new_chat_member.status == "member"
    assert member.new_chat_member.user.id == app.bot.id
    assert member.chat.title == "Study group"


async def test_user_document_can_be_downloaded_and_replies_quote(tg: FakeTelegram) -> None:
    got: list[bytes] = []

    async def on_document(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message and update.effective_message.document
        file = await update.effective_message.document.get_file()
        got.append(bytes(await file.download_as_bytearray()))

    async def on_click(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.callback_query
        await update.callback_query.answer("ok!")
        await update.callback_query.edit_message_text(f"chose {update.callback_query.data}")

    async with running(
        tg,
        MessageHandler(filters.Document.ALL, on_document),
        CallbackQueryHandler(on_click),
    ) as (app, seen):
        tg.user_sends_document("essay.txt", b"My essay \xe2\x9c\x8d")
        await tg.await_for(lambda: got, timeout=5)
        assert got == [b"My essay \xe2\x9c\x8d"]

        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("A", callback_data="a")]])
        question = await app.bot.send_message(USER, "Pick one", reply_markup=keyboard)
        reply = tg.user_sends("this one", reply_to_bot_message_id=question.message_id)
        tg.user_clicks("a", question.message_id)
        await tg.await_for(lambda: tg.callback_answers, timeout=5)
        await tg.await_for(lambda: tg.texts(USER) == ["chose a"], timeout=5)

    replied = next(
        u.message for u in seen if isinstance(u, Update) and u.message and u.message.text
    )
    assert replied.reply_to_message and replied.reply_to_message.from_user
    assert replied.reply_to_message.from_user.id == tg.bot_id
    assert reply["message"]["reply_to_message"]["text"] == "Pick one"
    assert tg.callback_answers[0]["text"] == "ok!"
    (edited,) = tg.sent_messages(USER)
    assert edited["edits"] == 1 and edited["reply_markup"] is None  # keyboard removed


# -- the real PTB Bot alone -----------------------------------------------------------------------
async def test_markup_parsed_and_optionally_rejected(tg: FakeTelegram) -> None:
    async with Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url) as bot:
        ok = await bot.send_message(
            USER, "<b>Good</b> &amp; <i>fine</i>", parse_mode=ParseMode.HTML
        )
        assert ok.text == "Good & fine"
        assert [(e.type, e.offset, e.length) for e in ok.entities] == [
            ("bold", 0, 4),
            ("italic", 7, 4),
        ]
        lenient = await bot.send_message(USER, "<b>unclosed", parse_mode=ParseMode.HTML)
        assert lenient.text == "<b>unclosed"  # not rejected by default: raw text kept

        tg.reject_markup = True
        with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
            await bot.send_message(USER, "<b>unclosed", parse_mode=ParseMode.HTML)
        with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
            await bot.send_message(USER, "Well done!", parse_mode=ParseMode.MARKDOWN_V2)
        escaped = await bot.send_message(USER, "*Well* done\\!", parse_mode=ParseMode.MARKDOWN_V2)
        assert escaped.text == "Well done!"
        plain = await bot.send_message(USER, "Well done!")
        assert plain.text == "Well done!"

    texts = [m["text"] for m in tg.sent_messages(USER)]
    assert texts == ["Good & fine", "<b>unclosed", "Well done!", "Well done!"]
    assert tg.sent_messages(USER)[0]["raw_text"] == "<b>Good</b> &amp; <i>fine</i>"
    assert [status for _, _, status, _ in tg.errors] == [400, 400]


async def test_edit_failures_and_chat_actions(tg: FakeTelegram) -> None:
    async with Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url) as bot:
        message = await bot.send_message(USER, "thinking…")
        await bot.send_chat_action(USER, "typing")
        edited = await bot.edit_message_text("done", chat_id=USER, message_id=message.message_id)
        assert isinstance(edited, type(message)) and edited.text == "done"
        with pytest.raises(BadRequest, match="not modified"):
            await bot.edit_message_text("done", chat_id=USER, message_id=message.message_id)
        with pytest.raises(BadRequest, match="not found"):
            await bot.edit_message_text("x", chat_id=USER, message_id=999)

        tg.fail_next("sendMessage", status=403)
        with pytest.raises(Forbidden):
            await bot.send_message(USER, "hi")
        tg.fail_next("sendMessage")
        with pytest.raises(NetworkError):
            await bot.send_message(USER, "hi")
        with pytest.raises(BadRequest, match="too long"):
            await bot.send_message(USER, "x" * 4097)
        chat = await bot.get_chat(USER)
        assert chat.type == "private"
        assert await bot.close() and await bot.log_out()
    assert tg.chat_actions == [(USER, "typing")]
    assert tg.texts(USER) == ["done"]
    assert tg.sent_messages(USER)[0]["edits"] == 1


async def test_await_messages_times_out_without_blocking(tg: FakeTelegram) -> None:
    started = time.monotonic()
    with pytest.raises(WaitTimeout, match="1 message"):
        await tg.await_messages(USER, timeout=0.2)
    with pytest.raises(WaitTimeout):
        tg.wait_messages(USER, timeout=0.1)
    assert time.monotonic() - started < 2


# -- raw HTTP -------------------------------------------------------------------------------------
def test_errors_like_telegram(tg: FakeTelegram) -> None:
    assert api(tg, "noSuchMethod") == (
        404,
        {"ok": False, "error_code": 404, "description": "Not Found: method not found"},
    )
    url = f"{tg.base_url}999:WRONG/getMe"
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(urllib.request.Request(url, data=b""), timeout=5)
    with caught.value as error:
        assert error.code == 401
        assert json.loads(error.read())["description"] == "Unauthorized"

    tg.fail_next("getMe", retry_after=3)
    status, body = api(tg, "getMe")
    assert status == 429
    assert body == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 3",
        "parameters": {"retry_after": 3},
    }
    assert api(tg, "getme")[1]["result"]["username"] == "memora_test_bot"  # case-insensitive


def test_form_and_json_bodies(tg: FakeTelegram) -> None:
    markup = {"inline_keyboard": [[{"text": "A", "callback_data": "1"}]]}
    status, body = api(
        tg, "sendMessage", {"chat_id": USER, "text": "123", "reply_markup": markup}, form=True
    )
    assert status == 200
    assert body["result"]["text"] == "123"  # a str param is never JSON-decoded
    assert body["result"]["reply_markup"] == markup
    assert body["result"]["chat"]["id"] == USER
    status, body = api(tg, "sendMessage", {"chat_id": USER, "text": "json", "parse_mode": "HTML"})
    assert status == 200 and body["result"]["message_id"] == 2
    sent = tg.sent_messages(USER)
    assert [m["parse_mode"] for m in sent] == [None, "HTML"]
    assert sent[0]["reply_markup"] == markup


def test_long_polling_offset_limit_and_allowed_updates(tg: FakeTelegram) -> None:
    started = time.monotonic()
    assert api(tg, "getUpdates", {"timeout": 0.3})[1]["result"] == []
    assert 0.25 < time.monotonic() - started < 2

    timer = threading.Timer(0.2, tg.user_sends, args=("wake up",))
    timer.start()
    started = time.monotonic()
    (update,) = api(tg, "getUpdates", {"timeout": 5})[1]["result"]
    timer.join()
    assert time.monotonic() - started < 2  # woken by the update, not by the timeout
    assert update["message"]["text"] == "wake up"

    for i in range(3):
        tg.user_sends(f"m{i}")
    first = update["update_id"]
    batch = api(tg, "getUpdates", {"offset": first + 1, "limit": 2}, form=True)[1]["result"]
    assert [u["message"]["text"] for u in batch] == ["m0", "m1"]
    assert len(tg.pending_updates) == 3  # nothing below offset first+1 left, none confirmed yet
    batch = api(tg, "getUpdates", {"offset": batch[-1]["update_id"] + 1})[1]["result"]
    assert [u["message"]["text"] for u in batch] == ["m2"]

    tg.user_sends("text")
    tg.my_chat_member()
    only = api(tg, "getUpdates", {"offset": -1, "allowed_updates": ["my_chat_member"]})
    assert [next(k for k in u if k != "update_id") for u in only[1]["result"]] == ["my_chat_member"]
    assert api(tg, "deleteWebhook", {"drop_pending_updates": True})[1]["result"] is True
    assert tg.pending_updates == []


def test_concurrent_getupdates_conflict(tg: FakeTelegram) -> None:
    results: list[int] = []
    poller = threading.Thread(
        target=lambda: results.append(api(tg, "getUpdates", {"timeout": 3})[0])
    )
    poller.start()
    tg.wait_for(lambda: tg.poll_count == 1, timeout=5)
    assert api(tg, "getUpdates", {"timeout": 0})[0] == 200
    poller.join(5)
    assert results == [409]


def test_reachable_from_another_process(tg: FakeTelegram) -> None:
    code = (
        "import json, sys, urllib.request\n"
        "r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=b''), timeout=5)\n"
        "print(json.loads(r.read())['result']['username'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, f"{tg.api_url}/getMe"],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    assert out.stdout.strip() == "memora_test_bot"


def test_user_sends_entities_and_reset(tg: FakeTelegram) -> None:
    update = tg.user_sends("/start@memora_test_bot hi @memora_test_bot", chat_type="supergroup")
    message = update["message"]
    assert message["chat"] == {"id": GROUP, "type": "supergroup", "title": "Test group"}
    assert message["entities"] == [
        {"type": "bot_command", "offset": 0, "length": 22},
        {"type": "mention", "offset": 26, "length": 16},
    ]
    assert tg.user_sends("😀 @memora_test_bot")["message"]["entities"] == [
        {"type": "mention", "offset": 3, "length": 16}  # UTF-16 offsets
    ]
    tg.reset()
    assert tg.pending_updates == [] and tg.calls == []
    assert tg.user_sends("again")["update_id"] > update["update_id"]


def test_markup_parsers() -> None:
    assert parse_html(
        '<a href="https://x.y">link</a> <pre><code class="language-py">1</code></pre>'
    )[1] == [
        {"type": "text_link", "offset": 0, "length": 4, "url": "https://x.y"},
        {"type": "pre", "offset": 5, "length": 1, "language": "py"},
    ]
    for broken in ("<b>x", "x</b>", "<b><i>x</b></i>", "<div>x</div>", "a<br/>b"):
        with pytest.raises(ValueError):
            parse_html(broken)
    text, entities = parse_markdown_v2("*bold _it_* __u__ ||s|| `c\\`` [l](http://a.b/\\)) 1\\.5")
    assert text == "bold it u s c` l 1.5"
    assert [e["type"] for e in entities] == [
        "bold",
        "italic",
        "underline",
        "spoiler",
        "code",
        "text_link",
    ]
    assert entities[-1]["url"] == "http://a.b/)"
    for broken in ("1.5", "*open", "a_b", "(x)", "`code", "[x]"):
        with pytest.raises(ValueError):
            parse_markdown_v2(broken)
    assert parse_markdown("*b* _i_ 1.5!")[0] == "b i 1.5!"
    with pytest.raises(ValueError):
        parse_markdown("*open")
