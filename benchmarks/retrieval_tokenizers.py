"""Lexical candidates side by side: stemming and BM25's k1/b, on the tuning and held-out parts.

Run from the repository root (``nice -n 19`` on a shared machine)::

    .venv/bin/python benchmarks/retrieval.py --tokenizers [--locomo-heldout DIR]

Every row is the product's ranking (``memora.longterm.ranking.fuse`` over USE and the BM25
coverage) with one lexical variant; only the tokenizer's English stemmer and BM25's k1 and b
change. Printed per split (tuning / held-out):

* learner set (``benchmarks/data/learner_set.json``): memories with their search terms, at the
  product's defaults for them (dense weight, gate, ``min_score``, top_k 5): hit@1, answerable
  queries whose memory is kept, unrelated queries that return nothing;
* LoCoMo turns (conversations 26 and 30 shipped here; ``--locomo-heldout`` the others): the
  hybrid at the product's dense weights for memories without terms (the same-script one, as the
  turns and the questions are English), NDCG@10 and recall_any@10, and BM25 alone.

With ``opencc`` or ``jieba`` installed (not dependencies), two more rows: OpenCC's full 繁→简
conversion in place of the product's table, and jieba's words added to the Han unigrams and
bigrams; neither moved a tuning figure (2026-12-01), so the product keeps neither.

The choice is made on the tuning columns only: the learner set hardly moves with the stemmer and
not at all with k1/b (short memories of similar length), so LoCoMo's tuning NDCG@10 decides.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import simplemma
import snowballstemmer

from memora.longterm.lexical import (
    BM25,
    DEFAULT_B,
    DEFAULT_K1,
    Stemmer,
    search_stem,
    tokenize,
)
from memora.longterm.ranking import (
    DEFAULT_DENSE_WEIGHT,
    DEFAULT_LEXICAL_GATE,
    DEFAULT_MIN_SCORE,
    DEFAULT_SAME_SCRIPT_DENSE_WEIGHT,
    DEFAULT_TERMS_DENSE_WEIGHT,
    dense_weight_pair,
    fuse,
    weights_for_query,
)
from memora.text import HAN, to_simplified
from memora.text import stem as light_stem

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
TOP_K = 5


@functools.cache
def _snowball() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("english")


def snowball_only(word: str) -> str:
    return str(_snowball().stemWord(word)) if word.isalpha() else word


def lemma_only(word: str) -> str:
    return str(simplemma.lemmatize(word, lang="en")).lower() if word.isalpha() else word


@dataclass(frozen=True)
class Variant:
    name: str
    stemmer: Stemmer | None
    k1: float
    b: float
    fold: Callable[[str], str] | None = None  # applied to the text before tokenizing
    extra: Callable[[str], list[str]] | None = None  # terms added after tokenizing


CHOSEN = Variant(
    f"lemma + Snowball, k1 {DEFAULT_K1:g}, b {DEFAULT_B:g} (the product's)",
    search_stem,
    DEFAULT_K1,
    DEFAULT_B,
)
VARIANTS = [
    Variant("light suffix stripper, k1 1.2, b 0.75 (before)", light_stem, 1.2, 0.75),
    Variant("no stemming, k1 1.2, b 0.75", None, 1.2, 0.75),
    Variant("Snowball, k1 1.2, b 0.75", snowball_only, 1.2, 0.75),
    Variant("lemma (simplemma), k1 1.2, b 0.75", lemma_only, 1.2, 0.75),
    Variant("lemma + Snowball, k1 1.2, b 0.75", search_stem, 1.2, 0.75),
    Variant("light suffix stripper, k1 0.9, b 0.4", light_stem, 0.9, 0.4),
    CHOSEN,
    Variant("lemma + Snowball, k1 0.9, b 0.3", search_stem, 0.9, 0.3),
    Variant("lemma + Snowball, k1 0.9, b 0.2", search_stem, 0.9, 0.2),
    Variant("lemma + Snowball, k1 0.9, b 0.1", search_stem, 0.9, 0.1),
    Variant("lemma + Snowball, k1 0.9, b 0", search_stem, 0.9, 0.0),
    Variant("lemma + Snowball, k1 0.6, b 0.1", search_stem, 0.6, 0.1),
    Variant("lemma + Snowball, k1 1.2, b 0.1", search_stem, 1.2, 0.1),
    Variant("lemma + Snowball, k1 0.6, b 0.2", search_stem, 0.6, 0.2),
    Variant("lemma + Snowball, k1 1.2, b 0.2", search_stem, 1.2, 0.2),
    Variant("lemma + Snowball, k1 1.2, b 0.4", search_stem, 1.2, 0.4),
    Variant("lemma + Snowball, k1 0.9, b 0.75", search_stem, 0.9, 0.75),
]


@dataclass
class Space:
    """One search space: a learner's memories (indexed with terms) or a LoCoMo conversation."""

    texts: list[str]  # what BM25 indexes
    vecs: F32  # what the dense side compares with
    weights: F64  # the product's dense weights, (n, 2): ranking.dense_weight_pair


