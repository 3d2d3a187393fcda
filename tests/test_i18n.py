"""The translation layer: every catalog message has its 繁體 and 简体 translation with the same
{placeholders}, the committed .mo files are the compiled .po files, the source has no message
missing from the catalogs, and the learner's language is resolved as issue 31 says."""

from __future__ import annotations

import io
import string
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.mofile import read_mo, write_mo
from babel.messages.pofile import read_po

from memora import i18n
from memora.commands import COMMANDS, CommandContext, help_text, run_command
from memora.engine import Engine
from memora.learner import progress
from memora.types import ChatRef, UserRef

LOCALE = i18n.LOCALE_DIR
TRANSLATED = tuple(lang for lang in i18n.LANGUAGES if lang != i18n.DEFAULT)  # en: the source
ROOT = Path(__file__).resolve().parents[1]
PRIVATE = ChatRef(7, "private")
TAIPEI = UserRef(7, "美玲", "zh-TW")  # a Telegram user whose app is in 繁體中文


def _po(lang: str) -> Catalog:
    with open(LOCALE / lang / "LC_MESSAGES" / "memora.po", "rb") as f:
        return read_po(f)


def _fields(text: str) -> list[str]:
    """The format fields of a message, sorted ("{mb:.1f}" counts as "mb")."""
    return sorted(name for _, name, _, _ in string.Formatter().parse(text) if name is not None)


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
            msgid, msgstr = str(message.id), str(message.string)
            if not msgstr.strip():
                problems.append(f"{lang}: untranslated: {msgid!r}")
            elif "fuzzy" in message.flags:
                problems.append(f"{lang}: fuzzy (check, then drop the flag): {msgid!r}")
            elif _fields(msgstr) != _fields(msgid):
                problems.append(
                    f"{lang}: placeholders {_fields(msgstr)} ≠ {_fields(msgid)}: {msgid!r}"
                )
    for msgid, msgstr in template.items():  # an English msgstr, when given, keeps them too
        if msgstr and _fields(msgstr) != _fields(msgid):
            problems.append(f"en: placeholders differ: {msgid!r}")
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
    await engine.set_language(TAIPEI.id, "en")  # /language beats the profile
    assert await engine.language(TAIPEI) == "en"
    assert await engine.language(UserRef(8, "Bob", "zh-hk")) == "zh_Hant"
    assert await engine.language(UserRef(9, "Ann")) == "en"


async def test_the_language_choice_is_exported_and_forgotten(engine: Engine) -> None:
    await engine.set_language(TAIPEI.id, "zh_Hans")
    exported = await engine.learner.store.export(TAIPEI.id, engine.clock())
    assert exported["profile"]["bot_language"]["value"] == "zh_Hans"
    assert "bot_language" not in "\n".join(
        await engine.learner.context_lines(TAIPEI.id, engine.clock())
    )
    gone = await run_command(engine, "forgetme", CommandContext(PRIVATE, TAIPEI, ""))
    assert gone.text.startswith("已删除我保存的所有关于你的数据")  # said before it was forgotten
    exported = await engine.learner.store.export(TAIPEI.id, engine.clock())
    assert "bot_language" not in exported["profile"]
    assert await engine.language(TAIPEI) == "zh_Hant"  # back to the app's language


async def test_engine_notices_are_in_the_learners_language(engine: Engine) -> None:
    empty = await engine.handle_turn(PRIVATE, TAIPEI, "   ")
    assert (empty.ok, empty.text) == (
        False,
        "我沒有收到任何文字。請寫點什麼，或輸入 /help 看看我能做什麼。",
    )
    long = await engine.handle_turn(PRIVATE, TAIPEI, "x" * (engine.config.max_message_chars + 1))
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
