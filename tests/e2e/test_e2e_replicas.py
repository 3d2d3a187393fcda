"""Three real `memora run` replicas in webhook mode on one PostgreSQL and one Chroma server.

Telegram's calls go round-robin over the replicas (what the load balancer in deploy/ does): one
learner's conversation is answered by all three in turn, and each reply is written knowing the
turns the other replicas answered (history in PostgreSQL); a memory saved through one replica is
found through another (Chroma server). Nothing of it lives in a replica's data_dir.

Then the hard way (issue 11): several chats at once, some updates delivered twice to different
replicas, and one replica killed -9 while it holds turns: every message is answered exactly
once, in its chat's order, nothing lost.
"""

from __future__ import annotations

import itertools
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot import ADMIN, WebhookBot, query
from tests.support.engines import ChromaServer
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram

pytestmark = pytest.mark.slow

LEARNER = 7001


@contextmanager
def running(
    tmp_path: Path, postgres_url: str, chroma_server: ChromaServer, **env: str
) -> Iterator[list[WebhookBot]]:
    """Three replicas on the shared stores, each with `env` on top."""
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        bots: list[WebhookBot] = []
        try:
            for n in range(3):
                bot = WebhookBot(tg, llm, tmp_path / f"data{n}", tmp_path / f"bot{n}.log")
                bot.env["MEMORA_STORAGE__DATABASE_URL"] = postgres_url
                bot.env["MEMORA_LONGTERM__CHROMA_URL"] = chroma_server.url
                bot.env["MEMORA_MEMORY__MAX_RECENT_TURNS"] = "20"
                bot.env.update(env)
                bot.next_update_id += n * 1000  # distinct ids, as Telegram's are
                bot.next_message_id += n * 1000
                bot.start()  # one after another: migrations run once, the others find them
                bots.append(bot)
            yield bots
        finally:
            for bot in bots:
                if bot.proc is not None:
                    bot.stop()


@pytest.fixture
def replicas(
    tmp_path: Path, postgres_url: str, chroma_server: ChromaServer
) -> Iterator[list[WebhookBot]]:
    with running(tmp_path, postgres_url, chroma_server) as bots:
        yield bots


def test_one_conversation_answered_round_robin_by_three_replicas(
    replicas: list[WebhookBot], tmp_path: Path, postgres_url: str
) -> None:
    llm = replicas[0].llm
    # No secret configured: the first replica made one and kept it in PostgreSQL, and all three
    # registered it; each refuses a request without it, before anything is queued.
    (secret,) = {call.get("secret_token") for call in replicas[0].tg.calls_to("setWebhook")}
    assert secret is not None and len(secret) >= 43
    forged = [replicas[n].update(f"/export {LEARNER}", ADMIN) for n in range(3)]
    assert [bot.post_with(u, "forged") for bot, u in zip(replicas, forged, strict=True)] == [
        403
    ] * 3
    ids = [u["update_id"] for u in forged]
    assert query(postgres_url, "SELECT 1 FROM inbox WHERE update_id = ANY($1)", ids) == []
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


# -- several chats, updates delivered twice, a replica killed -9 mid-turn ----------------------
CHATS = [8001 + i for i in range(6)]
BEAT = "0.3"  # the replicas' heartbeat: one silent for 0.9 s is gone




def replica_id(bot: WebhookBot) -> str:
    found = re.search(r"ready \(replica ([0-9a-f]+)\)", bot.log.read_text(errors="replace"))
    assert found, bot.output()
    return found.group(1)


def test_kill_9_mid_turn_with_updates_delivered_twice_answers_each_message_once_in_order(
    tmp_path: Path, postgres_url: str, chroma_server: ChromaServer
) -> None:
    with running(
        tmp_path, postgres_url, chroma_server, MEMORA_STORAGE__REPLICA_HEARTBEAT=BEAT
    ) as bots:
        tg, llm = bots[0].tg, bots[0].llm
        victim = bots[1]
        victim_id = replica_id(victim)
        live = list(bots)
        turn = itertools.count()
        said: dict[int, list[str]] = {chat: [] for chat in CHATS}
        delivered: list[tuple[dict[str, Any], WebhookBot]] = []

        def deliver(text: str, chat: int) -> None:
            """Telegram's next update, POSTed to the next replica (the load balancer)."""
            update = bots[0].update(text, chat)  # one update_id sequence, as Telegram's
            target = live[next(turn) % len(live)]
            assert target.post(update) == 200
            said[chat].append(text)
            delivered.append((update, target))
            if len(delivered) % 4 == 0:  # delivered again (a retry) to another replica
                assert live[next(turn) % len(live)].post(update) == 200

        # Phase 1: a slow model, so every replica is mid-turn when the victim dies.
        llm.kind_latency["reply"] = 3.0
        for r in range(2):
            for chat in CHATS:
                deliver(f"chat {chat}, message {r}", chat)
        tg.wait_for(lambda: len(llm.requests_of("reply")) >= 3, 60, "turns under way")
        assert victim.proc is not None
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=30)
        victim.proc = None
        live.remove(victim)
        # Phase 2: the conversation goes on through the others; Telegram also delivers again
        # everything the victim was given (as it would the ones it never got a 200 for).
        llm.kind_latency["reply"] = 0.05
        for r in range(2, 4):
            for chat in CHATS:
                deliver(f"chat {chat}, message {r}", chat)
        for update, target in list(delivered):
            if target is victim:
                assert live[0].post(update) == 200

        def answered() -> bool:
            return all(len(echoes(tg, chat)) >= len(said[chat]) for chat in CHATS)

        tg.wait_for(answered, 120, "every message answered")
        tg.wait_for(
            lambda: (
                not query(
                    postgres_url,
                    "SELECT 1 FROM inbox WHERE done_at IS NULL UNION ALL "
                    "SELECT 1 FROM outbox WHERE state='pending'",
                )
            ),
            60,
            "nothing left in the inbox or the outbox",
        )
        for chat in CHATS:  # exactly once each, in the order the learner sent them
            assert echoes(tg, chat) == [f"Echo: {text}" for text in said[chat]], chat
        # The victim really held updates when it died: the others took them over.
        given = [u["update_id"] for u, target in delivered if target is victim]
        owners = query(
            postgres_url,
            "SELECT update_id, owner FROM inbox WHERE update_id = ANY($1::bigint[])",
            given,
        )
        assert {r["owner"] for r in owners} - {victim_id}, "the victim had finished everything"


def echoes(tg: FakeTelegram, chat: int) -> list[str]:
    return [t for t in tg.texts(chat) if t.startswith("Echo: ")]
