"""The learner sets that benchmarks/heavy_learners.py reads are well formed: unique ids, every
labelled memory exists in its own user, follow-ups carry their previous messages, and each blind
set holds only held-out users, so no benchmark can tune on it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.paths import BENCHMARK_DATA as DATA

SETS = ["learner_set_fresh5.json", "learner_set_fresh6.json", "learner_set_fresh7.json"]


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("name", SETS)
def test_learner_set_is_well_formed(name: str) -> None:
    data = _load(name)
    assert {"description", "terms_note", "previous_note", "users"} <= set(data)
    user_ids = [u["id"] for u in data["users"]]
    assert len(user_ids) == len(set(user_ids))
    memory_ids: set[str] = set()
    for user in data["users"]:
        assert user["split"] in ("tune", "heldout")
        own = [m["id"] for m in user["memories"]]
        assert own, user["id"]
        assert not memory_ids & set(own) and len(own) == len(set(own)), user["id"]
        memory_ids |= set(own)
        for m in user["memories"]:
            assert m["lang"] in ("zh-TW", "zh-CN", "en") and m["text"] and m["terms"], m["id"]
        texts = [q["text"] for q in user["queries"]]
        assert len(texts) == len(set(texts)), user["id"]
        for q in user["queries"]:
            assert set(q) <= {"text", "relevant", "previous"}, q
            assert set(q["relevant"]) <= set(own), (user["id"], q["text"])
            assert len(q["relevant"]) == len(set(q["relevant"])), q["text"]
            if "previous" in q:
                assert q["previous"] and all(isinstance(p, str) and p for p in q["previous"])


@pytest.mark.parametrize(
    ("name", "prefix"),
    [("learner_set_fresh5", "n"), ("learner_set_fresh6", "p"), ("learner_set_fresh7", "q")],
)
def test_fresh_set_only_reports(name: str, prefix: str) -> None:
    fresh = _load(f"{name}.json")
    assert {u["split"] for u in fresh["users"]} == {"heldout"}
    assert [u["id"] for u in fresh["users"]] == [f"{prefix}{i}" for i in range(1, 11)]
    queries = [q for u in fresh["users"] for q in u["queries"]]
    assert any(not q["relevant"] for q in queries)  # messages that should find nothing
    assert any("previous" in q for q in queries)  # follow-ups
    for older in set(SETS) - {f"{name}.json"}:
        old = _load(older)
        assert not {u["id"] for u in old["users"]} & {u["id"] for u in fresh["users"]}
        old_texts = {q["text"] for u in old["users"] for q in u["queries"]}
        # written anew, not copied; a classic general question that should find nothing
        # ("What's the difference between 'affect' and 'effect'?") may recur
        assert not old_texts & {q["text"] for q in queries if q["relevant"]}


@pytest.mark.parametrize("name", SETS)
def test_every_memory_has_its_situations(name: str) -> None:
    """The situations beside a set (benchmarks/data/README.md) cover exactly its memories."""
    ids = {m["id"] for u in _load(name)["users"] for m in u["memories"]}
    situations = _load(name.replace(".json", "_situations.json"))
    assert set(situations) == ids
    assert all(v and all(isinstance(p, str) and p.strip() for p in v) for v in situations.values())
