"""The fake Telegram server answers the real python-telegram-bot Bot the way Telegram does, in
the places the product's own tests rely on (long polling, flood control, HTML, edits)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from telegram import Bot
from telegram.constants import ParseMode
from telegram.error import BadRequest, RetryAfter

from tests.support.fake_telegram import FakeTelegram, MarkupError, parse_html

USER = FakeTelegram.DEFAULT_USER_ID


def bot(tg: FakeTelegram) -> Bot:
    return Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url)


async def test_long_polling_blocks_until_an_update_and_offset_confirms(tg: FakeTelegram) -> None:
    async with bot(tg) as b:
        timer = threading.Timer(0.2, tg.user_sends, args=("wake up",))
        timer.start()
        started = time.monotonic()
        (update,) = await b.get_updates(timeout=5)
        timer.join()
        assert time.monotonic() - started < 4  # woken by the update, not by the timeout
        assert update.message is not None and update.message.text == "wake up"
        assert len(tg.pending_updates) == 1  # fetched, not confirmed
        tg.user_sends("second")
        (later,) = await b.get_updates(offset=update.update_id + 1, timeout=0)
        assert later.message is not None and later.message.text == "second"
        assert [u["update_id"] for u in tg.pending_updates] == [later.update_id]


async def test_flood_control_html_and_edits(tg: FakeTelegram) -> None:
    async with bot(tg) as b:
        tg.fail_next("sendMessage", retry_after=3)
        with pytest.raises(RetryAfter):
            await b.send_message(USER, "hi")
        sent = await b.send_message(USER, "<b>Good</b> &amp; <i>fine</i>", parse_mode="HTML")
        assert sent.text == "Good & fine"
        assert [(e.type, e.offset, e.length) for e in sent.entities] == [
            ("bold", 0, 4),
            ("italic", 7, 4),
        ]
        edited = await b.edit_message_text("done", chat_id=USER, message_id=sent.message_id)
        assert edited.text == "done"  # type: ignore[union-attr]
        with pytest.raises(BadRequest, match="not modified"):
            await b.edit_message_text("done", chat_id=USER, message_id=sent.message_id)
        tg.reject_markup = True
        with pytest.raises(BadRequest, match=r"(?i)can.t parse entities"):
            await b.send_message(USER, "<b>open", parse_mode=ParseMode.HTML)
        with pytest.raises(BadRequest, match="too long"):
            await b.send_message(USER, "x" * 4097)
    assert tg.texts(USER) == ["done"]
    assert tg.sent_messages(USER)[0]["edits"] == 1
    assert [status for _, _, status, _ in tg.errors] == [429, 400, 400, 400]


def test_html_parser_reports_utf16_offsets_and_broken_markup() -> None:
    assert parse_html("😀 <b>x</b>") == ("😀 x", [{"type": "bold", "offset": 3, "length": 1}])
    for broken in ("<b>x", "x</b>", "<b><i>x</b></i>", "<div>x</div>"):
        with pytest.raises(MarkupError):
            parse_html(broken)


def test_user_messages_carry_command_and_mention_entities(tg: FakeTelegram) -> None:
    update = tg.user_sends("/start@memora_test_bot hi @memora_test_bot", chat_type="supergroup")
    assert update["message"]["chat"]["id"] == FakeTelegram.DEFAULT_GROUP_ID
    assert update["message"]["entities"] == [
        {"type": "bot_command", "offset": 0, "length": 22},
        {"type": "mention", "offset": 26, "length": 16},
    ]


async def test_drafts_are_for_private_chats_and_live_30_seconds(
    tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with bot(tg) as b:
        assert await b.send_message_draft(USER, draft_id=7, text="Half a")
        assert tg.draft(USER) == "Half a"
        with pytest.raises(BadRequest, match="private chats only"):
            await b.send_message_draft(FakeTelegram.DEFAULT_GROUP_ID, draft_id=7, text="x")
        with pytest.raises(BadRequest, match="non-zero"):
            await b.send_message_draft(USER, draft_id=0, text="x")
        await b.send_message(USER, "Half a reply.")
        assert tg.draft(USER) is None  # the message took its place
        await b.send_message_draft(USER, draft_id=8, text="Another")
        monkeypatch.setattr("tests.support.fake_telegram.DRAFT_LIFE", 0.0)
        await asyncio.sleep(0.01)
        assert tg.draft(USER) is None  # expired


async def test_limits_answer_429_past_a_chats_burst_but_not_for_drafts() -> None:
    with FakeTelegram(limits=True) as tg:
        async with Bot(tg.token, base_url=tg.base_url) as b:
            for n in range(3):  # the burst a chat is allowed
                await b.send_message(USER, f"message {n}")
            with pytest.raises(RetryAfter):
                await b.send_message(USER, "one too many")
            await b.send_message(USER + 1, "another chat is not held up")
            for n in range(4):
                await b.send_message_draft(USER, draft_id=1, text=f"draft {n}")
            with pytest.raises(RetryAfter):
                await b.send_message_draft(USER, draft_id=1, text="too fast")
