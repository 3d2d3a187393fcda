"""Code, not the prompt, decides which extracted mistakes and words are kept.

The model is asked not to log a Chinese message, a one-word reply or a quote as a mistake, and
not to return secrets; these checks make sure of it. Words are keyed by their lemmas (simplemma,
which ships its English dictionary in the wheel) so "booked a table" and "Book a table" are one
entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import simplemma

from memora.learner.model import ExtractedMistake, ExtractedWord
from memora.privacy.secretfilter import looks_secret
from memora.textnorm import normalize

MAX_FIELD_CHARS = 300
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_LATIN_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*")
_KEY_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)*")  # "Route 66" is not "Route 7"
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|「[^」]*」|『[^』]*』|‘[^’]*’|^\s*>.*$", re.MULTILINE)


def _fold(text: str) -> str:
    """Lower case, unified quotes, single spaces, no closing punctuation: for containment."""
    text = normalize(text)
    return " ".join(text.split()).strip(" .!?。！？,，")


def mostly_chinese(text: str) -> bool:
    """More CJK characters than Latin letters: a message in Chinese, not English practice."""
    cjk = len(_CJK.findall(text))
    latin = sum(len(w) for w in _LATIN_WORD.findall(text))
    return cjk > latin


def mistake_problem(mistake: ExtractedMistake, message: str) -> str | None:
    """Why this mistake must not be logged, or None to keep it."""
    original, corrected = mistake.original.strip(), mistake.corrected.strip()
    if not original or not corrected or _fold(original) == _fold(corrected):
        return "no correction"
    if any(len(x) > MAX_FIELD_CHARS for x in (original, corrected, mistake.reason)):
        return "too long"
    if looks_secret(" ".join((original, corrected, mistake.reason))):
        return "looks like a secret"
    if mostly_chinese(message):
        return "the message is in Chinese"
    if len(_LATIN_WORD.findall(message)) < 2:
        return "a one-word reply"
    if _fold(original) not in _fold(message):
        return "not the learner's own words"
    own = _QUOTED.sub(" ", message)
    if _fold(original) not in _fold(own):
        return "a quote of someone else"
    return None


def word_problem(word: ExtractedWord) -> str | None:
    """Why this vocabulary item must not be kept, or None to keep it."""
    term = word.term.strip()
    if not _LATIN_WORD.search(term):
        return "no English word"
    if len(term) > 80 or len(word.meaning) > MAX_FIELD_CHARS or len(word.example) > MAX_FIELD_CHARS:
        return "too long"
    if looks_secret(" ".join((term, word.meaning, word.example))):
        return "looks like a secret"
    return None


def vocab_key(term: str) -> str:
    """The duplicate key of a word or phrase: its English words, lower-cased and lemmatised."""
    words = _KEY_WORD.findall(normalize(term))
    return " ".join(simplemma.lemmatize(w.lower(), lang="en").lower() for w in words)


@dataclass(frozen=True)
class Screened:
    """The extracted learner items that passed, and (item, reason) for those that did not."""

    mistakes: list[ExtractedMistake]
    words: list[ExtractedWord]
    rejected: list[tuple[str, str]]


def screen(mistakes: list[ExtractedMistake], words: list[ExtractedWord], message: str) -> Screened:
    kept_m: list[ExtractedMistake] = []
    kept_w: list[ExtractedWord] = []
    rejected: list[tuple[str, str]] = []
    seen: set[str] = set()
    for m in mistakes:
        why = mistake_problem(m, message)
        if why:
            rejected.append((f"mistake: {m.original}", why))
        else:
            kept_m.append(
                m.model_copy(
                    update={
                        k: " ".join(getattr(m, k).split())
                        for k in ("original", "corrected", "reason")
                    }
                )
            )
    for w in words:
        why = word_problem(w)
        key = vocab_key(w.term)
        if why is None and key in seen:
            why = "repeated in the same answer"
        if why:
            rejected.append((f"word: {w.term}", why))
        else:
            seen.add(key)
            kept_w.append(w)
    return Screened(kept_m, kept_w, rejected)
