"""Webhook mode end to end: the real `memora run` process serves its webhook (tornado) on a
local port, registers it with the fake Telegram (setWebhook), and the test plays Telegram by
POSTing Updates to it, then looks at what the bot sent back to the fake Bot API.

No secret is configured: the bot makes one, keeps it in the store and registers it; a request
without it is refused (an outsider who found the port). A placeholder or short secret in the
configuration is refused at start."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.web.auth import sign
from memora.commands import help_text
from memora.modes.placement import OFFER as PLACEMENT_OFFER
from tests.support.bot import ADMIN, ROOT, START_WAIT, USER, WAIT, WebhookBot, free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram

pytestmark = pytest.mark.slow







@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookBot]:
    tmp = tmp_path_factory.mktemp("webhook")
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        process = WebhookBot(tg, llm, tmp / "data", tmp / "bot.log")
        process.env["MEMORA_LOGGING__LEVEL"] = "DEBUG"  # every Bot API call's parameters
        process.env.update(  # the learner's page on the same loop, beside the webhook
            MEMORA_WEBAPP__ENABLED="true", MEMORA_WEBAPP__PORT=str(free_port())
        )
        process.start()
        try:
            yield process
        finally:
            if process.proc is not None:
                process.stop()


def rows(bot: WebhookBot, sql: str) -> list[Any]:
    """Rows of the bot's SQLite file, read while it runs."""
    path = bot.env["MEMORA_STORAGE__DATA_DIR"] + "/memora.sqlite3"
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as con:
        return con.execute(sql).fetchall()


def inbox(bot: WebhookBot) -> dict[int, bool]:
    """The bot's durable inbox: update id → handled."""
    return dict(rows(bot, "SELECT update_id, done_at IS NOT NULL FROM inbox"))


def test_the_webhook_is_registered_with_url_and_a_generated_secret(bot: WebhookBot) -> None:
    (call,) = bot.tg.calls_to("setWebhook")
    assert call["url"] == bot.url
    secret = call["secret_token"]
    assert len(secret) >= 43  # 256 random bits, made once and kept in the store
    kept = rows(bot, "SELECT value FROM server_keys WHERE name = 'webhook_secret'")
    assert kept == [(secret,)]
    assert set(call["allowed_updates"]) == {
        "message",
        "edited_message",
        "my_chat_member",
        "callback_query",
    }
    assert not bot.tg.calls_to("deleteWebhook")  # nothing dropped, no polling
    assert bot.tg.poll_count == 0


def test_a_posted_message_is_answered(bot: WebhookBot) -> None:
    text = "Is 'I have went home' correct?"
    assert bot.ask(text) == f"Echo: {text}"


def test_a_forged_update_from_an_admin_is_refused_and_nothing_is_queued(
    bot: WebhookBot,
) -> None:
    """An outsider who can reach the port posts `/export <a learner's chat>` "from" the admin:
    without the secret, or with a wrong one, it is refused before anything is kept or sent."""
    assert bot.ask("I'd like to practise for a job interview.") == (
        "Echo: I'd like to practise for a job interview."
    )
    assert bot.secret is not None
    forged = [bot.update(f"/export {USER}", ADMIN, "Ada") for _ in range(4)]
    near_miss = bot.secret[:-1] + ("A" if bot.secret[-1] != "A" else "B")
    for update, header in zip(forged, [None, "", "wrong-secret", near_miss], strict=True):
        assert bot.post_with(update, header) == 403
    assert not {u["update_id"] for u in forged} & set(inbox(bot))  # nothing queued …
    real = bot.update(f"/export {USER}", ADMIN, "Ada")
    assert bot.post(real) == 200
    bot.tg.wait_for(lambda: inbox(bot).get(real["update_id"]), WAIT, "the admin's /export")
    # … and nothing sent: the one export is the admin's own request's
    (export,) = bot.tg.calls_to("sendDocument")
    assert int(export["chat_id"]) == ADMIN


