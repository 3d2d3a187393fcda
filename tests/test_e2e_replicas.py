"""Three real `memora run` replicas in webhook mode on one PostgreSQL and one Chroma server.

Telegram's calls go round-robin over the replicas (what the load balancer in deploy/ does): one
learner's conversation is answered by all three in turn, and each reply is written knowing the
turns the other replicas answered (history in PostgreSQL); a memory saved through one replica is
found through another (Chroma server). Nothing of it lives in a replica's data_dir.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines import ChromaServer
from tests.fake_openai import FakeOpenAI
from tests.fake_telegram import FakeTelegram
from tests.test_webhook import WebhookBot

pytestmark = pytest.mark.slow

LEARNER = 7001


@pytest.fixture
def replicas(
    tmp_path: Path, postgres_url: str, chroma_server: ChromaServer
) -> Iterator[list[WebhookBot]]:
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        bots: list[WebhookBot] = []
        try:
            for n in range(3):
                bot = WebhookBot(tg, llm, tmp_path / f"data{n}", tmp_path / f"bot{n}.log")
                bot.env["MEMORA_STORAGE__DATABASE_URL"] = postgres_url
                bot.env["MEMORA_LONGTERM__CHROMA_URL"] = chroma_server.url
                bot.env["MEMORA_MEMORY__MAX_RECENT_TURNS"] = "20"
                bot.next_update_id += n * 1000  # distinct ids, as Telegram's are
                bot.next_message_id += n * 1000
                bot.start()  # one after another: migrations run once, the others find them
                bots.append(bot)
            yield bots
        finally:
            for bot in bots:
                if bot.proc is not None:
                    bot.stop()


def test_one_conversation_answered_round_robin_by_three_replicas(
    replicas: list[WebhookBot], tmp_path: Path
) -> None:
    llm = replicas[0].llm
    said = [f"Message {i}: I want to practise English for my trip." for i in range(6)]
    for i, text in enumerate(said):
        assert replicas[i % 3].ask(text, LEARNER) == f"Echo: {text}"
    # Each reply request carried the earlier turns, whoever answered them.
    asked = [r for r in llm.requests_of("reply") if r.last_user_message in said]
    assert len(asked) == len(said)
    for i, request in enumerate(asked):
        users = [m["content"] for m in request.messages if m["role"] == "user"]
        assert [u for u in users if u in said] == said[: i + 1]
    assert replicas[1].ask("/remember I am flying to London on 3 March", LEARNER)
    found = replicas[2].ask("/memories", LEARNER)
    assert "London on 3 March" in found
    # Exactly one answer per message, in order, and nothing kept in the replicas' folders.
    texts = [t for t in replicas[0].tg.texts(LEARNER) if t.startswith("Echo: ")]
    assert texts == [f"Echo: {t}" for t in said]
    for n in range(3):
        data = tmp_path / f"data{n}"
        assert not (data / "memora.sqlite3").exists() and not (data / "chroma").exists()
