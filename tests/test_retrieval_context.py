"""Section (f) of ``benchmarks/retrieval.py`` (what reaches the context) indexes each memory as
the product does: its text, search terms and situations."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.bench import load_benchmark

load_benchmark("retrieval_candidates")  # imported by name inside retrieval.context_pools
retrieval = load_benchmark("retrieval")
DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data"


class _Vectors:
    """Vectors that do not matter here: the test reads what is indexed, not how it ranks."""

    def passages(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32) / 2

    def query(self, text: str) -> np.ndarray:
        return np.ones(4, dtype=np.float32) / 2


def test_section_f_indexes_terms_and_situations() -> None:
    path = DATA / "learner_set.json"
    situations = json.loads((DATA / "learner_set_situations.json").read_text("utf-8"))
    users = [u for u in json.loads(path.read_text("utf-8"))["users"] if u["split"] == "tune"]
    extra = ["An extra memory."]
    vecs = _Vectors()
    pools, queries, _ = retrieval.context_pools(path, "tune", vecs, extra, vecs.passages(extra))
    assert len(pools) == len(users) and queries
    for pool, user in zip(pools, users, strict=True):
        assert pool.texts[-1] == pool.indexed[-1] == "An extra memory."  # no terms: as it is
        for i, memory in enumerate(user["memories"]):
            assert pool.texts[i] == memory["text"]  # what reaches the context: the text alone
            assert pool.indexed[i].startswith(memory["text"])
            assert all(s in pool.indexed[i] for s in situations[memory["id"]])


def test_section_f_tells_the_kind_of_a_miss_past_the_budget() -> None:
    kinds = retrieval.MISS_KINDS
    order = [4, 0, 1, 2, 3, 5, 6, 7, 8, 9]  # the ranking: memory 4 first
    query = retrieval.Query("think 這個字怎麼念", {0}, 0)
    # filled by rank with no floor, the budget would hold memory 0: the word question's floor cut it
    assert retrieval.miss_kind(query, order, [4, 0, 1]) == kinds[0]
    # memory 3 ranks 5th, the budget holds 3 (within twice that): just past it
    assert retrieval.miss_kind(retrieval.Query("q", {3}, 0), order, [4, 0, 1]) == kinds[1]
    # memory 9 ranks 10th: deeper
    assert retrieval.miss_kind(retrieval.Query("q", {9}, 0), order, [4, 0, 1]) == kinds[2]
    # the best-ranked relevant memory decides
    assert retrieval.miss_kind(retrieval.Query("q", {9, 2}, 0), order, [4, 0, 1]) == kinds[1]