@dataclass
class Q:
    text: str
    vec: F32
    relevant: set[int]
    space: int


Split = tuple[list[Space], list[Q]]


def _tokens(text: str, v: Variant) -> list[str]:
    out = tokenize(v.fold(text) if v.fold else text, stemmer=v.stemmer)
    return out + v.extra(text) if v.extra else out


def optional_variants() -> list[Variant]:
    """Rows for libraries the product does not depend on, when installed (``pip install
    opencc jieba``): OpenCC's full 繁→简 conversion before the tokenizer (the product folds with
    the table in ``memora.text``), and jieba's words of three or more characters added to the
    Han unigrams and bigrams."""
    out = []
    try:
        import opencc  # type: ignore[import-not-found,unused-ignore]

        t2s = opencc.OpenCC("t2s")
        out.append(
            Variant(CHOSEN.name.split(" (")[0] + ", + OpenCC t2s", search_stem, DEFAULT_K1,
                    DEFAULT_B, fold=t2s.convert)
        )  # fmt: skip
    except ImportError:
        print("OpenCC row skipped (pip install opencc)")
    try:
        import logging

        import jieba  # type: ignore[import-not-found,import-untyped,unused-ignore]

        jieba.setLogLevel(logging.WARNING)

        def words(text: str) -> list[str]:
            runs = re.findall(f"[{HAN}]+", to_simplified(text))
            return [w for r in runs for w in jieba.cut_for_search(r) if len(w) > 2]

        out.append(
            Variant(CHOSEN.name.split(" (")[0] + ", + jieba words", search_stem, DEFAULT_K1,
                    DEFAULT_B, extra=words)
        )  # fmt: skip
    except ImportError:
        print("jieba row skipped (pip install jieba)")
    return out


def _scores(split: Split, v: Variant) -> list[tuple[F64, F64, F64, Q]]:
    """Per query: the fused score, cosine and BM25 score of every memory of its space."""
    spaces, queries = split
    index = [BM25([_tokens(t, v) for t in s.texts], k1=v.k1, b=v.b) for s in spaces]
    out = []
    for q in queries:
        s = spaces[q.space]
        terms = _tokens(q.text, v)
        dense = (s.vecs @ q.vec).astype(np.float64)
        fused = fuse(
            dense,
            index[q.space].coverage(terms),
            dense_weight=weights_for_query(s.weights, q.text),
            lexical_gate=DEFAULT_LEXICAL_GATE,
        )
        out.append((fused, dense, index[q.space].scores(terms), q))
    return out


def learner_figures(split: Split, v: Variant) -> dict[str, float]:
    from retrieval_candidates import Tally  # benchmarks/ is the script's path

    tally = Tally()
    for fused, dense, _, q in _scores(split, v):
        # ties: higher cosine first, as the product orders them
        order = [int(i) for i in np.lexsort((np.arange(len(fused)), -dense, -fused))]
        tally.add(q.relevant, order, [i for i in order[:TOP_K] if fused[i] >= DEFAULT_MIN_SCORE])
    return tally.figures()


def _ndcg_r10(scores: F64, relevant: set[int]) -> tuple[float, bool]:
    top = np.argsort(-scores, kind="stable")[:10]
    rel = [int(i) in relevant for i in top]
    dcg = sum(1.0 / math.log2(r + 2) for r, x in enumerate(rel) if x)
    idcg = sum(1.0 / math.log2(r + 2) for r in range(min(len(relevant), 10)))
    return dcg / idcg, any(rel)


