"""The heavy-learners data files (``benchmarks/heavy_learners.py`` reads them): three learners
each, 120 memories with categories and situations, 30 labelled messages."""

from __future__ import annotations

import json

from tests.support.paths import BENCHMARK_DATA as DATA


def test_the_data_files() -> None:
    for name in (
        "heavy_learners_dev",
        "heavy_learners_blind",
        "heavy_learners_blind2",
        "heavy_learners_blind3",
    ):
        data = json.loads((DATA / f"{name}.json").read_text("utf-8"))
        sits = json.loads((DATA / f"{name}_situations.json").read_text("utf-8"))
        assert len(data["users"]) == 3
        for u in data["users"]:
            ids = [m["id"] for m in u["memories"]]
            assert len(ids) == 120 == len(set(ids)) and set(ids) <= sits.keys()
            assert {m["category"] for m in u["memories"]} <= {
                "level",
                "goal",
                "preference",
                "difficulty",
                "constraint",
                "personal",
                "other",
            }
            assert len(u["queries"]) == 30
            assert sum(not q["relevant"] for q in u["queries"]) == 6
            assert all(set(q["relevant"]) <= set(ids) for q in u["queries"])
