"""Is a new memory a duplicate of an old one, an update of it, or a different fact?

A lexical guard rules first: numbers, levels and dates, and negation must be the same, and in a
script both texts share, the new text must not swap or add a content word. Only then does a
cosine threshold of the embedder's profile decide (:mod:`memora.longterm.calibration`). Cosine
alone cannot tell: the same fact in English and Chinese can score lower than two different
facts in one language (decision 0101).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import TypeVar

import numpy as np
import numpy.ma  # np.union1d imports it on first use: 11-16 ms in a first write
import numpy.typing as npt

from memora.longterm.calibration import LOCAL_DEDUPE, DedupeThresholds
from memora.longterm.embeddings import embedding_text
from memora.longterm.lexical import inserted
from memora.longterm.matrix import Matrix
from memora.textnorm import (
    CHINESE_STOP_CHARS,
    ENGLISH_STOP_WORDS,
    HAN_RUN,
    MEMORY_FRAME_EN,
    MEMORY_FRAME_ZH,
    normalize,
    stem,
    to_simplified,
)

__all__ = [
    "DedupeIndex",
    "Relation",
    "candidate_cosines",
    "embedding_text",
    "may_replace",
    "normalise_text",
    "relation",
    "relation_floor",
]


# --------------------------------------------------------------------------------------------
# Text normalisation and the duplicate guard
# --------------------------------------------------------------------------------------------

_WORD_RE = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
_STOP_EN = ENGLISH_STOP_WORDS | MEMORY_FRAME_EN
_NEGATION_ZH = frozenset("不没别未无非")
_NUMERALS_ZH = frozenset("零〇二兩两三四五六七八九十百千萬万半")  # 一 is in too many words
_NUMBERS_EN = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
} | {"twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100",
     "thousand": "1000", "half": "0.5", "once": "1x", "twice": "2x"}  # fmt: skip
_MONTHS_EN = {
    m: str(i)
    for i, m in enumerate(
        "january february march april may june july august september october november december"
        .split(),
        start=1,
    )
} | {"jan": "1", "feb": "2", "mar": "3", "apr": "4", "jun": "6", "jul": "7", "aug": "8",
     "sep": "9", "sept": "9", "oct": "10", "nov": "11", "dec": "12"}  # fmt: skip
_NEGATION_EN = frozenset(("not", "no", "never", "cannot", "nor", "without"))


@lru_cache(maxsize=16384)
def normalise_text(text: str) -> str:
    """Casefolded NFKC text without whitespace and punctuation: equal means the same memory.

    Cached: a new memory is compared (`relation`) with each of the user's memories whose cosine
    is close, thousands for a user with 10,000 memories, and this was half of that cost."""
    return "".join(ch for ch in normalize(text) if ch.isalnum())


@dataclass(frozen=True)
class _Terms:
    numbers: frozenset[str]  # numbers, levels (b1), dates, months: an update when only they differ
    concepts: frozenset[str]  # negation ("NEG") or none: must be the same on both sides
    latin: frozenset[str]  # other content words
    cjk: frozenset[str]  # other content characters


# Sized for one user with 10,000 memories: a new memory meets thousands of close ones, and a
# smaller cache evicted them between two adds (~1 KB each).
@lru_cache(maxsize=32768)
def _terms(text: str) -> _Terms:
    norm = normalize(text)
    numbers: set[str] = set()
    concepts: set[str] = set()
    latin: set[str] = set()
    for word in _WORD_RE.findall(norm):
        if word.endswith("n't"):
            concepts.add("NEG")
            word = word[:-3]
        elif "'" in word:
            word = word.split("'", 1)[0]  # user's → user
        if any(ch.isdigit() for ch in word):
            numbers.add(word.lstrip("0") or "0")
        elif word in _NUMBERS_EN:
            numbers.add(_NUMBERS_EN[word])
        elif word in _MONTHS_EN and word != "may":  # "may" is mostly the modal verb
            numbers.add(_MONTHS_EN[word])
        elif word in _NEGATION_EN:
            concepts.add("NEG")
        elif word and word not in _STOP_EN:
            latin.add(stem(word))
    cjk: set[str] = set()
    for run in HAN_RUN.findall(norm):
        run = to_simplified(run)  # 繁 → 简: one spelling
        for phrase in MEMORY_FRAME_ZH:
            run = run.replace(phrase, " ")
        kept = []
        for ch in run:
            if ch in _NEGATION_ZH:
                concepts.add("NEG")
            elif ch in _NUMERALS_ZH:
                numbers.add("zh:" + ch)
            elif ch != " " and ch not in CHINESE_STOP_CHARS:
                kept.append(ch)
        # characters and their bigrams: 台中 is not in "台北中山區" although 台 and 中 are
        cjk.update(kept)
        cjk.update(a + b for a, b in itertools.pairwise(kept))
    return _Terms(frozenset(numbers), frozenset(concepts), frozenset(latin), frozenset(cjk))


class Relation(Enum):
    DUPLICATE = "duplicate"  # nothing new: do not store
    UPDATE = "update"  # the same fact with other numbers: supersede the old memory
    DISTINCT = "distinct"  # a different fact: store it


def _changes(new: frozenset[str], old: frozenset[str]) -> tuple[bool, bool]:
    """(swapped, added): each side has a word the other lacks / the new side has one more."""
    if not new or not old:
        return False, False
    return bool(new - old) and bool(old - new), bool(new - old)


def may_replace(
    new_text: str,
    old_text: str,
    cosine: float,
    thresholds: DedupeThresholds | None = LOCAL_DEDUPE,
) -> bool:
    """Whether `new_text` may supersede `old_text` when the model says it `replaces` it.

    A real update says something else about the same thing ("moved to Tainan" / "lives in
    Taipei"), so `relation` calls it distinct; what it must not be is unrelated ("is a nurse"
    pointed at "level B1"), which would overwrite a fact with another one. Without calibrated
    thresholds nothing tells the two apart: only the same text is believed.
    """
    if thresholds is None:
        return normalise_text(new_text) == normalise_text(old_text)
    if relation(new_text, old_text, cosine, thresholds) is not Relation.DISTINCT:
        return True
    return cosine >= thresholds.replace


def relation_floor(new_text: str, thresholds: DedupeThresholds | None = LOCAL_DEDUPE) -> float:
    """The lowest cosine at which `relation(new_text, old, cosine)` can be anything but
    DISTINCT for an `old` with another normalised text: `same_terms` and `update` need numbers
    in the new text, so without numbers only `same_words` or `cross_language` can pass. A new
    memory is compared only with the memories this close (a test checks the bound); without
    thresholds, with none."""
    if thresholds is None:
        return float("inf")
    if _terms(new_text).numbers:
        return thresholds.lowest
    return min(thresholds.same_words, thresholds.cross_language)


def relation(
    new_text: str,
    old_text: str,
    cosine: float,
    thresholds: DedupeThresholds | None = LOCAL_DEDUPE,
) -> Relation:
    """How a new memory relates to an existing one, from their texts and dense cosine.

    The same normalised text is a duplicate. Otherwise, with the embedder's thresholds:
    numbers and negation are compared whatever the language; content words only where both
    texts have words of that script (Latin / Chinese). A new text that swaps or adds a content
    word says something else or more: never a duplicate. Chinese is folded to simplified
    characters first. Without thresholds (an uncalibrated embedder) it is DISTINCT.
    """
    if normalise_text(new_text) == normalise_text(old_text):
        return Relation.DUPLICATE
    if thresholds is None:
        return Relation.DISTINCT
    new, old = _terms(new_text), _terms(old_text)
    latin_swap, latin_add = _changes(new.latin, old.latin)
    cjk_swap, cjk_add = _changes(new.cjk, old.cjk)
    if new.concepts != old.concepts:
        return Relation.DISTINCT
    if new.numbers != old.numbers:
        same_words = not (latin_swap or latin_add or cjk_swap or cjk_add)
        if new.numbers and old.numbers and same_words and cosine >= thresholds.update:
            return Relation.UPDATE
        return Relation.DISTINCT
    if latin_swap or latin_add or cjk_swap or cjk_add:
        return Relation.DISTINCT
    if new == old and new.numbers:
        threshold = thresholds.same_terms
    elif new.numbers or (new.latin and old.latin) or (new.cjk and old.cjk):
        threshold = thresholds.same_words
    else:
        threshold = thresholds.cross_language
    return Relation.DUPLICATE if cosine >= threshold else Relation.DISTINCT


# --------------------------------------------------------------------------------------------
# Which memories a new one needs to be compared with
# --------------------------------------------------------------------------------------------

Ids = npt.NDArray[np.intp]  # positions of memories, ascending
_NONE: Ids = np.zeros(0, dtype=np.intp)
_Group = tuple[frozenset[str], bool]  # (concepts, has numbers)
_K = TypeVar("_K", bound=Hashable)


def _group(terms: _Terms) -> _Group:
    return terms.concepts, bool(terms.numbers)


def _with(ids: Ids, i: int) -> Ids:
    """A new array: `ids` with position i added, kept ascending (mostly at the end)."""
    if not len(ids) or ids[-1] < i:
        return np.concatenate((ids, np.array([i], dtype=np.intp)))
    at = int(np.searchsorted(ids, i))
    return inserted(ids, at, i)


class DedupeIndex:
    """The memories for which `relation(new, old, cosine)` can say anything but DISTINCT.

    `relation` says DISTINCT whatever the cosine unless the two texts name the same concepts,
    both or neither have numbers (an UPDATE needs numbers on both sides, a DUPLICATE the same
    numbers), and, in each script where both have content words, the new text's words are all
    among the old one's (it may not add one, see `_changes`). Those conditions are what this
    index looks up: memories grouped by (concepts, has numbers), and for each content word
    and character the memories holding it. So a new memory is compared with the few memories
    that share its words, not with every memory of the user (a test checks that a large pool
    gets the same decisions as the full scan). Hand-written: it mirrors `relation`'s own rules.

    Like the lexical index, never changed in place: :meth:`appended`, :meth:`replaced` and
    :meth:`removed` return a new index sharing the untouched postings with this one. It holds
    only the postings (the memories' analysed terms stay in `_terms`'s cache, not here).
    """

    def __init__(self, texts: Iterable[str]) -> None:
        self._setup([_terms(t) for t in texts])

    def _setup(self, terms: list[_Terms]) -> None:
        groups: dict[_Group, list[int]] = {}
        latin: dict[str, list[int]] = {}
        cjk: dict[str, list[int]] = {}
        no_latin: list[int] = []
        no_cjk: list[int] = []
        for i, t in enumerate(terms):
            groups.setdefault(_group(t), []).append(i)
            for word in t.latin:
                latin.setdefault(word, []).append(i)
            for chars in t.cjk:
                cjk.setdefault(chars, []).append(i)
            if not t.latin:
                no_latin.append(i)
            if not t.cjk:
                no_cjk.append(i)

        def ids(values: list[int]) -> Ids:
            return np.asarray(values, dtype=np.intp)

        self._n = len(terms)
        self._groups = {k: ids(v) for k, v in groups.items()}
        self._latin = {k: ids(v) for k, v in latin.items()}
        self._cjk = {k: ids(v) for k, v in cjk.items()}
        self._no_latin = ids(no_latin)
        self._no_cjk = ids(no_cjk)

    def __len__(self) -> int:
        return self._n

    def candidates(self, text: str) -> Ids:
        """Positions of the memories `relation(text, ...)` may not call DISTINCT, ascending."""
        new = _terms(text)
        found = self._groups.get(_group(new), _NONE)
        for words, postings, without in (
            (new.latin, self._latin, self._no_latin),
            (new.cjk, self._cjk, self._no_cjk),
        ):
            if not len(found) or not words:
                continue
            holding = found
            for word in sorted(words, key=lambda w: len(postings.get(w, _NONE))):
                holding = np.intersect1d(holding, postings.get(word, _NONE), assume_unique=True)
                if not len(holding):
                    break
            # An old text with no word of this script cannot add or swap one: it stays.
            found = np.union1d(holding, np.intersect1d(found, without, assume_unique=True))
        return found.astype(np.intp, copy=False)

    def _derived(self, n: int) -> DedupeIndex:
        new = object.__new__(DedupeIndex)
        new._n = n
        new._groups, new._latin, new._cjk = self._groups, self._latin, self._cjk
        new._no_latin, new._no_cjk = self._no_latin, self._no_cjk
        return new

    def _add(self, i: int, t: _Terms) -> None:
        """(on a new index only) Put position i under t's group, words and characters."""
        self._groups = dict(self._groups)
        self._groups[_group(t)] = _with(self._groups.get(_group(t), _NONE), i)
        self._latin = _posted(self._latin, t.latin, i)
        self._cjk = _posted(self._cjk, t.cjk, i)
        if not t.latin:
            self._no_latin = _with(self._no_latin, i)
        if not t.cjk:
            self._no_cjk = _with(self._no_cjk, i)

    def _drop(self, i: int, t: _Terms) -> None:
        """(on a new index only) Take position i out of t's group, words and characters."""
        self._groups = _unposted(self._groups, [_group(t)], i)
        self._latin = _unposted(self._latin, t.latin, i)
        self._cjk = _unposted(self._cjk, t.cjk, i)
        if not t.latin:
            self._no_latin = self._no_latin[self._no_latin != i]
        if not t.cjk:
            self._no_cjk = self._no_cjk[self._no_cjk != i]

    def appended(self, text: str) -> DedupeIndex:
        """This index with one more memory at the end."""
        new = self._derived(self._n + 1)
        new._add(self._n, _terms(text))
        return new

    def replaced(self, i: int, old_text: str, text: str) -> DedupeIndex:
        """This index with memory i's text `old_text` replaced by `text`."""
        if not 0 <= i < self._n:
            raise IndexError(i)
        new = self._derived(self._n)
        new._drop(i, _terms(old_text))
        new._add(i, _terms(text))
        return new

    def removed(self, i: int) -> DedupeIndex:
        """This index without memory i: later memories move up a place in every posting."""
        if not 0 <= i < self._n:
            raise IndexError(i)
        new = self._derived(self._n - 1)
        new._groups = _shifted_all(self._groups, i)
        new._latin = _shifted_all(self._latin, i)
        new._cjk = _shifted_all(self._cjk, i)
        new._no_latin = _shifted(self._no_latin, i)
        new._no_cjk = _shifted(self._no_cjk, i)
        return new

    def postings(self) -> dict[str, dict[object, list[int]]]:
        """Everything the index holds, as plain lists (tests compare it with a fresh build)."""
        return {
            "groups": {k: v.tolist() for k, v in self._groups.items()},
            "latin": {k: v.tolist() for k, v in self._latin.items()},
            "cjk": {k: v.tolist() for k, v in self._cjk.items()},
            "none": {"latin": self._no_latin.tolist(), "cjk": self._no_cjk.tolist()},
        }


