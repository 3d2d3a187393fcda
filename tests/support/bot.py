"""The real `memora run` process against the fake Bot API and model servers, and the
webhook variant: started, asked, stopped, for the end-to-end tests."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg

from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.paths import ROOT

ADMIN = 4242
ALICE = FakeTelegram.DEFAULT_USER_ID
WAIT = 30.0  # generous: the process loads Chroma and the embedding model at start
# Start-up alone: at load ≈9 a restart once spent over 30 s between getMe and its command menu
# (opening Chroma and the embedding model on shared cores); an answer still waits WAIT.
START_WAIT = 90.0


class BotProcess:
    """`python -m bot.cli run` as a subprocess, started and stopped like an operator would."""

    def __init__(self, tg: FakeTelegram, llm: FakeOpenAI, data_dir: Path, log: Path) -> None:
        self.tg, self.llm, self.log = tg, llm, log
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_", "OPENAI_"))},
            "MEMORA_TELEGRAM__TOKEN": tg.token,
            "MEMORA_TELEGRAM__BASE_URL": tg.base_url,
            "MEMORA_TELEGRAM__BASE_FILE_URL": tg.base_file_url,
            "MEMORA_TELEGRAM__ADMIN_IDS": json.dumps([ADMIN]),
            "MEMORA_TELEGRAM__POLL_TIMEOUT": "1",
            "MEMORA_LLM__BASE_URL": llm.base_url,
            "MEMORA_LLM__API_KEY": "test",
            "MEMORA_LLM__MAX_RETRIES": "1",
            "MEMORA_STORAGE__DATA_DIR": str(data_dir),
            "MEMORA_MEMORY__MAX_RECENT_TURNS": "1",
            "MEMORA_LOGGING__LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        assert self.proc is None
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bot.cli", "run"],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1
        self.wait_ready()

    # The Bot API call it makes once ready (after publishing its commands), and how that reads
    READY_CALL, READY_WHAT = "deleteWebhook", "the bot to start polling"

    def wait_ready(self) -> None:
        """Ready once it has published its commands and asked for updates."""
        self.tg.wait_for(
            lambda: len(self.tg.calls_to(self.READY_CALL)) >= self.starts or self.exited(),
            START_WAIT,
            self.READY_WHAT,
        )
        assert not self.exited(), self.output()

    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:  # a graceful stop drains the after-reply work: slow on a busy machine, not stuck
            code = self.proc.wait(timeout=3 * WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        return code

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


@contextmanager
def bot_over_fakes(
    tmp: Path, *, data: Path | None = None, limits: bool = False
) -> Iterator[tuple[FakeTelegram, FakeOpenAI, BotProcess]]:
    """A fake Bot API, a fake model and the bot over them, not started yet: its data in
    tmp/data (or `data`), its log in tmp/bot.log."""
    with FakeTelegram(limits=limits) as tg, FakeOpenAI() as llm:
        yield tg, llm, BotProcess(tg, llm, data or tmp / "data", tmp / "bot.log")


def ask(tg: FakeTelegram, text: str, **kw: Any) -> str:
    """Send one message as a user; return the bot's (first) answer."""
    update = tg.user_sends(text, **kw)
    (first, *_) = tg.wait_messages(count=1, after=update, timeout=WAIT)
    return str(first.get("text", first.get("caption", "")))


def keyboard(message: dict[str, Any]) -> dict[str, str]:
    """The inline keyboard of a message the bot sent: button text → callback data."""
    rows = (message.get("reply_markup") or {}).get("inline_keyboard", [])
    return {b["text"]: b["callback_data"] for row in rows for b in row}


PATH = "/tg/hook"  # the webhook bot's path
USER = 3001


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class WebhookBot(BotProcess):
    """BotProcess in webhook mode: ready once it has set its webhook and its port accepts;
    `secret` is then the one it registered (no secret is configured: it makes one)."""

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
            }
        )
        self.secret: str | None = None
        self.next_message_id = 100_000  # far above the ids the fake gives the bot's messages
        self.next_update_id = 500_000

    READY_CALL, READY_WHAT = "setWebhook", "the bot to set its webhook"

    def wait_ready(self) -> None:
        """Ready once the webhook is set and its port accepts connections."""
        super().wait_ready()
        # PTB calls setWebhook just before its server starts listening
        deadline = time.monotonic() + START_WAIT
        while not self.accepts():
            assert not self.exited(), self.output()
            assert time.monotonic() < deadline, "the webhook port never opened\n" + self.output()
            time.sleep(0.05)
        self.secret = self.tg.calls_to("setWebhook")[-1].get("secret_token")

    def accepts(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def update(self, text: str, user_id: int = USER, first_name: str = "Wen") -> dict[str, Any]:
        """A private text message as Telegram (or a forger) would POST it (not queued in the
        fake)."""
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

    def post(self, update: dict[str, Any]) -> int:
        """POST an Update to the bot's webhook the way Telegram does; the HTTP status."""
        return self.post_with(update, self.secret)

    def post_with(self, update: dict[str, Any], secret: str | None) -> int:
        """POST an Update with this secret header (None: none); the HTTP status."""
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


def query(url: str, sql: str, *args: Any) -> list[Any]:
    """Rows from the shared PostgreSQL, from this (sync) test."""

    async def run() -> list[Any]:
        conn = await asyncpg.connect(url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()
