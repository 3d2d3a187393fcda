"""Hybrid ranking of one user's long-term memories: dense cosine fused with BM25.

How the score is formed (the number ``/search`` shows and ``min_score`` is compared with)::

    dense    = cosine(query, memory)                         (vectors are L2-normalised)
    dense01  = clip((dense - scale.floor) / (scale.ceiling - scale.floor), 0, 1)
    lexical  = BM25 coverage of the query by the memory, in [0, 1]
               (IDF-weighted share of the query's terms that the memory holds, see
               memora.longterm.lexical.BM25.coverage)
    agree    = min(1, dense01 / lexical_gate)
    score    = dense_weight * dense01 + (1 - dense_weight) * lexical * agree     in [0, 1]

``dense_weight`` is per memory (:func:`dense_weight_pair`): 0.3 for a memory with search terms;
without, 0.2 when the memory is in the message's script (both mostly Han or both mostly Latin)
and 0.4 when it is not, since shared words are only possible in the first case.

Hits are ordered by ``score`` (ties: higher cosine, then lower index) and kept while
``score >= min_score``, at most ``top_k`` of them.

Why this form (``benchmarks/retrieval.py`` prints the figures):

* On long English conversations (LoCoMo) BM25 beats every local dense model and USE in
  particular; on short cross-lingual learner memories USE wins and BM25 finds nothing. A weighted
  sum lets whichever signal has evidence decide: when no word is shared (a Chinese memory, an
  English message) ``lexical`` is 0 for every memory and the order is USE's; when words are
  shared, they weigh more than USE's noisy cosine. Reciprocal-rank fusion was measured too and
  loses on both sets: it throws away how strong each signal is.
* The no-result rule is the same threshold on the fused score, so it does not rest on one
  model's absolute cosine alone: a memory that shares the message's words needs less cosine to
  pass, and a cosine in the range where USE puts unrelated top hits (≈ .1–.2) is not enough on
  its own. Both parts are absolute, not relative to the best candidate, so a user with one
  memory and a user with 1,000 get comparable scores, and a message unrelated to everything
  returns nothing rather than "the best of a bad lot".
* ``agree`` makes the lexical evidence count in full only where the meaning roughly agrees
  (``dense01 >= lexical_gate``, a USE cosine of 0.3 by default) and proportionally less below.
  Without it, a short message that shares one ordinary word with an unrelated memory ("hi, good
  morning" / "got good advice", "tell me a joke" / "told me about the trip") passes the
  threshold as soon as the user has enough memories for such a word to turn up: with 361
  memories per user (the learner set plus LoCoMo observations), unrelated messages returned
  nothing 50 % of the time without the gate and 79 % with it, at the same threshold.

The function is pure (numpy in, hits out): the store passes the candidates it holds (the user's
memory vectors and texts, or a dense top-N from Chroma plus their texts) and may pass a BM25
index it built once over the same texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memora.longterm.lexical import BM25, tokenize
from memora.longterm.matrix import Matrix
from memora.text import han_dominant

__all__ = [
    "DEFAULT_DENSE_WEIGHT",
    "DEFAULT_LEXICAL_GATE",
    "DEFAULT_MIN_SCORE",
    "DEFAULT_SAME_SCRIPT_DENSE_WEIGHT",
    "DEFAULT_TERMS_DENSE_WEIGHT",
    "DENSE_SCALES",
    "E5_SCALE",
    "USE_SCALE",
    "DenseScale",
    "Hit",
    "Scores",
    "context_can_matter",
    "dense_scale_for",
    "dense_weight_pair",
    "follow_up_rank",
    "fuse",
    "han_dominant",
    "hybrid_rank",
    "hybrid_scores",
    "rank_scores",
    "weights_for_query",
]


@dataclass(frozen=True)
class DenseScale:
    """Maps one embedding model's cosine onto [0, 1]: ``floor`` → 0, ``ceiling`` → 1.

    Models spread cosines very differently (USE: unrelated ≈ .0–.2, related ≈ .2–.7;
    multilingual-e5: everything ≈ .75–.9), so the dense evidence is put on a common scale before
    it is fused with the lexical one.
    """

    floor: float
    ceiling: float

    def __post_init__(self) -> None:
        if not self.ceiling > self.floor:
            raise ValueError("DenseScale needs ceiling > floor")


# Measured with `.venv/bin/python benchmarks/retrieval.py` (learner set: relevant memories'
# cosine vs the top cosine for unrelated messages).
USE_SCALE = DenseScale(floor=0.0, ceiling=0.6)
E5_SCALE = DenseScale(floor=0.75, ceiling=0.95)

DENSE_SCALES: dict[str, DenseScale] = {
    "use-multilingual-v3": USE_SCALE,
    "multilingual-e5-small": E5_SCALE,
}

# Weight of the dense evidence; the lexical evidence gets the rest. 0.4 keeps USE's order on
# cross-lingual memories (where lexical is 0) and lets shared words lead on English ones.
DEFAULT_DENSE_WEIGHT = 0.4

# The weight for a memory that has search terms (written by the extraction call in English and
# the learner's language, indexed and embedded with the text): shared words are then the
# stronger evidence on cross-lingual memories too. Chosen on the tuning part only by
# `.venv/bin/python benchmarks/retrieval.py --candidates` ("+ terms (lexical + dense)"), with
# the gate and min_score left where they were: learner set tuning users hit@1 0.944 / answerable
# kept 0.861 / unrelated → nothing 0.947; held-out users 0.835 / 0.835 / 0.828 (with the
# lexical tokenizer of 2026-12-01: lemma + Snowball stems, BM25 k1 0.9 / b 0.4; the grid of
# weight × gate × min_score picks these same values, with or without the cap at 0.4 that keeps
# LoCoMo's tuning NDCG@10: 0.516 at 0.3, 0.512 at 0.4, 0.458 at 0.6). A memory without terms
# (/remember, or stored before terms existed) keeps DEFAULT_DENSE_WEIGHT when it is in the
# other script than the message: at 0.3 it would need a cosine of 0.28 instead of 0.21 to pass
# on its own, and the text-only baseline keeps 0.74 of answerable queries instead of 0.89
# (tuning users); in the message's script it weighs DEFAULT_SAME_SCRIPT_DENSE_WEIGHT.
DEFAULT_TERMS_DENSE_WEIGHT = 0.3

# The weight for a memory without search terms written in the message's script (both mostly Han,
# or both mostly Latin): words can be shared, so shared words lead. A memory in the other script
# (a Chinese memory, an English message) can only be found by the dense side and keeps
# DEFAULT_DENSE_WEIGHT. Chosen on the tuning part by `benchmarks/retrieval.py --candidates`
# ("script-aware weight", text-only memories): weight × min_score grid, learner tuning users
# hit@1 0.847 / kept 0.847 / unrelated → nothing 0.947 (one weight 0.4: 0.847 / 0.889 / 0.658),
# held out 0.823 / 0.823 / 0.759 (0.797 / 0.873 / 0.586); LoCoMo's turns, all English like
# their questions, NDCG@10 0.520 tuning / 0.512 held out (0.512 / 0.483 at 0.4).
DEFAULT_SAME_SCRIPT_DENSE_WEIGHT = 0.2

# dense01 at and above which the lexical evidence counts in full (0.5 on USE_SCALE = cosine 0.3).
DEFAULT_LEXICAL_GATE = 0.5

# No-result threshold on the fused score, calibrated for LocalUSE with DEFAULT_DENSE_WEIGHT and
# USE_SCALE by `.venv/bin/python benchmarks/retrieval.py` (learner set, "no-result rule" table):
# at 0.14, 86 % of unrelated messages return nothing while the relevant memory of 92 % of the
# answerable ones survives (max of the two rates' sum; 0.10 keeps 97 % but lets 21 % of unrelated
# messages through, 0.16+ loses relevant memories fast). With 361 memories per user (table (c))
# the same threshold gives 79 % / 89 %. Without a shared word it means a USE cosine >= 0.21
# (>= 0.28 for a memory with search terms, which weighs its cosine less).
DEFAULT_MIN_SCORE = 0.14


def dense_weight_pair(text: str, has_terms: bool) -> tuple[float, float]:
    """One memory's dense weight for a mostly-Han message and for a mostly-Latin one.

    A memory with search terms (in both languages) weighs DEFAULT_TERMS_DENSE_WEIGHT for
    either; one without weighs DEFAULT_SAME_SCRIPT_DENSE_WEIGHT for a message in its own
    script and DEFAULT_DENSE_WEIGHT for one in the other (see those constants)."""
    if has_terms:
        return (DEFAULT_TERMS_DENSE_WEIGHT, DEFAULT_TERMS_DENSE_WEIGHT)
    if han_dominant(text):
        return (DEFAULT_SAME_SCRIPT_DENSE_WEIGHT, DEFAULT_DENSE_WEIGHT)
    return (DEFAULT_DENSE_WEIGHT, DEFAULT_SAME_SCRIPT_DENSE_WEIGHT)


def weights_for_query(pairs: npt.NDArray[np.float64], query: str) -> npt.NDArray[np.float64]:
    """The dense weight of each memory for this message, from the memories' pairs (n, 2) of
    :func:`dense_weight_pair`."""
    column: npt.NDArray[np.float64] = pairs[:, 0 if han_dominant(query) else 1]
    return column


def dense_scale_for(model_name: str) -> DenseScale:
    """The measured scale of a known model; other models (e.g. OpenAI's) get USE's, unmeasured."""
    return DENSE_SCALES.get(model_name, USE_SCALE)


@dataclass(frozen=True)
class Hit:
    """One ranked memory: its position in the caller's lists and how it scored."""

    index: int
    score: float  # fused relevance in [0, 1]: what is shown to the user and compared to min_score
    dense: float  # raw cosine similarity
    lexical: float  # BM25 coverage in [0, 1]


@dataclass(frozen=True)
class Scores:
    """Per-document signals (one entry per candidate, in the caller's order)."""

    score: npt.NDArray[np.float64]
    dense: npt.NDArray[np.float64]
    lexical: npt.NDArray[np.float64]


def hybrid_scores(
    query_vec: npt.ArrayLike,
    doc_vecs: npt.ArrayLike | Matrix,
    query_text: str,
    doc_texts: Sequence[str],
    *,
    dense_weight: float | npt.ArrayLike = DEFAULT_DENSE_WEIGHT,
    scale: DenseScale = USE_SCALE,
    lexical_gate: float = DEFAULT_LEXICAL_GATE,
    index: BM25 | None = None,
) -> Scores:
    """Fused score, cosine and lexical coverage of every candidate (see the module docstring).

    ``dense_weight`` is one weight, or one per candidate (a memory with search terms weighs
    its dense evidence less, see DEFAULT_TERMS_DENSE_WEIGHT)."""
    n = len(doc_texts)
    weight = np.asarray(dense_weight, dtype=np.float64)
    if weight.ndim > 1 or (weight.ndim == 1 and weight.shape[0] != n):
        raise ValueError("dense_weight must be one number or one per text")
    if np.any((weight < 0.0) | (weight > 1.0)):
        raise ValueError("dense_weight must be in [0, 1]")
    if not 0.0 <= lexical_gate <= 1.0:
        raise ValueError("lexical_gate must be in [0, 1]")
    if n == 0:
        empty = np.zeros(0, dtype=np.float64)
        return Scores(empty, empty, empty)
    docs = doc_vecs if isinstance(doc_vecs, Matrix) else _as_rows(doc_vecs)
    query = np.asarray(query_vec, dtype=np.float32 if isinstance(docs, Matrix) else docs.dtype)
    query = query.reshape(-1)  # in the docs' type: no float64 copy of the docs
    if len(docs.shape) != 2 or docs.shape[0] != n:
        raise ValueError(f"doc_vecs must have one row per text: {docs.shape} vs {n} texts")
    if docs.shape[1] != query.shape[0]:
        raise ValueError(f"dimension mismatch: query {query.shape[0]}, docs {docs.shape[1]}")
    if index is None:
        index = BM25.from_texts(doc_texts)
    elif len(index) != n:
        raise ValueError("the BM25 index must cover exactly doc_texts")
    dense = (docs.dot(query) if isinstance(docs, Matrix) else docs @ query).astype(np.float64)
    lexical = index.coverage(tokenize(query_text))
    score = fuse(dense, lexical, dense_weight=weight, scale=scale, lexical_gate=lexical_gate)
    return Scores(score=score, dense=dense, lexical=lexical)


def _as_rows(doc_vecs: npt.ArrayLike) -> npt.NDArray[np.floating]:
    docs = np.asarray(doc_vecs)
    return docs if docs.dtype in (np.float32, np.float64) else docs.astype(np.float64)


def fuse(
    dense: npt.NDArray[np.float64],
    lexical: npt.NDArray[np.float64],
    *,
    dense_weight: float | npt.NDArray[np.float64] = DEFAULT_DENSE_WEIGHT,
    scale: DenseScale = USE_SCALE,
    lexical_gate: float = DEFAULT_LEXICAL_GATE,
) -> npt.NDArray[np.float64]:
    """The fused score from each candidate's cosine and lexical coverage (the module
    docstring's formula; the benchmarks call it with the coverage of other tokenizers)."""
    dense01 = np.clip((dense - scale.floor) / (scale.ceiling - scale.floor), 0.0, 1.0)
    agree = np.minimum(1.0, dense01 / lexical_gate) if lexical_gate > 0.0 else 1.0
    score: npt.NDArray[np.float64] = np.clip(
        dense_weight * dense01 + (1.0 - dense_weight) * lexical * agree, 0.0, 1.0
    )
    return score


def hybrid_rank(
    query_vec: npt.ArrayLike,
    doc_vecs: npt.ArrayLike,
    query_text: str,
    doc_texts: Sequence[str],
    top_k: int = 5,
    min_score: float = DEFAULT_MIN_SCORE,
    *,
    dense_weight: float | npt.ArrayLike = DEFAULT_DENSE_WEIGHT,
    scale: DenseScale = USE_SCALE,
    lexical_gate: float = DEFAULT_LEXICAL_GATE,
    index: BM25 | None = None,
) -> list[Hit]:
    """Rank candidate memories for a message; at most ``top_k`` hits with ``score >= min_score``.

    ``query_vec`` is the message's vector (d,), ``doc_vecs`` the candidates' vectors (n, d), both
    L2-normalised by the same model; ``doc_texts`` the candidates' texts in the same order.
    ``index`` is an optional BM25 over exactly ``doc_texts`` (built here when omitted).
    An empty candidate list, ``top_k <= 0`` or nothing above ``min_score`` gives ``[]``.
    """
    if top_k <= 0 or not doc_texts:
        return []
    s = hybrid_scores(
        query_vec,
        doc_vecs,
        query_text,
        doc_texts,
        dense_weight=dense_weight,
        scale=scale,
        lexical_gate=lexical_gate,
        index=index,
    )
    # Sort by score, then cosine, then position (np.lexsort: last key is the primary one),
    # only the candidates that can be hits: those at or above min_score and, past top_k of
    # them, those at or above the top_k-th best score (ties kept, so the order is the same as
    # sorting everything; a 10,000-memory sort was half of a warm search).
    return rank_scores(s, top_k, min_score)


def rank_scores(s: Scores, top_k: int, min_score: float) -> list[Hit]:
    """Hits from precomputed scores: by score, then cosine, then position (the one order)."""
    order = _top_order(s.score, s.dense, top_k, min_score)
    return [Hit(int(i), float(s.score[i]), float(s.dense[i]), float(s.lexical[i])) for i in order]


def _top_order(
    score: npt.NDArray[np.float64], dense: npt.NDArray[np.float64], top_k: int, min_score: float
) -> npt.NDArray[np.intp]:
    """The indices of at most top_k scores >= min_score, ordered by score, cosine, index."""
    if np.isnan(score).any():  # NaN sorts after every number: the plain sort decides
        keep = np.arange(len(score))
        order = keep[np.lexsort((keep, -dense[keep], -score[keep]))]
    else:
        order = _first(np.flatnonzero(score >= min_score), score, dense, top_k)
    below = np.flatnonzero(score[order] < min_score)  # the hits end at the first one below
    return order[: min(top_k, int(below[0]) if len(below) else len(order))]


def _first(
    ids: npt.NDArray[np.intp],
    score: npt.NDArray[np.float64],
    dense: npt.NDArray[np.float64],
    k: int,
) -> npt.NDArray[np.intp]:
    """The first k of `ids` (ascending, no NaN score) by score, cosine, then position: only
    those at or above the k-th best score are sorted (ties kept, so the order is the same as
    sorting them all)."""
    if len(ids) > k:
        kth = np.partition(score[ids], len(ids) - k)[len(ids) - k]
        ids = ids[score[ids] >= kth]
    first: npt.NDArray[np.intp] = ids[np.lexsort((ids, -dense[ids], -score[ids]))][:k]
    return first


def _cut(
    order: npt.NDArray[np.intp],
    score: npt.NDArray[np.float64],
    dense: npt.NDArray[np.float64],
    lexical: npt.NDArray[np.float64],
    top_k: int,
    min_score: float,
) -> list[Hit]:
    """The first ``top_k`` candidates of ``order`` while their score is >= ``min_score``."""
    hits: list[Hit] = []
    for i in order:
        value = float(score[i])
        if value < min_score or len(hits) >= top_k:
            break
        hits.append(Hit(int(i), value, float(dense[i]), float(lexical[i])))
    return hits


def context_can_matter(message: Scores, floor: float, top_k: int) -> bool:
    """Whether :func:`follow_up_rank`'s hits can depend on the context's scores at all.

    They cannot when ``top_k`` candidates reach ``floor`` on the message alone: those come
    first, in the message's own order and with its scores, and the hits are at most the first
    ``top_k`` of that order (cut at ``min_score``, whatever it is), so nothing the context finds
    can be among them. The store then neither embeds nor scores the previous message + the
    message (with 10,000 memories most follow-ups are such)."""
    if top_k <= 0 or len(message.score) == 0:
        return False
    return int(np.count_nonzero(message.score >= floor)) < top_k


def follow_up_rank(
    message: Scores, context: Scores, floor: float, top_k: int, min_score: float
) -> list[Hit]:
    """Rank for a follow-up: ``message`` scores the message alone, ``context`` the previous
    message + the message (same candidates, same order).

    What the message finds by itself (score >= ``floor``, the no-result threshold) comes first,
    in its own order; then what only the context finds (its context score >= ``floor``), in
    the context's order, with that score; then the rest by the message's score, down to
    ``min_score``. So the previous turn can fill the gap left by "那如果他們要去火車站呢" but
    never outranks a memory the message matched on its own, and a message that changed the
    topic loses nothing to the old one. Why not a sum or a max of the two scores: both let the
    previous topic lead (learner set, held-out users: hit@1 0.835 → 0.671-0.785,
    ``benchmarks/retrieval.py --candidates``).

    Where :func:`context_can_matter` is False, ``context`` does not change the hits: passing
    ``message`` for it gives the same ones."""
    if top_k <= 0 or len(message.score) == 0:
        return []
    own = message.score >= floor
    added = ~own & (context.score >= floor)
    score = np.where(added, context.score, message.score)
    dense = np.where(added, context.dense, message.dense)
    lexical = np.where(added, context.lexical, message.lexical)
    group = np.where(own, 0, np.where(added, 1, 2))
    if np.isnan(score).any():  # NaN sorts after every number: the plain sort decides
        order = np.lexsort((np.arange(len(score)), -dense, -score, group))
    else:  # the first top_k of that order, group by group, sorting only what can be among them
        parts: list[npt.NDArray[np.intp]] = []
        for g in range(3):
            need = top_k - sum(len(p) for p in parts)
            if need > 0:
                parts.append(_first(np.flatnonzero(group == g), score, dense, need))
        order = np.concatenate(parts)
    return _cut(order, score, dense, lexical, top_k, min_score)