def candidate_cosines(
    matrix: Matrix,
    candidates: Ids,
    vec: npt.NDArray[np.float32],
    floor: float,
    thresholds: DedupeThresholds = LOCAL_DEDUPE,
) -> npt.NDArray[np.float32]:
    """The cosines of the candidates' rows with `vec`, for `relation` and the closest-first order.

    From the candidates' rows alone (a cost that does not grow with the user's memories) when
    that cannot change a decision; else from the whole matrix-vector product, the cosines the
    full comparison saw. BLAS may round a row's cosine differently in a smaller matrix: each
    float32 computation of a cosine of unit vectors of d dimensions is within d·u of the exact
    value (u = 2⁻²⁴, whatever the order of the sums), so two differ by at most 2·d·u (6e-5 at
    512). Only a cosine that close to a threshold, or two candidates above the floor that close
    to each other (their order), can decide differently: then the whole product decides."""
    if 4 * len(candidates) >= len(matrix):  # most rows anyway: one product is as cheap
        full: npt.NDArray[np.float32] = matrix.dot(vec)[candidates]
        return full
    rough = matrix.take(candidates) @ vec
    margin = 4 * matrix.dim * float(np.finfo(np.float32).eps) / 2  # twice 2·d·u
    t = thresholds
    edges = np.array([floor, t.same_terms, t.same_words, t.cross_language, t.update])
    above = np.sort(rough[rough >= floor])
    if (np.abs(rough[:, None] - edges[None, :]) > margin).all() and (
        np.diff(above) > 2 * margin
    ).all():
        return rough
    exact: npt.NDArray[np.float32] = matrix.dot(vec)[candidates]
    return exact


def _shifted(ids: Ids, i: int) -> Ids:
    """A new array: `ids` without position i, the later positions one less."""
    kept: Ids = ids[ids != i]
    kept[kept > i] -= 1
    return kept


def _shifted_all(postings: dict[_K, Ids], i: int) -> dict[_K, Ids]:
    shifted = {key: _shifted(ids, i) for key, ids in postings.items()}
    return {key: ids for key, ids in shifted.items() if len(ids)}  # as a fresh build


def _posted(postings: dict[str, Ids], keys: Iterable[str], i: int) -> dict[str, Ids]:
    keys = list(keys)
    if not keys:
        return postings
    out = dict(postings)
    for key in keys:
        out[key] = _with(out.get(key, _NONE), i)
    return out


def _unposted(postings: dict[_K, Ids], keys: Iterable[_K], i: int) -> dict[_K, Ids]:
    out = dict(postings)
    for key in keys:
        kept = out[key][out[key] != i]
        if len(kept):
            out[key] = kept
        else:
            del out[key]  # as a fresh build: no empty postings
    return out
