"""The translation layer: every catalog message has its 繁體 and 简体 translation with the same
{placeholders}, the committed .mo files are the compiled .po files, the source has no message
missing from the catalogs, and the learner's language is resolved as issue 31 says."""

from __future__ import annotations

import io
import re
import string
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.mofile import read_mo, write_mo
from babel.messages.pofile import read_po

from memora import i18n
from memora.commands import COMMANDS, CommandContext, help_text, run_command
from memora.commands.debug import _hide_memories
from memora.config import LimitsConfig
from memora.engine import Engine
from memora.learner import progress, review
from memora.learner.service import ReminderFacts
from memora.llm import ChatMessage
from memora.reminders import compose as compose_reminder
from memora.shortterm.instructions import MEMORY_BLOCK, PROFILE_BLOCK
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from memora.types import ChatRef, UserRef
from memora.usage import Call, Metering, UsageLedger
from tests.support.fakes import Clock, FakeLLM, clocked_engine, forgetme
from tests.support.fortnight import ALICE, MONDAY, a_fortnight

LOCALE = i18n.LOCALE_DIR
TRANSLATED = tuple(lang for lang in i18n.LANGUAGES if lang != i18n.DEFAULT)  # en: the source
ROOT = Path(__file__).resolve().parents[1]
PRIVATE = ChatRef(7, "private")
TAIPEI = UserRef(7, "美玲", "zh-TW")  # a Telegram user whose app is in 繁體中文


def _po(lang: str) -> Catalog:
    with open(LOCALE / lang / "LC_MESSAGES" / "memora.po", "rb") as f:
        return read_po(f)


def _fields(text: str | tuple[str, ...]) -> list[str]:
    """The format fields of a message, sorted ("{mb:.1f}" counts as "mb"); of a plural message
    (a tuple of forms), the fields any form has, each form having them all (checked apart)."""
    forms = text if isinstance(text, tuple) else (text,)
    return sorted(
        {name for form in forms for _, name, _, _ in string.Formatter().parse(form) if name}
    )


