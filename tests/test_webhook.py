"""Webhook mode end to end: the real `memora run` process serves PTB's webhook (tornado) on a
local port, registers it with the fake Telegram (setWebhook), and the test plays Telegram by
POSTing Updates to it, then looks at what the bot sent back to the fake Bot API."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memora.commands import help_text
from memora.modes.placement import OFFER as PLACEMENT_OFFER
from tests.fake_openai import FakeOpenAI
from tests.fake_telegram import FakeTelegram
from tests.test_e2e_telegram import START_WAIT, WAIT, BotProcess

pytestmark = pytest.mark.slow

PATH = "/tg/hook"
SECRET = "some-secret"
USER = 3001


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class WebhookBot(BotProcess):
    """BotProcess in webhook mode: ready once it has set its webhook and its port accepts."""

    def __init__(self, tg: FakeTelegram, llm: FakeOpenAI, data_dir: Path, log: Path) -> None:
        super().__init__(tg, llm, data_dir, log)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}{PATH}"
        self.env.update(
            {
                "MEMORA_TELEGRAM__MODE": "webhook",
                "MEMORA_TELEGRAM__WEBHOOK_URL": self.url,
                "MEMORA_TELEGRAM__WEBHOOK_LISTEN": "127.0.0.1",
                "MEMORA_TELEGRAM__WEBHOOK_PORT": str(self.port),
                "MEMORA_TELEGRAM__WEBHOOK_SECRET": SECRET,
            }
        )
        self.next_message_id = 100_000  # far above the ids the fake gives the bot's messages
        self.next_update_id = 500_000

    def wait_ready(self) -> None:
        """Ready once the webhook is set and its port accepts connections."""
        self.tg.wait_for(
            lambda: len(self.tg.calls_to("setWebhook")) >= self.starts or self.exited(),
            START_WAIT,
            "the bot to set its webhook",
        )
        assert not self.exited(), self.output()
        # PTB calls setWebhook just before its server starts listening
        deadline = time.monotonic() + START_WAIT
        while not self.accepts():
            assert not self.exited(), self.output()
            assert time.monotonic() < deadline, "the webhook port never opened\n" + self.output()
            time.sleep(0.05)

    def accepts(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def update(self, text: str, user_id: int = USER, first_name: str = "Wen") -> dict[str, Any]:
        """A private text message as Telegram would POST it (not queued in the fake)."""
        self.next_message_id += 1
        self.next_update_id += 1
        user = FakeTelegram.make_user(user_id, first_name)
        message: dict[str, Any] = {
            "message_id": self.next_message_id,
            "from": user,
            "chat": {"id": user_id, "type": "private", "first_name": first_name},
            "date": int(time.time()),
            "text": text,
        }
        entities = self.tg.text_entities(text)
        if entities:
            message["entities"] = entities
        return {"update_id": self.next_update_id, "message": message}

    def post(self, update: dict[str, Any], secret: str | None = SECRET) -> int:
        """POST an Update to the bot's webhook the way Telegram does; the HTTP status."""
        headers = {"Content-Type": "application/json"}
        if secret is not None:
            headers["X-Telegram-Bot-Api-Secret-Token"] = secret
        request = urllib.request.Request(
            self.url, data=json.dumps(update).encode(), headers=headers, method="POST"
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 direct
        try:
            with opener.open(request, timeout=WAIT) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            exc.close()
            return int(exc.code)

    def ask(self, text: str, user_id: int = USER) -> str:
        """POST one message; return the bot's next message to that chat."""
        before = len(self.tg.sent_messages(user_id))
        assert self.post(self.update(text, user_id)) == 200
        sent = self.tg.wait_for(
            lambda: self.tg.sent_messages(user_id)[before:], WAIT, f"a reply to {text!r}"
        )
        return str(sent[0].get("text", ""))


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookBot]:
    tmp = tmp_path_factory.mktemp("webhook")
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        process = WebhookBot(tg, llm, tmp / "data", tmp / "bot.log")
        process.start()
        try:
            yield process
        finally:
            if process.proc is not None:
                process.stop()


def test_the_webhook_is_registered_with_url_and_secret(bot: WebhookBot) -> None:
    (call,) = bot.tg.calls_to("setWebhook")
    assert call["url"] == bot.url
    assert call["secret_token"] == SECRET
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


def test_a_wrong_or_missing_secret_is_rejected_and_not_answered(bot: WebhookBot) -> None:
    user = USER + 1
    rejected = ["This must never be read", "Nor this"]
    assert bot.post(bot.update(rejected[0], user), secret="wrong-secret") == 403
    assert bot.post(bot.update(rejected[1], user), secret=None) == 403
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


def test_sigterm_stops_the_bot_cleanly(bot: WebhookBot) -> None:
    assert bot.stop() == 0, bot.output()
    output = bot.output()
    assert "Traceback" not in output, output
    assert bot.tg.token not in output and SECRET not in output, output
    assert "bot stopped" in output, output
    assert not bot.accepts()
