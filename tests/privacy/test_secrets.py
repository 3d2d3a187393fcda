"""Secrets the filter recognises are masked before anything is stored or logged: the model sees
them once, in the turn that carries them, and never again."""

from __future__ import annotations

from pathlib import Path

import pytest
from telegram import Update

from bot.telegram.privacy import masked_update
from memora.commands import help_text
from memora.privacy.secretfilter import MASK, looks_secret, mask_secrets
from tests.support.disk import files_holding
from tests.support.fake_openai import FakeOpenAI
from tests.support.terminal import chat_and_log, memora_env

SECRET = "Hunter2Qx9"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("my password is hunter2 and I like tea", f"my password is {MASK} and I like tea"),
        ("我的密碼是abc123，請記住", f"我的密碼是{MASK}，請記住"),
        ("password hunter2!", f"password {MASK}!"),
        ("The password: purple", f"The password: {MASK}"),
        ("My PIN 1234.", f"My PIN {MASK}."),
        ("verification code 482913", f"verification code {MASK}"),
        ("card 4111 1111 1111 1111 ok", f"card {MASK} ok"),
        ("key sk-abcdefghijklmnopqrstuvwx done", f"key {MASK} done"),
        ("ID A123456789 here", f"ID {MASK} here"),
        ("secret: Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1", f"secret: {MASK}"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789 leaked", f"{MASK} leaked"),
    ],
)
def test_mask_hides_the_secret_and_keeps_the_sentence(text: str, masked: str) -> None:
    assert mask_secrets(text) == masked
    assert looks_secret(text)


@pytest.mark.parametrize(
    "text",
    [
        "What is a good password manager?",
        "Forgot my password.",
        "I need a pin for my map",
        "My TOEIC score is 850 and my level is B1.",
        "I'm a nurse in Kaohsiung, call me at 9 pm.",
        "INFO memora.app: data_dir=/tmp/pytest-of-root/test_start_up_says_where_the_d0/memora",
        "collection a04a0d08-25fa-4cc9-b24d-f1773bbf05c5 opened",
    ],
)
def test_mask_leaves_ordinary_text_alone(text: str) -> None:
    assert mask_secrets(text) == text


@pytest.mark.parametrize(
    "text", ["my password is hunter2 and I like tea", "密碼是abc123", "card 4111 1111 1111 1111"]
)
def test_masking_twice_changes_nothing(text: str) -> None:
    once = mask_secrets(text)
    assert mask_secrets(once) == once


def test_an_update_is_masked_with_its_formatting_moved() -> None:
    text = "🙂 My password is hunter2xyz and *bold* /help"
    bold_at = len("🙂 My password is hunter2xyz and ".encode("utf-16-le")) // 2
    update = Update.de_json(
        {
            "update_id": 1,
            "message": {
                "message_id": 5,
                "date": 0,
                "chat": {"id": 7, "type": "private"},
                "text": text,
                "entities": [
                    {"type": "bold", "offset": bold_at, "length": 6},
                    {"type": "italic", "offset": bold_at - 15, "length": 11},  # the secret
                ],
                "reply_to_message": {
                    "message_id": 4,
                    "date": 0,
                    "chat": {"id": 7, "type": "private"},
                    "caption": "密碼是abc123",
                },
            },
        },
        None,
    )
    masked = masked_update(update)
    message = masked.message
    assert message is not None and message.text == f"🙂 My password is {MASK} and *bold* /help"
    (bold,) = message.entities
    assert message.parse_entity(bold) == "*bold*"
    assert message.reply_to_message is not None
    assert message.reply_to_message.caption == f"密碼是{MASK}"
    plain_message = {"message_id": 6, "date": 0, "chat": {"id": 7, "type": "private"}, "text": "hi"}
    plain = Update.de_json({"update_id": 2, "message": plain_message}, None)
    assert masked_update(plain) is plain


def test_help_says_what_is_true() -> None:
    text = " ".join(help_text().split())
    assert "never stored" not in text
    assert "hidden before anything is stored or logged" in text


@pytest.mark.slow
def test_a_password_is_sent_once_then_masked_everywhere(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """Real `memora chat` at DEBUG: the secret reaches the model in its own turn only; history,
    the next requests, every file under data_dir and the log hold the mask instead."""
    data = tmp_path / "data"
    env = memora_env(openai_server, data, MEMORA_LOGGING__LEVEL="DEBUG")
    lines = [
        f"My password is {SECRET} and my English level is B1.",
        "What did I just tell you?",
        "history",
        "exit",
    ]
    out, log = chat_and_log(env, lines, "--quiet", timeout=180)
    assert "DEBUG" in log  # the debug log was on
    assert SECRET not in log
    seen = [r for r in openai_server.requests if SECRET in str(r.body)]
    assert [r.kind for r in seen] == ["reply"]  # once: the turn that carried it
    later = openai_server.requests_of("reply")[-1]
    assert MASK in str(later.body) and "B1" in str(later.body)
    assert f"My password is {MASK}" in out  # /history shows the mask
    assert files_holding(data, SECRET) == []
