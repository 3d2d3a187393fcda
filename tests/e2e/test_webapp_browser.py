"""The learner's page served by the real `memora run` (issue 40): the bot offers it in private
chats only, and a real browser (headless Chromium from Debian's chromium and chromium-driver,
driven by selenium) opens a signed link, sees the memories, deletes one and sees it go, and
reads the page in 繁體 for a zh-TW learner. One bot process and one browser session."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from bot.web.auth import sign
from tests.support.bot import WAIT, BotProcess, ask, bot_over_fakes
from tests.support.fake_telegram import FakeTelegram

pytestmark = pytest.mark.slow

PUBLIC = "https://memora.example.org/app/"
TURTLE = "Zorblaxquintet"
ALICE = FakeTelegram.DEFAULT_USER_ID
MEI = 7007  # a zh-TW learner
CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromedriver")  # Debian's chromium, chromium-driver


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    tmp = tmp_path_factory.mktemp("webapp")
    with bot_over_fakes(tmp) as (tg, _llm, process):
        process.env.update(
            MEMORA_WEBAPP__ENABLED="true",
            MEMORA_WEBAPP__PORT=str(_free_port()),
            MEMORA_WEBAPP__PUBLIC_URL=PUBLIC,
        )
        process.start()
        yield process
        assert process.stop() == 0, process.output()
    log = process.output()
    assert "Traceback" not in log, log
    assert tg.token not in log and "tgWebAppData" not in log and "hash=" not in log


def local(bot: BotProcess) -> str:
    return f"http://127.0.0.1:{bot.env['MEMORA_WEBAPP__PORT']}"


def signed(bot: BotProcess, user_id: int, language: str = "en") -> str:
    user = {"id": user_id, "first_name": "Learner", "language_code": language}
    return sign(user, bot.tg.token)


def _web_app_urls(message: dict[str, Any]) -> list[str]:
    rows = (message.get("reply_markup") or {}).get("inline_keyboard", [])
    return [b["web_app"]["url"] for row in rows for b in row if "web_app" in b]


def test_memora_run_serves_the_page_and_offers_it_in_private_chats_only(bot: BotProcess) -> None:
    tg = bot.tg
    (menu,) = tg.calls_to("setChatMenuButton")  # the default: private chats only
    assert "chat_id" not in menu and menu["menu_button"]["web_app"]["url"] == PUBLIC
    assert menu["menu_button"]["text"] == "Open my memory"
    ask(tg, "/help", user_id=MEI, first_name="Mei", language_code="zh-TW")
    (_default, mine) = tg.calls_to("setChatMenuButton")  # hers, in 繁體
    assert int(mine["chat_id"]) == MEI and mine["menu_button"]["text"] == "打開我的記憶"
    assert "Saved" in ask(tg, f"/remember My turtle is called {TURTLE}")
    for command in ("/memories", "/start"):
        update = tg.user_sends(command)
        tg.wait_messages(count=1, after=update, timeout=WAIT)
        assert _web_app_urls(tg.sent_messages(ALICE)[-1]) == [PUBLIC], command
    update = tg.user_sends("/memories", chat_type="supergroup", chat_title="Study group")
    tg.wait_messages(count=1, after=update, timeout=WAIT)
    group = [m for m in tg.sent_messages() if m["chat"]["id"] != ALICE]
    assert group and all(_web_app_urls(m) == [] for m in group)

    page = httpx.get(local(bot) + "/app/", trust_env=False)
    assert page.status_code == 200 and "content-security-policy" in page.headers
    me = httpx.get(
        local(bot) + "/app/api/me",
        headers={"Authorization": "tma " + signed(bot, ALICE)},
        trust_env=False,
    )
    assert me.status_code == 200
    assert any(TURTLE in m["text"] for m in me.json()["memories"])
    assert httpx.get(local(bot) + "/app/api/me", trust_env=False).status_code == 401


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not all(shutil.which(p) for p in CHROMIUM):
        message = (
            "the browser test needs Debian's chromium and chromium-driver: "
            "apt-get install -y chromium chromium-driver"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM[0]
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=430,900",  # a phone
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
        # the network is closed: Telegram's script fails at once, and the page reads the
        # initData from its fragment
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMIUM[1]))
    try:
        yield driver
    finally:
        driver.quit()


def _open(driver: Any, bot: BotProcess, user_id: int, language: str = "en") -> None:
    link = local(bot) + "/app/#" + urlencode({"tgWebAppData": signed(bot, user_id, language)})
    driver.get("about:blank")  # another fragment alone would not load the page again
    driver.get(link)


def _memories(driver: Any) -> list[str]:
    return [e.text for e in driver.find_elements("css selector", "article.memory .text")]


def test_the_page_in_a_real_browser(bot: BotProcess, browser: Any) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    tg = bot.tg
    ask(tg, "/remember I practise English every morning")
    _open(browser, bot, ALICE)
    wait = WebDriverWait(browser, WAIT)
    try:
        wait.until(lambda d: len(_memories(d)) == 2)
    except Exception:
        print(browser.page_source)  # shown with the failure
        raise
    assert any(TURTLE in t for t in _memories(browser))
    if os.environ.get("MEMORA_SCREENSHOT"):  # the README's picture: docs/webapp.png
        browser.save_screenshot(os.environ["MEMORA_SCREENSHOT"])
    (turtle,) = [
        card
        for card in browser.find_elements("css selector", "article.memory")
        if TURTLE in card.text
    ]
    turtle.find_element("css selector", "button.delete").click()
    wait.until(lambda d: d.switch_to.alert).accept()  # deleted means gone: asked first
    wait.until(lambda d: len(_memories(d)) == 1)
    assert _memories(browser) == ["I practise English every morning"]
    assert TURTLE not in ask(tg, "/memories")  # the chat agrees at once
    browser.find_element("css selector", "article.memory button.pin").click()
    notice = wait.until(lambda d: d.find_element("id", "notice"))
    assert notice.text.startswith("Pinned: I practise English every morning.")
    assert browser.find_element("css selector", "article.memory .badge").text == "Pinned"
    assert browser.find_element("css selector", "article.memory button.pin").text == "Unpin"
    assert "📌" in ask(tg, "/memories")  # /pin's own mark

    ask(tg, "/remember 我住在台南", user_id=MEI, first_name="Mei", language_code="zh-TW")
    _open(browser, bot, MEI, "zh-TW")
    wait.until(lambda d: _memories(d) == ["我住在台南"])
    assert browser.find_element("id", "title").text == "我的記憶"
    tabs = [t.text for t in browser.find_elements("css selector", "nav button")]
    assert tabs[:5] == ["記憶", "個人檔案", "錯誤", "單字", "進度"]
    assert browser.find_element("id", "forget-me").text == "忘記我"
    assert browser.execute_script("return document.documentElement.lang") == "zh-Hant"
