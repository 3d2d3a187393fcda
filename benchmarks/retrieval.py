"""Retrieval on long English conversations (LoCoMo): BM25, USE dense, and the product's hybrid.

Run from the repository root (~2 minutes for the two shipped conversations)::

    .venv/bin/python -m benchmarks.retrieval [--locomo-dir benchmarks/data/locomo]

LoCoMo (Maharana et al., 2024, "Evaluating Very Long-Term Conversational Memory of LLM Agents")
holds long two-person conversations with questions whose answers are grounded in turns; the
full set is ``data/locomo10.json`` of snap-research/locomo, two of its conversations ship in
``benchmarks/data/locomo/``. Every turn is indexed as ``"<speaker>: <text>"`` (plus ``[image:
<caption>]``) as a memory of that conversation; each question of categories 1–4 is a query over
its own conversation, its evidence turns the relevant ones. Printed per method: recall_any@1/
3/5/10, NDCG@10 (binary gains), and for the product's hybrid (the local model's profile, as
the store ranks) how many hits top_k 3 at the profile's min_score returns and how often one is
evidence. The learner sets and the heavy learners are measured through the store by
``benchmarks/heavy_learners.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memora.longterm.embeddings import LocalUSE
from memora.longterm.lexical import BM25, tokenize
from memora.longterm.ranking import LOCAL, hybrid_scores, weight_kinds, weights_for_query

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
KS = (1, 3, 5, 10)
TOP_K = 3
DATA = Path(__file__).resolve().parent / "data"


@dataclass
class Pool:
    """One conversation: its turns, their vectors and BM25 index."""

    texts: list[str]
    vecs: F32 = field(default_factory=lambda: np.zeros((0, 512), dtype=np.float32))
    bm25: BM25 | None = None
    kinds: npt.NDArray[np.intp] | None = None


@dataclass
class Query:
    text: str
    relevant: set[int]  # indices into the pool
    pool: int
    vec: F32 = field(default_factory=lambda: np.zeros(512, dtype=np.float32))


def _samples(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    items = data if isinstance(data, list) else [data]
    return [s for s in items if isinstance(s, dict) and "qa" in s]


def load_locomo(locomo: Path) -> tuple[list[Pool], list[Query]]:
    """Every conversation of a folder of LoCoMo files (or one file) and its questions."""
    files = sorted(locomo.glob("*.json")) if locomo.is_dir() else [locomo]
    pools: list[Pool] = []
    queries: list[Query] = []
    for f in files:
        for sample in _samples(f):
            conv = sample.get("conversation", sample)
            sessions = sorted(
                (k for k in conv if re.fullmatch(r"session_\d+", k) and isinstance(conv[k], list)),
                key=lambda k: int(k.split("_")[1]),
            )
            texts: list[str] = []
            pos: dict[str, int] = {}
            for k in sessions:
                for turn in conv[k]:
                    text = f"{turn['speaker']}: {turn['text']}"
                    if turn.get("blip_caption"):
                        text += f" [image: {turn['blip_caption']}]"
                    pos[turn["dia_id"]] = len(texts)
                    texts.append(text)
            for qa in sample["qa"]:
                if qa.get("category") not in (1, 2, 3, 4):
                    continue
                ids = re.findall(r"D\d+:\d+", " ".join(map(str, qa.get("evidence", []))))
                relevant = {pos[d] for d in ids if d in pos}
                if relevant:
                    queries.append(Query(str(qa["question"]), relevant, len(pools)))
            pools.append(Pool(texts))
    return pools, queries


Method = Callable[[Pool, Query], F64]


def bm25(pool: Pool, q: Query) -> F64:
    assert pool.bm25 is not None
    return pool.bm25.scores(tokenize(q.text))


def dense(pool: Pool, q: Query) -> F64:
    return (pool.vecs @ q.vec).astype(np.float64)


def hybrid(pool: Pool, q: Query) -> F64:
    """The store's ranking with the local model's profile (memories without search terms)."""
    assert pool.kinds is not None
    return hybrid_scores(
        q.vec,
        pool.vecs,
        q.text,
        pool.texts,
        dense_weight=weights_for_query(pool.kinds, q.text, LOCAL),
        scale=LOCAL.scale,
        lexical_gate=LOCAL.lexical_gate,
        index=pool.bm25,
    ).score


METHODS: tuple[tuple[str, Method], ...] = (
    ("BM25 (memora.longterm.lexical)", bm25),
    ("USE dense (LocalUSE)", dense),
    ("hybrid, the product's ranking", hybrid),
)


def metrics(scores: list[F64], queries: list[Query]) -> dict[str, float]:
    hits = dict.fromkeys(KS, 0)
    ndcg = 0.0
    for s, q in zip(scores, queries, strict=True):
        rel = [int(i) in q.relevant for i in np.argsort(-s, kind="stable")[:10]]
        for k in KS:
            hits[k] += any(rel[:k])
        dcg = sum(1.0 / math.log2(r + 2) for r, x in enumerate(rel) if x)
        idcg = sum(1.0 / math.log2(r + 2) for r in range(min(len(q.relevant), 10)))
        ndcg += dcg / idcg
    n = max(len(queries), 1)
    return {**{f"R@{k}": hits[k] / n for k in KS}, "NDCG@10": ndcg / n}


def run(locomo: Path) -> None:
    pools, queries = load_locomo(locomo)
    use = LocalUSE()
    for p in pools:
        p.vecs = np.vstack([use._encode(p.texts[i : i + 256]) for i in range(0, len(p.texts), 256)])
        p.bm25 = BM25.from_texts(p.texts)
        p.kinds = np.array([weight_kinds(t, False) for t in p.texts], dtype=np.intp)
    for q in queries:
        q.vec = use._encode([q.text])[0]
    turns = sum(len(p.texts) for p in pools)
    print(f"LoCoMo: {len(pools)} conversations, {turns} turns, {len(queries)} questions")
    print("\n| method | recall_any@1 | @3 | @5 | @10 | NDCG@10 |\n|---|---|---|---|---|---|")
    for name, method in METHODS:
        scores = [method(pools[q.pool], q) for q in queries]
        r = metrics(scores, queries)
        print(
            f"| {name} | {r['R@1']:.3f} | {r['R@3']:.3f} | {r['R@5']:.3f} | {r['R@10']:.3f} "
            f"| {r['NDCG@10']:.3f} |"
        )
        if method is hybrid:
            kept = returned = 0
            for s, q in zip(scores, queries, strict=True):
                top = [int(i) for i in np.argsort(-s, kind="stable")[:TOP_K]]
                top = [i for i in top if s[i] >= LOCAL.min_score]
                returned += len(top)
                kept += any(i in q.relevant for i in top)
            n = len(queries)
            print(
                f"\nThe product's ranking at top_k {TOP_K} and min_score {LOCAL.min_score}: "
                f"{returned / n:.2f} hits a question, an evidence turn among them for "
                f"{kept / n:.3f} of the questions."
            )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--locomo-dir", type=Path, default=DATA / "locomo")
    run(ap.parse_args(argv).locomo_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
