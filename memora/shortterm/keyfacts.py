"""Key facts (numbers, dates, levels, exams, names) that a summary must not lose."""

from __future__ import annotations

import re

from memora.textnorm import EXAMS

_NUMBER_WORDS = (
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a few|several|half an?"
)
_EXAMS_EN = "|".join([*(e.upper() for e in EXAMS), "SAT", "GRE", "GMAT", "PTE", "Cambridge"])
_EXAMS_ZH = "|".join(
    [*(n for names in EXAMS.values() for n in names), "四級", "四级", "六級", "六级"]
)
_UNITS = r"days?|weeks?|months?|years?|hours?|minutes?|times?|words?|points?|lessons?"
_PATTERNS = [
    r"\b\d{4}-\d{1,2}-\d{1,2}\b",  # 2026-03-01
    r"\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b",  # 3/1, 03/01/2026
    r"\b[ABC][12]\+?(?![\w])",  # CEFR levels
    rf"\b(?:{_EXAMS_EN})\b",
    rf"\b(?:\d+(?:\.\d+)?|{_NUMBER_WORDS})\s+(?:{_UNITS})\b",  # three months, 20 minutes
    r"[一二三四五六七八九十兩两半\d]+\s*(?:個|个)?(?:月|週|周|天|年|小時|小时|分鐘|分钟|次)",
    rf"(?:{_EXAMS_ZH})",
    r"\b\d+(?:[.,]\d+)?%?",  # 850, 6.5, 90%
    r"(?<=[a-z,] )(?:[A-Z][a-z]+)(?:\s[A-Z][a-z]+)*",  # capitalised names inside a sentence
]
_FACT = re.compile("|".join(f"(?:{p})" for p in _PATTERNS))
_IGNORED_NAMES = {"I", "English", "Chinese", "Memora", "OK", "Hi", "Hello", "Thanks"}


def key_facts(text: str) -> list[str]:
    """The fact tokens in a text, in order, without repeats."""
    seen: dict[str, None] = {}
    for m in _FACT.finditer(text):
        token = m.group(0).strip()
        if token and token not in _IGNORED_NAMES and len(token) > 0:
            seen.setdefault(token, None)
    return list(seen)


def _present(token: str, summary: str) -> bool:
    return token.casefold() in summary.casefold()


def _clause(token: str, text: str, width: int = 60) -> str:
    """The part of `text` around `token`, trimmed to sentence-ish boundaries."""
    i = text.find(token)
    start = max(0, i - width)
    end = min(len(text), i + len(token) + width)
    for sep in ".!?。！？\n":
        j = text.rfind(sep, start, i)
        if j != -1:
            start = max(start, j + 1)
        k = text.find(sep, i + len(token), end)
        if k != -1:
            end = min(end, k + 1)
    return text[start:end].strip()


PINNED_HEADER = "Pinned facts (quoted from earlier messages):"
MAX_PINS = 8  # the newest quotes win; the summary must stay small
MAX_QUOTE = 120


def pinned_quotes(summary: str) -> list[str]:
    """The quotes an earlier fold pinned to this summary."""
    _, _, pins = summary.partition(PINNED_HEADER)
    return [ln.strip()[3:-1] for ln in pins.splitlines() if ln.strip().startswith('- "')]


def pin_missing(summary: str, sources: list[str], old_summary: str = "") -> tuple[str, list[str]]:
    """Append quotes for fact tokens that the new summary lost; return it and the lost tokens.

    Sources are the folded user messages; quotes pinned to the old summary are kept while the
    new summary still lacks one of their facts. At most MAX_PINS quotes, newest last.
    """
    body = summary.partition(PINNED_HEADER)[0].rstrip()
    missing: list[str] = []
    quotes: list[str] = []
    for quote in pinned_quotes(old_summary):
        lost = [t for t in key_facts(quote) if not _present(t, body)]
        if lost:
            missing += lost
            quotes.append(quote)
    for text in sources:
        for token in key_facts(text):
            if _present(token, body):
                continue
            missing.append(token)
            if not any(token in q for q in quotes):
                quotes.append(_clause(token, text)[:MAX_QUOTE])
    quotes = list(dict.fromkeys(quotes))[-MAX_PINS:]
    if not quotes:
        return body, []
    lines = "\n".join(f'- "{q}"' for q in quotes)
    return f"{body}\n{PINNED_HEADER}\n{lines}", list(dict.fromkeys(missing))
