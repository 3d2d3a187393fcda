"""The bot's own words in the learner's language: gettext catalogs (memora/locale/<lang>/
LC_MESSAGES/memora.po, compiled to .mo), English as the source (a msgid is the English text).

`translator(lang)` gives one language's gettext. Within a request the core and the adapters call
`_()`, which translates into the language set by `speaking(lang)` for the current task (a
context variable, so concurrent chats never mix); `N_()` only marks a module constant for
extraction, and the constant is translated with `_()` where it is shown. Placeholders are
`str.format` named fields, filled after translation: ``_("Saved: {text}").format(text=...)``.
A message with a count goes through `ngettext`, so each language's plural rule picks its form.

Which language a learner gets is decided here too, from what the core knows (a /language choice,
the profile's explanation language) and the platform's hint (Telegram's `language_code`).
"""

from __future__ import annotations

import gettext
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path

__all__ = [
    "DEFAULT",
    "LANGUAGES",
    "LOCALE_DIR",
    "N_",
    "_",
    "choice",
    "current",
    "from_platform",
    "from_profile",
    "month_name",
    "ngettext",
    "resolve",
    "speaking",
    "switch",
    "translator",
    "weekday_name",
]

DOMAIN = "memora"
LOCALE_DIR = Path(__file__).parent / "locale"
DEFAULT = "en"
LANGUAGES = ("en", "zh_Hant", "zh_Hans")
NAMES = {"en": "English", "zh_Hant": "繁體中文", "zh_Hans": "简体中文"}

_language: ContextVar[str] = ContextVar("memora_language", default=DEFAULT)


@cache
def _catalog(lang: str) -> gettext.NullTranslations:
    """One language's compiled catalog (English, the source, for an unknown language)."""
    if lang not in LANGUAGES:
        lang = DEFAULT
    return gettext.translation(DOMAIN, LOCALE_DIR, languages=[lang], fallback=True)


def translator(lang: str) -> Callable[[str], str]:
    """One language's gettext."""
    return _catalog(lang).gettext


def _(message: str) -> str:
    """`message` in the current task's language."""
    return translator(_language.get())(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The form of a message with a count `n` in the current task's language: the catalog's
    plural rule picks it ("1 word", "2 words"; Chinese has one form). The count is still a
    placeholder, filled after: ``ngettext("{n} word", "{n} words", n).format(n=n)``."""
    return _catalog(_language.get()).ngettext(singular, plural, n)


def N_(message: str) -> str:
    """Mark a constant for extraction; translate it with `_()` where it is shown."""
    return message


WEEKDAYS = (N_("Mon"), N_("Tue"), N_("Wed"), N_("Thu"), N_("Fri"), N_("Sat"), N_("Sun"))
MONTHS = (
    N_("Jan"),
    N_("Feb"),
    N_("Mar"),
    N_("Apr"),
    N_("May"),
    N_("Jun"),
    N_("Jul"),
    N_("Aug"),
    N_("Sep"),
    N_("Oct"),
    N_("Nov"),
    N_("Dec"),
)


def weekday_name(weekday: int) -> str:
    """A weekday's short name (Monday = 0, as Python's weekday()) in the current language: the
    C locale's "Mon" whatever the machine's locale, "週一" in 繁體."""
    return _(WEEKDAYS[weekday])


def month_name(month: int) -> str:
    """A month's short name (January = 1) in the current language: "Dec", "12月"."""
    return _(MONTHS[month - 1])


def current() -> str:
    return _language.get()


@contextmanager
def speaking(lang: str) -> Iterator[str]:
    """Within the block, `_()` in this task (and in tasks it starts) translates into `lang`."""
    token = _language.set(lang if lang in LANGUAGES else DEFAULT)
    try:
        yield _language.get()
    finally:
        _language.reset(token)


def switch(lang: str) -> None:
    """For the rest of the current task, `_()` translates into `lang` (an adapter's handler
    task, set once per incoming update)."""
    _language.set(lang if lang in LANGUAGES else DEFAULT)


def _key(text: str) -> str:
    return text.strip().lower().replace("_", "-")


_TAGS = {
    "en": "en",
    "english": "en",
    "zh-hant": "zh_Hant",
    "zh-tw": "zh_Hant",
    "zh-hk": "zh_Hant",
    "zh-mo": "zh_Hant",
    "zh": "zh_Hans",
    "zh-hans": "zh_Hans",
    "zh-cn": "zh_Hans",
    "zh-sg": "zh_Hans",
}


def choice(text: str) -> str | None:
    """A learner's /language argument (zh-Hant, zh-Hans, en, or the language's own name)."""
    key = _key(text)
    return _TAGS.get(key) or from_profile(text)


def from_platform(code: str | None) -> str | None:
    """A platform's language code (Telegram's `language_code`, IETF style) → one of LANGUAGES;
    None when it names none of them. Any other English variant (en-GB) is English."""
    if not code:
        return None
    key = _key(code)
    if key in _TAGS:
        return _TAGS[key]
    if key.startswith("en-"):
        return "en"
    if key.startswith(("zh-hant", "zh-tw", "zh-hk", "zh-mo")):
        return "zh_Hant"
    if key.startswith("zh-"):
        return "zh_Hans"
    return None


_TRADITIONAL = ("繁", "traditional", "zh-hant", "zh-tw", "taiwan", "台灣", "臺灣", "香港", "粵")
_SIMPLIFIED = ("简", "簡", "simplified", "zh-hans", "zh-cn", "mandarin", "普通话")
_CHINESE = ("中文", "chinese", "汉语", "漢語", "华语", "華語", "國語", "国语")


def from_profile(value: str | None) -> str | None:
    """The profile's explanation language (free text: "繁體中文", "Chinese", "English") → one of
    LANGUAGES, or None when it names another language. Plain "Chinese"/"中文" is 简体 unless the
    words themselves are written in traditional characters (中文 is the same in both; 華語/國語
    lean traditional)."""
    if not value:
        return None
    key = _key(value)
    if key in _TAGS:
        return _TAGS[key]
    if any(word in key for word in _TRADITIONAL):
        return "zh_Hant"
    if any(word in key for word in _SIMPLIFIED):
        return "zh_Hans"
    if any(word in key for word in ("華語", "國語", "漢語")):
        return "zh_Hant"
    if any(word in key for word in _CHINESE):
        return "zh_Hans"
    if "english" in key or "英文" in key or "英语" in key or "英語" in key:
        return "en"
    return None


def resolve(chosen: str | None, explanation: str | None, platform: str | None) -> str:
    """The learner's language: their /language choice, else the profile's explanation language,
    else the platform's hint, else English."""
    return (
        (chosen if chosen in LANGUAGES else None)
        or from_profile(explanation)
        or from_platform(platform)
        or DEFAULT
    )