def _forms(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return value if isinstance(value, tuple) else (value,)


def _messages(catalog: Catalog) -> dict[str, str]:
    return {str(m.id): str(m.string) for m in catalog if m.id}


def test_the_three_languages_have_catalogs() -> None:
    assert i18n.LANGUAGES == ("en", "zh_Hant", "zh_Hans")
    for lang in i18n.LANGUAGES:
        assert (LOCALE / lang / "LC_MESSAGES" / "memora.po").is_file()
        assert (LOCALE / lang / "LC_MESSAGES" / "memora.mo").is_file()


def test_every_message_is_translated_with_its_placeholders() -> None:
    template = _messages(_po("en"))
    assert len(template) > 150  # the commands, the engine's notices, the adapters'
    problems = []
    for lang in TRANSLATED:
        catalog = _po(lang)
        found = _messages(catalog)
        assert set(found) == set(template), f"{lang} has other msgids than en: run pybabel update"
        for message in catalog:
            if not message.id:
                continue
            msgid, forms = message.id, _forms(message.string)
            if not all(form.strip() for form in forms):
                problems.append(f"{lang}: untranslated: {msgid!r}")
            elif "fuzzy" in message.flags:
                problems.append(f"{lang}: fuzzy (check, then drop the flag): {msgid!r}")
            elif any(_fields(form) != _fields(msgid) for form in forms):
                problems.append(f"{lang}: placeholders {forms} ≠ {_fields(msgid)}: {msgid!r}")
    for message in _po("en"):  # an English msgstr, when given, keeps them too
        given = [form for form in _forms(message.string) if form]
        if message.id and any(_fields(form) != _fields(message.id) for form in given):
            problems.append(f"en: placeholders differ: {message.id!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_the_committed_mo_is_the_compiled_po(lang: str) -> None:
    """Nobody forgets `pybabel compile`: the .mo holds exactly what the .po says."""
    compiled = io.BytesIO()
    write_mo(compiled, _po(lang))
    compiled.seek(0)
    with open(LOCALE / lang / "LC_MESSAGES" / "memora.mo", "rb") as f:
        committed = read_mo(f)
    assert _messages(read_mo(compiled)) == _messages(committed), (
        f"memora/locale/{lang}/LC_MESSAGES/memora.mo is stale: "
        "run pybabel compile -D memora -d memora/locale"
    )


def test_the_catalog_has_every_message_of_the_source(tmp_path: Path) -> None:
    """A new `_()` string without `pybabel extract` + `update` fails here, not in front of a
    learner who reads Chinese."""
    pot = tmp_path / "memora.pot"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "babel.messages.frontend",
            "extract",
            "-k",
            "command:2",
            "-k",
            "N_",
            "-o",
            str(pot),
            "memora",
            "bot",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    with open(pot, "rb") as f:
        source = {str(m.id) for m in read_po(f) if m.id}
    assert source - set(_messages(_po("en"))) == set()


def test_translator_and_speaking() -> None:
    saved = "Saved: {text}"
    assert i18n.translator("zh_Hant")(saved).format(text="tea") == "已儲存：tea"
    assert i18n.translator("zh_Hans")(saved).format(text="tea") == "已保存：tea"
    assert i18n.translator("en")(saved) == saved
    assert i18n.translator("fr")(saved) == saved  # unknown: the English source
    assert i18n._(saved) == saved
    with i18n.speaking("zh_Hans"):
        assert i18n._(saved) == "已保存：{text}"
        assert i18n.current() == "zh_Hans"
    assert i18n.current() == "en"


def test_help_and_every_command_line_are_translated() -> None:
    hant, hans = help_text("zh_Hant"), help_text("zh_Hans")
    assert hant.startswith("我是 Memora，你的英文家教") and "資料" in hant
    assert hans.startswith("我是 Memora，你的英语老师") and "信息" in hans
    assert help_text("en").startswith("I'm Memora, your English tutor.")
    for lang in TRANSLATED:
        gettext = i18n.translator(lang)
        for cmd in COMMANDS.values():
            assert gettext(cmd.help) != cmd.help, f"/{cmd.name}'s help line in {lang}"


@pytest.mark.parametrize(
    ("code", "lang"),
    [
        ("zh-hant", "zh_Hant"),
        ("zh-TW", "zh_Hant"),
        ("zh-hk", "zh_Hant"),
        ("zh", "zh_Hans"),
        ("zh-hans", "zh_Hans"),
        ("zh-CN", "zh_Hans"),
        ("zh-sg", "zh_Hans"),
        ("en", "en"),
        ("en-GB", "en"),
        ("fr", None),
        ("", None),
        (None, None),
    ],
)
def test_platform_language_codes(code: str | None, lang: str | None) -> None:
    assert i18n.from_platform(code) == lang


@pytest.mark.parametrize(
    ("value", "lang"),
    [
        ("繁體中文", "zh_Hant"),
        ("Traditional Chinese", "zh_Hant"),
        ("简体中文", "zh_Hans"),
        ("Simplified Chinese", "zh_Hans"),
        ("中文", "zh_Hans"),
        ("Chinese", "zh_Hans"),
        ("國語", "zh_Hant"),
        ("English", "en"),
        ("Japanese", None),
    ],
)
def test_explanation_language(value: str, lang: str | None) -> None:
    assert i18n.from_profile(value) == lang


def test_resolution_order() -> None:
    assert i18n.resolve("zh_Hans", "繁體中文", "en") == "zh_Hans"  # /language first
    assert i18n.resolve(None, "繁體中文", "zh-CN") == "zh_Hant"  # then the profile
    assert i18n.resolve(None, "Japanese", "zh-TW") == "zh_Hant"  # then the platform
    assert i18n.resolve(None, None, "de") == "en"  # else English
    assert i18n.choice("zh-Hant") == "zh_Hant" and i18n.choice("ZH_HANS") == "zh_Hans"
    assert i18n.choice("en") == "en" and i18n.choice("klingon") is None


async def test_a_learner_hears_their_language_and_can_change_it(engine: Engine) -> None:
    async def say(name: str, arg: str = "") -> str:
        return (await run_command(engine, name, CommandContext(PRIVATE, TAIPEI, arg))).text

    assert (await say("help")).startswith("我是 Memora，你的英文家教")  # from the app's language
    assert "繁體中文" in await say("language")
    assert await say("language", "zh-Hans") == "之后我会用简体中文跟你说话。"
    assert (await say("help")).startswith("我是 Memora，你的英语老师")
    assert await say("language", "en") == "From now on I speak English to you."
    assert (await say("frobnicate")) == "I don't know /frobnicate. Try /help for the list."
    assert (await say("language", "klingon")) == "Usage: /language en|zh-Hant|zh-Hans|auto"
    assert await say("language", "auto") == "之後我會用繁體中文跟你說話。"


async def test_the_profile_language_comes_before_the_app_language(engine: Engine) -> None:
    await run_command(
        engine, "profile", CommandContext(PRIVATE, TAIPEI, "set explanation_language 简体中文")
    )
    assert await engine.language(TAIPEI) == "zh_Hans"
    await engine.people.set_language(TAIPEI.id, "en")  # /language beats the profile
    assert await engine.language(TAIPEI) == "en"
    assert await engine.language(UserRef(8, "Bob", "zh-hk")) == "zh_Hant"
    assert await engine.language(UserRef(9, "Ann")) == "en"


async def test_the_language_choice_is_exported_and_forgotten(engine: Engine) -> None:
    await engine.people.set_language(TAIPEI.id, "zh_Hans")
    exported = await engine.learner.export(TAIPEI.id, engine.state.now())
    assert exported["profile"]["bot_language"]["value"] == "zh_Hans"
    assert "bot_language" not in "\n".join(
        await engine.learner.context_lines(TAIPEI.id, engine.state.now())
    )
    gone = await forgetme(engine, PRIVATE, TAIPEI)
    assert gone.startswith("已删除我保存的所有关于你的数据")  # said before it was forgotten
    exported = await engine.learner.export(TAIPEI.id, engine.state.now())
    assert "bot_language" not in exported["profile"]
    assert await engine.language(TAIPEI) == "zh_Hant"  # back to the app's language


async def test_engine_notices_are_in_the_learners_language(engine: Engine) -> None:
    empty = await engine.handle_turn(PRIVATE, TAIPEI, "   ")
    assert (empty.ok, empty.text) == (
        False,
        "我沒有收到任何文字。請寫點什麼，或輸入 /help 看看我能做什麼。",
    )
    long = await engine.handle_turn(
        PRIVATE, TAIPEI, "x" * (engine.state.config.max_message_chars + 1)
    )
    assert not long.ok and long.text.startswith("這則訊息太長了（")


def _progress(countdown: str | None = None) -> progress.Progress:
    weeks = [date(2026, 11, 2) + timedelta(weeks=i) for i in range(4)]
    return progress.Progress(
        today=date(2026, 12, 1),
        level_history=[("2026-11-02", "B1")],
        days_studied=5,
        streak=3,
        weeks=weeks,
        messages_per_week=[1, 4, 2, 6],
        mistakes_per_week={"tense": [1, 0, 2, 1], "article": [0, 1, 0, 0]},
        vocabulary=12,
        retained=9.4,
        cards=14,
        due_now=2,
        next_due=None,
        countdown=countdown,
        difficulties=None,
    )


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_the_chart_draws_its_labels_in_the_learners_language(lang: str) -> None:
    """Chinese labels are drawn with the packaged Noto Sans CJK: a glyph missing from the font
    would be a matplotlib warning, an error under this suite's filterwarnings."""
    assert progress.cjk_font() == "Noto Sans CJK TC"  # from the cvttf-notosanscjk-regular wheel
    with i18n.speaking(lang):
        png = progress.chart(_progress("多益 900 in 41 days (2027-01-10)"))
        text = progress.render(_progress(), datetime(2026, 12, 1, tzinfo=UTC))
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    first = {"en": "Your progress", "zh_Hant": "你的進度", "zh_Hans": "你的进度"}[lang]
    assert text.startswith(first)


# -- reminders, the weekly report, /usage: the jobs resolve the learner's language themselves ----
MONDAY_NOON = datetime(2026, 11, 30, 12, 5, tzinfo=UTC)  # 20:05 in Taipei


@pytest.fixture
async def clocked(db: Database) -> AsyncIterator[Engine]:
    eng = clocked_engine(
        db, Clock(MONDAY_NOON), metering=Metering(UsageLedger(db), LimitsConfig(), {"reply": "m1"})
    )
    yield eng
    await eng.drain()


async def test_remind_and_timezone_answer_in_traditional_chinese(clocked: Engine) -> None:
    async def say(name: str, arg: str = "", chat: ChatRef = PRIVATE) -> str:
        return (await run_command(clocked, name, CommandContext(chat, TAIPEI, arg))).text

    assert (await say("remind")).startswith("你還沒有練習提醒。用 /remind 20:00（每天）")
    assert (await say("remind", "20:00 mon-fri")).splitlines() == [
        "⏰ 提醒已設定：週一至週五 20:00（UTC）；下一次：11月30日（週一）20:00。/remind off 可以"
        "停止。用 /timezone 設定你的時區，例如 /timezone Asia/Taipei。",
        "每週報告：關閉（/remind weekly 可以開啟）。",
    ]
    assert await say("timezone", "asia/taipei") == (
        "時區已設定：Asia/Taipei（那裡現在是 20:05）。你的提醒會跟著調整：Asia/Taipei 時間 "
        "週一至週五 20:00。"
    )
    assert await say("timezone") == (
        "你的時區：Asia/Taipei。用 /timezone Asia/Taipei 更改（任何 IANA 名稱都可以）。"
    )
    bad = await say("remind", "25:61")
    assert bad.startswith("我看不懂「25:61」這個時間") and "\n用法：/remind 20:00（每天）" in bad
    assert "我不認得「someday」這一天" in await say("remind", "20:00 someday")
    assert (await say("remind", "weekly fri")).startswith(
        "📅 每週報告：開啟，每週五 20:00（你的提醒時間）；下一次：12月04日（週五）20:00。"
    )
    assert (await say("remind", "off")).startswith("提醒已關閉（原本是 週一至週五 20:00）。")
    assert await say("remind", "20:00", ChatRef(-100, "group", "G")) == (
        "提醒只會發到我們的私訊：請在私訊裡傳 /remind 給我。"
    )


async def test_a_reminder_is_written_in_the_learners_language_without_a_message(
    clocked: Engine,
) -> None:
    """The job has no Telegram user to read an app language from: the profile decides."""
    learner = clocked.learner
    for field, value in (
        ("explanation_language", "简体中文"),
        ("goal", "TOEIC 900"),
        ("goal_date", "2027-01-10"),
    ):
        await learner.profiles.set_field(7, field, value, source="you", now=MONDAY_NOON)
    assert await clocked.reminders.text(7, MONDAY_NOON) == (
        "⏰ 该练习英语啦。\n• 目标：TOEIC 900，还有 41 天（2027-01-10）\n"
        "发一条消息或语音给我就能开始。（/remind off 可以停止这些提醒。）"
    )
    facts = ReminderFacts("UTC", 3, None, None, "tense", 5)
    with i18n.speaking("zh_Hans"):
        assert compose_reminder(facts, "美玲").splitlines()[:4] == [
            "⏰ 美玲，你好！该练习英语啦。",
            "• 有 3 张复习卡到期 — /review",
            "• 可以加强的地方：tense（你最近最常犯的错误）",
            "• 🔥 已连续 5 天，继续保持！",
        ]
    await clocked.people.set_language(7, "en")  # /language beats the explanation language
    assert (await clocked.reminders.text(7, MONDAY_NOON)).startswith(
        "⏰ Time for your English practice.\n• Goal: TOEIC 900 in 41 days (2027-01-10)"
    )


async def test_the_models_context_stays_english_for_a_chinese_learner(clocked: Engine) -> None:
    profiles = clocked.learner.profiles
    for field, value in (("goal", "TOEIC 900"), ("goal_date", "2027-01-10")):
        await profiles.set_field(7, field, value, source="you", now=MONDAY_NOON)
    with i18n.speaking("zh_Hant"):
        lines = await clocked.learner.context_lines(7, MONDAY_NOON)
        shown = (await run_command(clocked, "profile", CommandContext(PRIVATE, TAIPEI, ""))).text
    assert "- goal: TOEIC 900 in 41 days (2027-01-10)" in lines
    assert "• 倒數：TOEIC 900，還有 41 天（2027-01-10）" in shown.splitlines()


async def test_the_weekly_report_is_in_traditional_chinese(db: Database) -> None:
    clock = Clock(MONDAY)
    engine = clocked_engine(db, clock)
    await a_fortnight(engine)
    await engine.people.set_language(ALICE, "zh_Hant")
    rep = await engine.weekly.report(ALICE, MONDAY)  # as the weekly job asks: no language given
    assert rep.chart is not None and rep.chart.startswith(b"\x89PNG")
    lines = rep.text.splitlines()
    assert lines[:7] == [
        "📅 你這一週的英文學習（11月30日 – 12月6日：今天之前的 7 天）",
        "• 訊息：5（上週 4，↑1）",
        "• 學習天數：7 天中有 3 天（上週 1）",
        "• 錯誤：3（上週 3，持平）",
        "    tense：2（之前 3，減少 ↓）",
        "    article：1（之前 0，增加 ↑）",
        "• 新單字：2（上週 1）",
    ]
    assert "• 目標：TOEIC 900，還有 34 天（2027-01-10）" in lines
    assert lines[-1] == "（/remind weekly off 可以停止每週報告。）"
    shown = await run_command(engine, "remind", CommandContext(PRIVATE, UserRef(ALICE, "A"), ""))
    assert "每週報告：關閉（/remind weekly 可以開啟）。" in shown.text
    await engine.drain()


async def test_usage_is_in_simplified_chinese_for_a_chinese_admin(clocked: Engine) -> None:
    assert clocked.state.metering is not None
    await clocked.state.metering.add(9, MONDAY_NOON, [Call("reply", "m1", 100, 20)], turns=1)
    admin = UserRef(7, "管理员", "zh-CN")
    report = await run_command(clocked, "usage", CommandContext(PRIVATE, admin, "", True))
    assert report.text.splitlines() == [
        "用量，最近 7 天（自 2026-11-24 起，UTC）：1 位学习者，120 个 token",
        "• 9: 1 轮对话 · 120 个 token (reply 120)",
        "[pricing] 里没有这些模型的价格：m1（用到它们的地方不显示费用）",
    ]
    english = await run_command(
        clocked, "usage", CommandContext(PRIVATE, UserRef(8, "Ann"), "1", True)
    )
    assert english.text.startswith("Usage, today (since 2026-11-30, UTC): 1 learner, 120 tokens")


def test_another_members_hidden_context_is_said_in_the_readers_language() -> None:
    memories = ChatMessage("developer", MEMORY_BLOCK + "\n- likes tea\n- lives in Taipei")
    profile = ChatMessage("developer", PROFILE_BLOCK + "\n- level: B2")
    with i18n.speaking("zh_Hant"):
        assert _hide_memories(memories, "").content == (
            "（另一位成員 的 2 則長期記憶，已隱藏：只有本人看得到）"
        )
        assert _hide_memories(profile, "Bob").content == "（Bob 的學習檔案，已隱藏）"
    assert _hide_memories(profile, "Bob").content == "(the learner profile of Bob, hidden)"


async def test_a_reminder_speaks_the_app_language_the_learner_last_used(db: Database) -> None:
    """No /language and no explanation language: the reminder job, which has no message, speaks
    the language the learner's app named last (kept per user, gone with /forgetme)."""
    engine = Engine(db=db, llm=FakeLLM(), counter=LocalTokenCounter())
    now = engine.state.now()
    taiwan = UserRef(7, "Mei", "zh-TW")
    assert await engine.language(taiwan) == "zh_Hant"
    assert await engine.learner.language(7, now) == "zh_Hant"  # the job: no platform hint
    assert (await engine.learner.export(7, now))["app_language"] == "zh-TW"
    await engine.forget_user(7)
    assert await engine.learner.profiles.app_language(7) is None
    assert await engine.learner.language(7, now) == "en"


# -- plurals: every count goes through gettext's plural forms (issue 43) ----------------------
COUNTED = re.compile(
    r"\{[^{}]+\}(?:\s+[\w'-]+){0,2}\s+(?:days|weeks|hours|minutes|seconds|months|years|"
    r"memories|messages|words|cards|mistakes|turns|tokens|learners|times|questions|exercises|"
    r"answers|characters|items|reviews|entries|fields|scenes|people|members|reminders|results|"
    r"lines|facts|changes)\b|\(s\)"
)


def test_no_count_stands_beside_a_fixed_plural_outside_ngettext() -> None:
    """A message that puts a number before a plural noun ("{n} words") must be a plural entry
    (ngettext), or "1 words" reaches a learner; "learner(s)" is no way out either."""
    fixed = [str(m.id) for m in _po("en") if m.id and not m.pluralizable and COUNTED.search(m.id)]
    assert fixed == []
    assert COUNTED.search("• Vocabulary: {words} words, ≈{retained} retained now")  # it sees one
    assert not COUNTED.search("{goal} tomorrow ({date})")


def test_the_chinese_catalogs_have_one_plural_form_and_english_two() -> None:
    for lang, forms in (("en", 2), ("zh_Hant", 1), ("zh_Hans", 1)):
        catalog = _po(lang)
        assert catalog.num_plurals == forms
        plural = [m for m in catalog if m.id and m.pluralizable]
        assert len(plural) > 30  # the counts of the commands, the reports and the notices
        if lang != "en":
            assert all(len(m.string) == 1 and m.string[0] for m in plural), lang


def test_counts_read_right_with_one_and_with_two() -> None:
    now = datetime(2026, 12, 1, 9, tzinfo=UTC)
    one = replace(_progress(), streak=1, vocabulary=1)
    two = replace(_progress(), streak=2, vocabulary=2)
    text_one, text_two = progress.render(one, now), progress.render(two, now)
    assert "streak: 1 day" in text_one and "Vocabulary: 1 word," in text_one
    assert "streak: 2 days" in text_two and "Vocabulary: 2 words," in text_two
    assert review.until(now + timedelta(days=1), now) == "in 1 day"
    assert review.until(now + timedelta(hours=2), now) == "in 2 hours"
    facts = ReminderFacts("UTC", 1, None, None, None, 0)
    assert "• 1 review card due — /review" in compose_reminder(facts, "Mei")
    with i18n.speaking("zh_Hant"):
        assert "1 天" in progress.render(one, now) and "天s" not in progress.render(two, now)
        assert review.until(now + timedelta(days=1), now) == "1 天後"
        assert review.until(now + timedelta(days=2), now) == "2 天後"
    with i18n.speaking("zh_Hans"):
        assert review.until(now + timedelta(minutes=1), now) == "1 分钟后"
