"""Hybrid ranking of one user's long-term memories: dense cosine fused with BM25.

How the score is formed (the number ``/search`` shows and ``min_score`` is compared with); every
number in it comes from the embedder's profile (:mod:`memora.longterm.calibration`)::

    dense    = cosine(query, memory)                         (vectors are L2-normalised)
    dense01  = clip((dense - scale.floor) / (scale.ceiling - scale.floor), 0, 1)
    lexical  = BM25 coverage of the query by the memory, in [0, 1]
               (IDF-weighted share of the query's terms that the memory holds, see
               memora.longterm.lexical.BM25.coverage)
    agree    = min(1, dense01 / lexical_gate)                (1 when the gate is 0)
    score    = dense_weight * dense01 + (1 - dense_weight) * lexical * agree     in [0, 1]

``dense_weight`` is per memory (:func:`weight_kinds`): one weight for a memory with search
terms; without, one for a memory in the message's script (both mostly Han or both mostly Latin)
and another for one in the other script, where no word can be shared.

Hits are ordered by ``score`` (ties: higher cosine, then lower index) and kept while
``score >= min_score``, at most ``top_k`` of them. Why this form: decision 0101.

The functions are pure (numpy in, hits out): the store passes the candidates it holds and may
pass a BM25 index it built once over the same texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memora.longterm.calibration import LOCAL, DenseScale, EmbedderProfile, profile_for
from memora.longterm.lexical import BM25, tokenize
from memora.longterm.matrix import Matrix
from memora.textnorm import han_dominant

__all__ = [
    "DEFAULT_DENSE_WEIGHT",
    "DEFAULT_LEXICAL_GATE",
    "DEFAULT_MIN_SCORE",
    "DEFAULT_SAME_SCRIPT_DENSE_WEIGHT",
    "DEFAULT_TERMS_DENSE_WEIGHT",
    "LOCAL",
    "USE_SCALE",
    "DenseScale",
    "Hit",
    "Scores",
    "context_can_matter",
    "dense_scale_for",
    "follow_up_rank",
    "fuse",
    "han_dominant",
    "hybrid_rank",
    "hybrid_scores",
    "rank_scores",
    "weight_kinds",
    "weights_for_query",
]

# The local model's profile: the defaults of the functions below, and of the names other
# modules import (they read the numbers from profiles/use-multilingual-v3.toml).
USE_SCALE = LOCAL.scale
DEFAULT_DENSE_WEIGHT = LOCAL.dense_weight
DEFAULT_TERMS_DENSE_WEIGHT = LOCAL.terms_dense_weight
DEFAULT_SAME_SCRIPT_DENSE_WEIGHT = LOCAL.same_script_dense_weight
DEFAULT_LEXICAL_GATE = LOCAL.lexical_gate
DEFAULT_MIN_SCORE = LOCAL.min_score

# What kind of memory a memory is for its dense weight (an index into weights_for_query's table)
TERMS, SAME_SCRIPT, OTHER_SCRIPT = 0, 1, 2


def weight_kinds(text: str, has_terms: bool) -> tuple[int, int]:
    """One memory's kind for a mostly-Han message and for a mostly-Latin one: TERMS for a
    memory with search terms (in both languages), else SAME_SCRIPT or OTHER_SCRIPT."""
    if has_terms:
        return (TERMS, TERMS)
    if han_dominant(text):
        return (SAME_SCRIPT, OTHER_SCRIPT)
    return (OTHER_SCRIPT, SAME_SCRIPT)


def weights_for_query(
    kinds: npt.NDArray[np.intp], query: str, profile: EmbedderProfile = LOCAL
) -> npt.NDArray[np.float64]:
    """The dense weight of each memory for this message, from the memories' kinds (n, 2) of
    :func:`weight_kinds` and the embedder's weights."""
    table = np.array(
        [profile.terms_dense_weight, profile.same_script_dense_weight, profile.dense_weight],
        dtype=np.float64,
    )
    column: npt.NDArray[np.float64] = table[kinds[:, 0 if han_dominant(query) else 1]]
    return column


def dense_scale_for(model_name: str) -> DenseScale:
    """The embedder's calibrated scale; an uncalibrated one keeps its raw cosine (0 → 1)."""
    return profile_for(model_name).scale


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
    topic loses nothing to the old one (a sum or a max of the two scores let the previous topic
    lead: decision 0101).

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