def locomo_figures(split: Split, v: Variant) -> dict[str, float]:
    nd = r10 = bm_nd = 0.0
    rows = _scores(split, v)
    for fused, _, bm25, q in rows:
        a, b = _ndcg_r10(fused, q.relevant)
        nd += a
        r10 += b
        bm_nd += _ndcg_r10(bm25, q.relevant)[0]
    n = max(len(rows), 1)
    return {"NDCG@10": nd / n, "R@10": r10 / n, "BM25 NDCG@10": bm_nd / n}


def learner_split(path: Path, split: str, embed: object) -> Split:
    from retrieval_candidates import load, with_terms

    users, queries = load(path, split)
    spaces = []
    for u in users:
        indexed = [with_terms(t, s) for t, s in zip(u.texts, u.terms, strict=True)]
        vecs = embed.passages(indexed)  # type: ignore[attr-defined]
        pairs = [dense_weight_pair(t, bool(s)) for t, s in zip(u.texts, u.terms, strict=True)]
        spaces.append(Space(indexed, vecs, np.array(pairs, dtype=np.float64)))
    qs = [Q(q.text, embed.query(q.text), q.relevant, q.user) for q in queries]  # type: ignore[attr-defined]
    return spaces, qs


def locomo_split(path: Path, embed: object) -> Split:
    from retrieval import load_locomo

    pools, queries, _, _ = load_locomo(path)
    spaces = [
        Space(
            p.texts,
            embed.passages(p.texts),  # type: ignore[attr-defined]
            np.array([dense_weight_pair(t, False) for t in p.texts], dtype=np.float64),
        )
        for p in pools
    ]
    qs = [Q(q.text, embed.query(q.text), q.relevant, q.pool) for q in queries]  # type: ignore[attr-defined]
    return spaces, qs


def run(
    learner_set: Path,
    locomo_tune: Path,
    locomo_heldout: Path | None,
    embed: object,
    variants: Sequence[Variant] | None = None,
) -> None:
    variants = [*VARIANTS, *optional_variants()] if variants is None else variants
    learner = {s: learner_split(learner_set, s, embed) for s in ("tune", "heldout")}
    locomo = {"tune": locomo_split(locomo_tune, embed)}
    if locomo_heldout is not None:
        locomo["heldout"] = locomo_split(locomo_heldout, embed)
    print(
        "\n## (h) Lexical candidates: English stemming and BM25 k1/b, tuning / held-out\n\n"
        f"Learner set with terms at the product's defaults (dense weight "
        f"{DEFAULT_TERMS_DENSE_WEIGHT:g}, gate {DEFAULT_LEXICAL_GATE:g}, min_score "
        f"{DEFAULT_MIN_SCORE:g}, top_k {TOP_K}); LoCoMo turns (no terms, English like the "
        f"questions): hybrid at the same-script dense weight {DEFAULT_SAME_SCRIPT_DENSE_WEIGHT:g} "
        f"(one weight {DEFAULT_DENSE_WEIGHT:g} before 2026-12-01: see --candidates), and BM25 "
        "alone. Each cell: tuning / held-out"
        + ("" if locomo_heldout else " (LoCoMo held-out: pass --locomo-heldout DIR)")
        + ".\n"
    )
    print(
        "| variant | learner hit@1 | answerable kept | unrelated → nothing "
        "| LoCoMo NDCG@10 | LoCoMo R@10 | BM25 alone NDCG@10 |"
    )
    print("|---|---|---|---|---|---|---|")
    for v in variants:
        lt, lh = (learner_figures(learner[s], v) for s in ("tune", "heldout"))
        ct = locomo_figures(locomo["tune"], v)
        ch = locomo_figures(locomo["heldout"], v) if "heldout" in locomo else None

        def pair(a: float, b: float | None) -> str:
            return f"{a:.3f} / {b:.3f}" if b is not None else f"{a:.3f} / –"

        print(
            f"| {v.name} | {pair(lt['hit@1'], lh['hit@1'])} | {pair(lt['kept'], lh['kept'])} "
            f"| {pair(lt['empty'], lh['empty'])} "
            f"| {pair(ct['NDCG@10'], ch['NDCG@10'] if ch else None)} "
            f"| {pair(ct['R@10'], ch['R@10'] if ch else None)} "
            f"| {pair(ct['BM25 NDCG@10'], ch['BM25 NDCG@10'] if ch else None)} |"
        )
