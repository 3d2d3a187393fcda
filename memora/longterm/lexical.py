"""The mixed Chinese/English tokenizer and BM25 over one user's memories.

Terms: text is normalised (:func:`memora.textnorm.normalize`) and folded to simplified characters;
English words (and numbers such as ``6.5``) become their stem (:func:`memora.textnorm.stem`),
without stop words and single letters; runs of Han or kana characters give their characters
(not the stop characters) and bigrams, and an exam's Chinese name also gives its English one
(``雅思`` → ``ielts``), because learners write them either way.

BM25 is Okapi BM25 with the non-negative IDF ``log(1 + (N - n + 0.5) / (n + 0.5))`` (as in
Lucene), so a term that appears in most of a user's few memories still counts a little.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from memora.textnorm import (
    CHINESE_STOP_CHARS,
    ENGLISH_STOP_WORDS,
    EXAM_ALIASES,
    HAN,
    KANA,
    normalize,
    stem,
    to_simplified,
)

__all__ = ["BM25", "DEFAULT_B", "DEFAULT_K1", "tokenize"]

# Han ideographs plus kana, which also come unspaced.
_CJK = KANA + HAN
_TOKEN_RE = re.compile(
    rf"(?P<cjk>[{_CJK}]+)"  # a run of Han/kana characters
    rf"|(?P<word>[^\W_{_CJK}]+(?:\.[0-9]+)?(?:'[^\W_{_CJK}]+)?)"  # a word, 6.5, don't
)

# BM25's parameters (decision 0104: k1 0.9, b 0.1, chosen on LoCoMo's tuning conversations).
DEFAULT_K1 = 0.9
DEFAULT_B = 0.1


def tokenize(text: str) -> list[str]:
    """Split mixed Chinese/English text into BM25 terms (see the module docstring)."""
    out: list[str] = []
    for m in _TOKEN_RE.finditer(to_simplified(normalize(text))):
        run = m.group("cjk")
        if run is not None:
            out.extend(c for c in run if c not in CHINESE_STOP_CHARS)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
            out.extend(sorted({alias for key, alias in EXAM_ALIASES.items() if key in run}))
            continue
        term = _word_term(m.group("word"))
        if term is not None:
            out.append(term)
    return out


@functools.lru_cache(maxsize=65536)
def _word_term(word: str) -> str | None:
    """The term for one Latin word or number, or None for a stop word."""
    if "'" in word:
        word = word.split("'", 1)[0]  # caroline's → caroline, don't → don (a stop word)
    if word in ENGLISH_STOP_WORDS or (len(word) == 1 and not word.isdigit()):
        return None
    return stem(word)


Vector = npt.NDArray[np.float64]


Posting = tuple[npt.NDArray[np.intp], Vector]  # ids of the documents holding a term, their tfs
_EMPTY: Posting = (np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float64))

_A = TypeVar("_A", bound=np.ndarray[Any, Any])


def inserted(array: _A, at: int, value: float) -> _A:
    """A new 1-d array with `value` at position `at` (np.insert does the same through its
    general n-d path, ~25 µs a call: a supersede inserts into every term's posting)."""
    out = np.empty(len(array) + 1, dtype=array.dtype)
    out[:at] = array[:at]
    out[at] = value
    out[at + 1 :] = array[at:]
    return cast(_A, out)


class BM25:
    """Okapi BM25 over a fixed list of documents (one user's memories, or one benchmark pool).

    An index is never changed in place: :meth:`appended`, :meth:`replaced` and :meth:`removed`
    return a new index that shares every untouched posting with this one, so a search still
    holding the old index is unaffected, and a write costs what the written document holds
    (plus O(N) array work for the length statistics), not a re-tokenisation of every document.
    The result equals, to the bit, an index built from scratch over the new documents (a test
    checks it): postings keep document order, and N, avgdl and the length factors are
    recomputed from the same per-document lengths the same way.
    """

    def __init__(
        self,
        docs: Iterable[Sequence[str]],
        *,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
    ) -> None:
        """Index pre-tokenized documents; use :meth:`from_texts` to tokenize as well."""
        freqs = [Counter(d) for d in docs]
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for i, f in enumerate(freqs):
            for term, tf in f.items():
                ids, tfs = postings.setdefault(term, ([], []))
                ids.append(i)
                tfs.append(float(tf))
        self._setup(
            freqs,
            {
                t: (np.asarray(ids, dtype=np.intp), np.asarray(tfs, dtype=np.float64))
                for t, (ids, tfs) in postings.items()
            },
            k1,
            b,
        )

    def _setup(
        self, freqs: list[Counter[str]], postings: dict[str, Posting], k1: float, b: float
    ) -> None:
        self.k1 = k1
        self.b = b
        self._freqs = freqs
        self._postings = postings
        self.n_docs = len(freqs)
        lengths = np.array([sum(f.values()) for f in freqs], dtype=np.float64)
        self._set_lengths(lengths)

    def _set_lengths(self, lengths: Vector) -> None:
        self.doc_len = lengths
        avgdl = float(lengths.mean()) if self.n_docs and lengths.sum() > 0 else 1.0
        self.avgdl = avgdl
        # Per-document length factor of the BM25 denominator: k1 * (1 - b + b * dl / avgdl).
        self._len_norm = self.k1 * (1.0 - self.b + self.b * lengths / avgdl)

    def _derived(self, freqs: list[Counter[str]], postings: dict[str, Posting]) -> BM25:
        """A new index over `freqs` whose postings are already `postings` (no re-indexing)."""
        new = object.__new__(BM25)
        new.k1, new.b = self.k1, self.b
        new._freqs = freqs
        new._postings = postings
        new.n_docs = len(freqs)
        return new

    def appended(self, doc: Sequence[str]) -> BM25:
        """This index with one more document at the end."""
        freq = Counter(doc)
        i = self.n_docs
        postings = dict(self._postings)
        for term, tf in freq.items():
            ids, tfs = postings.get(term, _EMPTY)
            postings[term] = (np.append(ids, np.intp(i)), np.append(tfs, float(tf)))
        new = self._derived([*self._freqs, freq], postings)
        new._set_lengths(np.append(self.doc_len, float(sum(freq.values()))))
        return new

    def replaced(self, i: int, doc: Sequence[str]) -> BM25:
        """This index with document i's terms replaced by `doc` (a memory's new text)."""
        if not 0 <= i < self.n_docs:
            raise IndexError(i)
        freq = Counter(doc)
        postings = dict(self._postings)
        for term in self._freqs[i]:
            ids, tfs = postings[term]
            keep = ids != i
            if keep.all():
                continue
            if keep.any():
                postings[term] = (ids[keep], tfs[keep])
            else:
                del postings[term]  # as a fresh build: no empty postings
        for term, tf in freq.items():
            ids, tfs = postings.get(term, _EMPTY)
            at = int(np.searchsorted(ids, i))
            postings[term] = (inserted(ids, at, i), inserted(tfs, at, float(tf)))
        freqs = list(self._freqs)
        freqs[i] = freq
        lengths = self.doc_len.copy()
        lengths[i] = float(sum(freq.values()))
        new = self._derived(freqs, postings)
        new._set_lengths(lengths)
        return new

    def removed(self, i: int) -> BM25:
        """This index without document i (later documents move up one place in every
        posting; a posting that ends before i is shared as it is)."""
        if not 0 <= i < self.n_docs:
            raise IndexError(i)
        postings: dict[str, Posting] = {}
        for term, (ids, tfs) in self._postings.items():
            if ids[-1] < i:
                postings[term] = (ids, tfs)
                continue
            keep = ids != i
            if keep.any():  # as a fresh build: no empty postings
                kept = ids[keep]
                kept[kept > i] -= 1
                postings[term] = (kept, tfs[keep])
        new = self._derived([*self._freqs[:i], *self._freqs[i + 1 :]], postings)
        new._set_lengths(np.delete(self.doc_len, i))
        return new

    @classmethod
    def from_texts(
        cls, texts: Iterable[str], *, k1: float = DEFAULT_K1, b: float = DEFAULT_B
    ) -> BM25:
        return cls([tokenize(t) for t in texts], k1=k1, b=b)

    def __len__(self) -> int:
        return self.n_docs

    def _idf_n(self, n: int) -> float:
        return math.log(1.0 + (self.n_docs - n + 0.5) / (n + 0.5))

    def idf(self, term: str) -> float:
        """Non-negative IDF of a term held by n of the N documents."""
        posting = self._postings.get(term)
        return self._idf_n(0 if posting is None else len(posting[0]))

    def _saturated_tf(self, term: str) -> tuple[npt.NDArray[np.intp], Vector] | None:
        posting = self._postings.get(term)
        if posting is None:
            return None
        ids, tfs = posting
        return ids, tfs * (self.k1 + 1.0) / (tfs + self._len_norm[ids])

    def scores(self, query: Sequence[str]) -> Vector:
        """Plain BM25 score of every document for the query terms (repeats count again)."""
        out = np.zeros(self.n_docs, dtype=np.float64)
        for term in query:
            sat = self._saturated_tf(term)
            if sat is not None:
                ids, weight = sat
                out[ids] += self.idf(term) * weight
        return out

    def coverage(self, query: Sequence[str]) -> Vector:
        """How much of the query each document holds, in [0, 1].

        The IDF-weighted share of the distinct query terms that a document contains, each term's
        contribution being its BM25 term weight capped at that of one occurrence in a document of
        average length. Unlike a BM25 score divided by the best one, it is absolute: a memory that
        shares only a common word with the message scores low even when it is the best match.
        Query terms that no document contains count in the denominator too, each with the weight
        of a term that one document holds.
        """
        out = np.zeros(self.n_docs, dtype=np.float64)
        total = 0.0
        for term in set(query):
            sat = self._saturated_tf(term)
            # A term no memory holds weighs as much as one that a single memory holds: so the
            # share does not depend on how many memories the user has (1 or 1,000+).
            idf = self.idf(term) if sat is not None else self._idf_n(1)
            total += idf
            if sat is not None:
                ids, weight = sat
                out[ids] += idf * np.minimum(weight, 1.0)
        if total > 0.0:
            out /= total
        return out