def test_a_wrong_or_missing_secret_is_rejected_and_not_answered(bot: WebhookBot) -> None:
    user = USER + 1
    rejected = ["This must never be read", "Nor this"]
    assert bot.post_with(bot.update(rejected[0], user), "wrong-secret") == 403
    assert bot.post_with(bot.update(rejected[1], user), None) == 403
    # updates of one chat are handled in order: had either got through, it would be answered
    # before this one
    assert bot.ask("Hello?", user) == "Echo: Hello?"
    assert bot.tg.texts(user) == ["Echo: Hello?"]
    asked = [r.last_user_message for r in bot.llm.requests_of("reply")]
    assert not any(text in message for text in rejected for message in asked)


def test_start_via_the_webhook_gets_the_help_text(bot: WebhookBot) -> None:
    answer = bot.ask("/start", USER + 2)
    assert answer.startswith("I'm Memora, your English tutor.")
    assert answer == f"{help_text()}\n\n{PLACEMENT_OFFER}"  # a newcomer: no level yet


def test_the_learners_page_is_served_beside_the_webhook(bot: WebhookBot) -> None:
    page = f"http://127.0.0.1:{bot.env['MEMORA_WEBAPP__PORT']}"
    behind_the_proxy = f"http://127.0.0.1:{bot.port}/app/"  # the webhook's origin + /app/
    (menu,) = bot.tg.calls_to("setChatMenuButton")
    assert menu["menu_button"]["web_app"]["url"] == behind_the_proxy
    bot.ask("/start", USER + 3)
    (start,) = bot.tg.sent_messages(USER + 3)
    (row,) = start["reply_markup"]["inline_keyboard"]
    assert [b["web_app"]["url"] for b in row] == [behind_the_proxy]
    user = {"id": USER + 3, "first_name": "Wen"}
    headers = {"Authorization": "tma " + sign(user, bot.tg.token)}
    me = httpx.get(page + "/app/api/me", headers=headers, trust_env=False)
    assert me.status_code == 200 and me.json()["user"]["id"] == USER + 3
    assert httpx.get(page + "/app/api/me", trust_env=False).status_code == 401


def test_sigterm_stops_the_bot_cleanly(bot: WebhookBot) -> None:
    assert bot.stop() == 0, bot.output()
    output = bot.output()
    assert "Traceback" not in output, output
    whole = bot.log.read_text(errors="replace")  # DEBUG: PTB logged setWebhook's parameters
    assert "setWebhook" in whole and bot.secret
    assert not any(bot.secret[i : i + 10] in whole for i in range(len(bot.secret) - 9))
    assert bot.tg.token not in whole
    assert "hash=" not in whole and "tma " not in whole  # the page's initData is never logged
    assert "bot stopped" in output, output
    assert not bot.accepts()
    with pytest.raises(OSError):  # the page's server stopped with it
        socket.create_connection(("127.0.0.1", int(bot.env["MEMORA_WEBAPP__PORT"])), 1).close()


@pytest.mark.parametrize(
    ("secret", "why"),
    [
        ("change-me-to-a-long-random-string", "it is a placeholder"),  # deploy/.env.example's
        ("hunter2-hunter2", "too short (15 characters, at least 32)"),
    ],
)
def test_a_placeholder_or_short_secret_is_refused_at_start_in_one_line(
    tmp_path: Path, secret: str, why: str
) -> None:
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        bot = WebhookBot(tg, llm, tmp_path / "data", tmp_path / "bot.log")
        bot.env["MEMORA_TELEGRAM__WEBHOOK_SECRET"] = secret
        done = subprocess.run(
            [sys.executable, "-m", "bot.cli", "run"],
            cwd=ROOT,
            env=bot.env,
            capture_output=True,
            text=True,
            timeout=START_WAIT,
        )
        assert tg.calls == []  # Telegram never heard of it
    assert done.returncode == 2 and done.stdout == "", done
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "memora: config error: invalid config value for 'telegram.webhook_secret': " + why
    )
    assert secret not in line
