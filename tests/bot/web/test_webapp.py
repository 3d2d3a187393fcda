"""The learner's page (issue 40) over real HTTP: uvicorn on 127.0.0.1 serving bot/web over an
engine with real SQLite or PostgreSQL (the `db` fixture runs both), real Chroma and the real
local embedder; requests signed as Telegram signs initData."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from bot.web import WebServer, sign
from memora.commands import CommandContext, run_command
from memora.config import (
    LimitsConfig,
    ModelPrice,
    PricingConfig,
    Settings,
    TelegramConfig,
    WebAppConfig,
)
from memora.engine import Engine
from memora.learner.model import ExtractedWord
from memora.shortterm.instructions import MEMORY_BLOCK
from memora.types import ChatRef, UserRef
from memora.usage import Call, Metering, UsageLedger
from tests.support.disk import files_holding
from tests.support.fakes import FakeLLM

TOKEN = "123456:TEST-token-for-the-web-app"
ALICE, BOB, ADMIN = 1001, 2002, 9009
ALICE_REF = UserRef(ALICE, "Alice")
MARKER = "Zorblaxquintet"
NO_BUTTON = (
    "web app: [webapp] public_url is empty, so the bot offers no 'Open my memory' button "
    "(Telegram opens only a public https address); `memora app-url USER_ID` prints a signed "
    "link for testing"
)


def init_data(user_id: int, *, token: str = TOKEN, age: float = 0, lang: str = "en") -> str:
    user = {"id": user_id, "first_name": f"User{user_id}", "language_code": lang}
    return sign(user, token, auth_date=int(time.time() - age))


def auth(user_id: int, **kw: object) -> dict[str, str]:
    return {"Authorization": "tma " + init_data(user_id, **kw)}  # type: ignore[arg-type]


def settings(allowed: tuple[int, ...] = (), **webapp: object) -> Settings:
    return Settings(
        telegram=TelegramConfig(token=TOKEN, admin_ids=[ADMIN], allowed_user_ids=list(allowed)),
        webapp=WebAppConfig(enabled=True, port=0, **webapp),  # type: ignore[arg-type]
    )


def client_of(server: WebServer) -> httpx.AsyncClient:
    """Straight to the server on 127.0.0.1 (no proxy from the environment)."""
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", trust_env=False)


@pytest.fixture
async def web(mem_engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    server = WebServer(mem_engine, settings())
    await server.start()
    try:
        async with client_of(server) as client:
            yield client
    finally:
        await server.stop()


async def _alice_remembers(engine: Engine) -> None:
    chat, user = ChatRef(ALICE), UserRef(ALICE, "Alice")
    await engine.handle_turn(chat, user, "I live in Tainan with my cat Mochi", message_id=77)
    await engine.queries.remember(chat, user, "Lives in Tainan", message_id=77)
    await engine.queries.remember(chat, user, f"Her cat is called {MARKER}")
    await engine.drain()


async def test_a_valid_signature_shows_the_learners_memories_and_profile(
    mem_engine: Engine, web: httpx.AsyncClient
) -> None:
    await _alice_remembers(mem_engine)
    (tainan,) = [m for m in await mem_engine.queries.memories(ALICE) if m.text == "Lives in Tainan"]
    assert await mem_engine.queries.pin_memory(ALICE, tainan.id, True)  # /pin (issue 42)
    r = await web.get("/app/api/me", headers=auth(ALICE))
    assert r.status_code == 200
    me = r.json()
    texts = {m["text"]: m for m in me["memories"]}
    assert set(texts) == {"Lives in Tainan", f"Her cat is called {MARKER}"}
    assert texts["Lives in Tainan"]["source_message"] == "I live in Tainan with my cat Mochi"
    assert texts["Lives in Tainan"]["created_at"]
    assert [
        m["pinned"] for m in (texts["Lives in Tainan"], texts[f"Her cat is called {MARKER}"])
    ] == [
        True,
        False,
    ]
    assert {f["field"] for f in me["profile"]} >= {"level", "goal"}
    assert me["is_admin"] is False
    assert r.headers["cache-control"] == "no-store"
    page = await web.get("/app/")
    assert page.status_code == 200 and "telegram-web-app.js" in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self' https://telegram.org;" in csp and "default-src 'none'" in csp


async def test_a_forged_an_expired_or_a_missing_signature_is_refused(
    mem_engine: Engine, web: httpx.AsyncClient
) -> None:
    await _alice_remembers(mem_engine)
    forged = auth(ALICE, token="654321:another-bots-token")
    expired = auth(ALICE, age=25 * 3600)  # the default max_age is 24 hours
    tampered = {"Authorization": "tma " + init_data(BOB).replace(str(BOB), str(ALICE))}
    for headers in (forged, expired, tampered, {}, {"Authorization": "Bearer x"}):
        r = await web.get("/app/api/me", headers=headers)
        assert r.status_code == 401, headers
        assert set(r.json()) == {"error"} and "open it again" in r.json()["error"]
        assert MARKER not in r.text
    zh = await web.get("/app/api/me", headers={**expired, "Accept-Language": "zh-TW"})
    assert zh.status_code == 401 and "聊天" in zh.json()["error"]  # asked to reopen, in 繁體


async def test_another_learners_memory_id_is_refused_and_nothing_is_deleted(
    mem_engine: Engine, web: httpx.AsyncClient
) -> None:
    await _alice_remembers(mem_engine)
    (alices,) = [m for m in await mem_engine.queries.memories(ALICE) if MARKER in m.text]
    for method, path in (
        ("DELETE", f"/app/api/memories/{alices.id}"),
        ("PATCH", f"/app/api/memories/{alices.id}"),
        ("POST", f"/app/api/memories/{alices.id}/undo"),
        ("PUT", f"/app/api/memories/{alices.id}/pin"),
        ("DELETE", f"/app/api/memories/{alices.id}/pin"),
    ):
        r = await web.request(method, path, headers=auth(BOB), json={"text": "Bob was here"})
        assert r.status_code == 404, (method, r.text)
    kept = [
        (m.text, m.pinned_at) for m in await mem_engine.queries.memories(ALICE) if m.id == alices.id
    ]
    assert kept == [(alices.text, None)]


async def test_a_deleted_memory_is_in_no_file_and_not_in_the_next_turns_context(
    mem_engine: Engine, web: httpx.AsyncClient, llm: FakeLLM, tmp_path: Path
) -> None:
    await _alice_remembers(mem_engine)
    (memory,) = [m for m in await mem_engine.queries.memories(ALICE) if MARKER in m.text]
    if mem_engine.db.connection.dialect == "sqlite":  # PostgreSQL keeps its files outside data_dir
        assert files_holding(tmp_path, MARKER), "the memory is on disk before"
    question = "What is my cat called?"
    await mem_engine.handle_turn(ChatRef(ALICE), UserRef(ALICE), question)
    assert MARKER in " ".join(m.content for m in llm.calls[-1].messages), "used before"
    await mem_engine.queries.reset_chat(
        ALICE
    )  # the conversation that quoted it goes; the memory stays
    r = await web.delete(f"/app/api/memories/{memory.id}", headers=auth(ALICE))
    assert r.status_code == 200
    assert [m.text for m in await mem_engine.queries.memories(ALICE)] == ["Lives in Tainan"]
    assert files_holding(tmp_path, MARKER) == []
    await mem_engine.handle_turn(ChatRef(ALICE), UserRef(ALICE), question)
    assert MARKER not in " ".join(m.content for m in llm.calls[-1].messages)
    again = await web.delete(f"/app/api/memories/{memory.id}", headers=auth(ALICE))
    assert again.status_code == 404


async def test_an_edit_is_what_the_next_turns_context_uses_and_undo_brings_it_back(
    mem_engine: Engine, web: httpx.AsyncClient, llm: FakeLLM
) -> None:
    await _alice_remembers(mem_engine)
    (memory,) = [m for m in await mem_engine.queries.memories(ALICE) if m.text == "Lives in Tainan"]
    r = await web.patch(
        f"/app/api/memories/{memory.id}", headers=auth(ALICE), json={"text": "Lives in Kaohsiung"}
    )
    assert r.status_code == 200 and r.json()["text"] == "Lives in Kaohsiung"
    await mem_engine.handle_turn(ChatRef(ALICE), UserRef(ALICE), "Where do I live?")
    sent = " ".join(m.content for m in llm.calls[-1].messages)
    assert "Lives in Kaohsiung" in sent and "Lives in Tainan" not in sent
    hits = await mem_engine.queries.search_memories(ALICE, "Kaohsiung")
    assert hits.hits[0].memory.text == "Lives in Kaohsiung"  # re-indexed: found by its new words
    secret = await web.patch(
        f"/app/api/memories/{memory.id}", headers=auth(ALICE), json={"text": "sk-" + "a1" * 20}
    )
    assert secret.status_code == 400
    undo = await web.post(f"/app/api/memories/{memory.id}/undo", headers=auth(ALICE))
    assert undo.status_code == 200 and undo.json()["text"] == "Lives in Tainan"


async def test_a_pin_from_the_page_puts_the_memory_first_in_the_next_turns_context(
    mem_engine: Engine, web: httpx.AsyncClient, llm: FakeLLM
) -> None:
    await _alice_remembers(mem_engine)
    mine = {m.text: m for m in await mem_engine.queries.memories(ALICE)}
    tainan, cat = mine["Lives in Tainan"], mine[f"Her cat is called {MARKER}"]
    question = "What is my cat called?"

    async def first_memory() -> str:
        await mem_engine.handle_turn(ChatRef(ALICE), UserRef(ALICE), question)
        block = next(
            m.content for m in llm.calls[-1].messages if m.content.startswith(MEMORY_BLOCK)
        )
        return block.removeprefix(MEMORY_BLOCK + "<memories>\n").splitlines()[0]

    assert await first_memory() == f"- {cat.text}"  # the best match for the question
    r = await web.put(f"/app/api/memories/{tainan.id}/pin", headers=auth(ALICE))
    assert r.status_code == 200 and r.json()["message"].startswith("Pinned: Lives in Tainan.")
    assert "only the newest" not in r.json()["message"]
    assert await first_memory() == f"- {tainan.text}"
    listed = await run_command(
        mem_engine, "memories", CommandContext(ChatRef(ALICE), ALICE_REF, "")
    )
    marked = {
        line.split(". ", 1)[1].split(" [")[0]: "📌" in line
        for line in listed.text.splitlines()
        if ". " in line and " [" in line
    }
    assert marked == {tainan.text: True, cat.text: False}
    me = (await web.get("/app/api/me", headers=auth(ALICE, lang="zh-TW"))).json()
    assert [m["pinned"] for m in me["memories"] if m["id"] == tainan.id] == [True]
    assert (me["labels"]["pin"], me["labels"]["unpin"]) == ("釘選", "取消釘選")
    # pins over the memory budget: said as /pin says it, in the learner's language
    mem_engine.state.config = replace(
        mem_engine.state.config, memory_tokens=14
    )  # one memory's worth
    crowded = await web.put(f"/app/api/memories/{cat.id}/pin", headers=auth(ALICE, lang="zh-CN"))
    assert crowded.status_code == 200 and "只有最新的 1 条放得下" in crowded.json()["message"]

    r = await web.delete(f"/app/api/memories/{cat.id}/pin", headers=auth(ALICE))
    assert r.status_code == 200 and r.json()["message"] == f"Unpinned: {cat.text}"
    again = await web.delete(f"/app/api/memories/{cat.id}/pin", headers=auth(ALICE))
    assert again.status_code == 400 and again.json()["error"] == "That memory is not pinned."
    pinned = [m.text for m in await mem_engine.queries.memories(ALICE) if m.pinned_at]
    assert pinned == [tainan.text]


async def test_profile_entries_export_and_forget_me_are_the_cores_own(
    mem_engine: Engine, web: httpx.AsyncClient
) -> None:
    await _alice_remembers(mem_engine)
    learner, now = mem_engine.learner, mem_engine.state.now()
    word = ExtractedWord(term="commute", meaning="travel to work", example="I commute by bus.")
    await learner.add_words(ALICE, [word], now=now)
    r = await web.put("/app/api/profile/level", headers=auth(ALICE), json={"value": "b2"})
    assert r.status_code == 200
    bad = await web.put("/app/api/profile/level", headers=auth(ALICE), json={"value": "Z9"})
    assert bad.status_code == 400
    me = (await web.get("/app/api/me", headers=auth(ALICE))).json()
    (level,) = [f for f in me["profile"] if f["field"] == "level"]
    assert (level["value"], level["source"]) == ("B2", "you")
    assert [h["new"] for h in level["history"]] == ["B2"]
    (word,) = me["words"]
    assert word["term"] == "commute" and word["next_review"]
    assert (await web.delete(f"/app/api/words/{word['id']}", headers=auth(BOB))).status_code == 404
    assert (await web.delete(f"/app/api/words/{word['id']}", headers=auth(ALICE))).is_success
    assert await learner.entries.words(ALICE) == []
    assert (await web.delete("/app/api/profile/level", headers=auth(ALICE))).is_success
    assert (await mem_engine.learner.profile(ALICE, now)).get("level") is None

    export = await web.get("/app/api/export", headers=auth(ALICE))
    assert "attachment" in export.headers["content-disposition"]
    data = export.json()
    assert {m["text"] for m in data["memories"]} >= {"Lives in Tainan"}
    assert data["private_chats"][0]["history"][0]["content"] == "I live in Tainan with my cat Mochi"
    assert data["learner"]["profile_history"]

    refused = await web.post("/app/api/forget-me", headers=auth(ALICE), json={})
    assert refused.status_code == 400 and await mem_engine.queries.memories(ALICE)
    gone = await web.post("/app/api/forget-me", headers=auth(ALICE), json={"confirm": "forget me"})
    assert gone.status_code == 200 and gone.json()["deleted"]["memories"] == 2
    assert await mem_engine.queries.memories(ALICE) == []
    assert (await mem_engine.export.export_learner(ALICE))["private_chats"] == []


async def test_the_usage_page_is_for_admins_only(
    mem_engine: Engine, web: httpx.AsyncClient
) -> None:
    price = PricingConfig(models={"gpt-x": ModelPrice(input=1.0, output=2.0)})
    mem_engine.state.metering = Metering(UsageLedger(mem_engine.db), LimitsConfig(), {}, price)
    now = mem_engine.state.now()
    await mem_engine.state.metering.add(ALICE, now, [Call("reply", "gpt-x", 1000, 500)], turns=1)
    assert (await web.get("/app/api/usage", headers=auth(ALICE))).status_code == 403
    me = (await web.get("/app/api/me", headers=auth(ADMIN))).json()
    assert me["is_admin"] is True and me["labels"]["usage"] == "Usage"
    r = await web.get("/app/api/usage?days=7", headers=auth(ADMIN))
    assert r.status_code == 200
    days = r.json()["days"]
    assert len(days) == 7 and days[-1]["day"] == now.date().isoformat()
    assert (days[-1]["tokens"], days[-1]["cost"]) == (1500, pytest.approx(0.002))
    assert [d["tokens"] for d in days[:-1]] == [0] * 6
    assert str(ALICE) in r.json()["table"] and "1,500" in r.json()["table"]


@pytest.mark.parametrize("db", ["sqlite"], indirect=True)  # no storage of its own
async def test_a_learner_is_rate_limited_and_the_allow_list_holds(mem_engine: Engine) -> None:
    server = WebServer(mem_engine, settings((ALICE,), requests_per_minute=3))
    await server.start()
    try:
        async with client_of(server) as client:
            codes = [(await client.get("/app/api/me", headers=auth(ALICE))).status_code]
            codes += [(await client.get("/app/api/me", headers=auth(ALICE))).status_code]
            codes += [(await client.get("/app/api/me", headers=auth(ALICE))).status_code]
            codes += [(await client.get("/app/api/me", headers=auth(ALICE))).status_code]
            other = await client.get("/app/api/me", headers=auth(ADMIN))
            outsider = await client.get("/app/api/me", headers=auth(BOB))
    finally:
        await server.stop()
    assert codes == [200, 200, 200, 429]
    assert other.status_code == 200  # per learner
    assert outsider.status_code == 403  # [telegram] allowed_user_ids: not Bob


def test_signed_init_data_round_trips() -> None:
    from bot.web.auth import Refused, verify

    data = init_data(ALICE, lang="zh-TW")
    opened = verify(data, TOKEN, max_age=60)
    assert (opened.user.id, opened.user.language) == (ALICE, "zh-TW")
    with pytest.raises(Refused):
        verify(data + "&extra=1", TOKEN, max_age=60)  # a field not signed
    with pytest.raises(Refused):
        verify(data, TOKEN, max_age=60, now=time.time() + 120)
    assert json.loads(dict(httpx.QueryParams(data))["user"])["id"] == ALICE


def test_app_url_prints_a_link_signed_with_the_configured_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from urllib.parse import parse_qs, urlsplit

    from bot.cli import main
    from bot.web.auth import Refused, verify

    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("MEMORA_WEBAPP__PUBLIC_URL", "https://bot.example.org/app/")
    assert main(["app-url", str(ALICE), "--language", "zh-TW"]) == 0
    link = urlsplit(capsys.readouterr().out.strip())
    assert (link.scheme, link.netloc, link.path, link.query) == (
        "https",
        "bot.example.org",
        "/app/",
        "",
    )
    (data,) = parse_qs(link.fragment)["tgWebAppData"]
    opened = verify(data, TOKEN, max_age=60)
    assert (opened.user.id, opened.user.language) == (ALICE, "zh-TW")
    with pytest.raises(Refused):
        verify(data, "654321:another-bots-token", max_age=60)


@pytest.mark.parametrize("db", ["sqlite"], indirect=True)  # no storage of its own
async def test_without_a_public_url_no_button_is_offered_and_the_log_says_so_once(
    mem_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    from bot.telegram.webapp import WebApp, button, page_url

    polling = settings()
    web = WebApp(polling)
    assert web.url == "" and button(web.url) is None
    with caplog.at_level(logging.INFO, logger="bot.telegram.webapp"):
        await web.start(None, mem_engine)  # type: ignore[arg-type]  # no button: no Bot call
    await web.stop()
    assert [r.getMessage() for r in caplog.records].count(NO_BUTTON) == 1
    hook = TelegramConfig(token=TOKEN, mode="webhook", webhook_url="https://x.example/tg/hook")
    webhook = Settings(telegram=hook, webapp=WebAppConfig(enabled=True))
    assert page_url(webhook) == "https://x.example/app/"  # behind the same reverse proxy
    assert page_url(Settings(telegram=hook)) == ""  # [webapp] enabled = false
