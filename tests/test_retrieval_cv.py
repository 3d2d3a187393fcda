"""Leave-one-user-out cross-validation of the learner-set retrieval benchmark
(``benchmarks/retrieval.py --candidates --cv``, ``retrieval_candidates.cross_validate``) on a
real slice: three learners of ``learner_set.json``, the real USE model, a small grid. No figure
is asserted; what is checked is that each fold chooses as ``choose`` would on the other users
alone, that what the left-out user's queries say cannot move their fold's choice, and that the
pooled figures are the folds' sums."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memora.longterm.embeddings import LocalUSE
from tests.bench import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
LEARNERS = ROOT / "benchmarks" / "data" / "learner_set.json"
SLICE = ("u1", "h1", "h7")  # a tuning user and two held-out ones


rc = load_benchmark("retrieval_candidates")
CONFIGS = [
    rc.Config(w, g, m) for w in (0.3, 0.5) for g in (0.0, 0.5) for m in (0.1, 0.14, 0.2, 0.26)
]
NAMES = ["baseline (text, BM25 + USE)", rc.PRODUCT]


@pytest.fixture(scope="module")
def learners(embedder: LocalUSE) -> tuple[list[Any], list[Any]]:
    """The slice's users and queries, embedded once (q.user renumbered within the slice)."""
    users, queries = rc.load_pooled(LEARNERS)
    keep = [k for k, u in enumerate(users) if u.name in SLICE]
    assert [users[k].name for k in keep] == list(SLICE)
    sliced = [q for q in queries if q.user in keep]
    for q in sliced:
        q.user = keep.index(q.user)
    users = [users[k] for k in keep]
    embed = rc.as_embed(embedder._encode, lambda text: embedder._encode([text])[0])
    rc.embed_all(users, sliced, {"USE": embed})  # as benchmarks/retrieval.py's USEEncoder
    return users, sliced


def _candidate(name: str) -> Any:
    return next(c for c in rc.CANDIDATES if c.name == name)


@pytest.mark.parametrize("name", NAMES)
def test_each_fold_chooses_as_choose_does_without_its_user(
    learners: tuple[list[Any], list[Any]], name: str
) -> None:
    users, queries = learners
    c = _candidate(name)
    sigs = rc.signals(c, users, queries)
    # not a vacuous choice: the configurations differ on the slice
    values = {rc.objective(rc.figures(c, cfg, sigs, queries)) for cfg in CONFIGS}
    assert len(values) > 1
    cv = rc.cross_validate(c, users, queries, sigs, CONFIGS)
    assert [f.user for f in cv.folds] == list(SLICE)
    for u, fold in enumerate(cv.folds):
        others = [i for i, q in enumerate(queries) if q.user != u]
        mine = [i for i, q in enumerate(queries) if q.user == u]
        expected = rc.choose(c, [sigs[i] for i in others], [queries[i] for i in others], CONFIGS)
        assert fold.config == expected, fold.user
        held = rc.figures(c, fold.config, [sigs[i] for i in mine], [queries[i] for i in mine])
        assert rc.as_figures(fold.counts) == held
        at_default = rc.product_default(c)
        assert rc.as_figures(fold.default) == rc.figures(
            c, at_default, [sigs[i] for i in mine], [queries[i] for i in mine]
        )
    assert cv.everyone == rc.choose(c, sigs, queries, CONFIGS)
    assert rc.as_figures(cv.everyone_counts) == rc.figures(c, cv.everyone, sigs, queries)


@pytest.mark.parametrize("name", NAMES)
def test_the_left_out_users_labels_do_not_move_their_fold(
    learners: tuple[list[Any], list[Any]], name: str
) -> None:
    users, queries = learners
    c = _candidate(name)
    sigs = rc.signals(c, users, queries)  # labels play no part in the signals
    before = rc.cross_validate(c, users, queries, sigs, CONFIGS)
    for u in range(len(users)):
        # every answerable query of user u becomes unrelated and every unrelated one answerable
        flipped = [
            replace(q, relevant=set() if q.relevant else {0}) if q.user == u else q for q in queries
        ]
        after = rc.cross_validate(c, users, flipped, sigs, CONFIGS)
        assert after.folds[u].config == before.folds[u].config
        assert not np.array_equal(after.folds[u].counts, before.folds[u].counts)
        for k in range(len(users)):  # the other folds report on unchanged queries
            if k != u:
                assert after.folds[k].user == before.folds[k].user
                chosen = after.folds[k].config
                mine = [i for i, q in enumerate(flipped) if q.user == k]
                assert rc.as_figures(after.folds[k].counts) == rc.figures(
                    c, chosen, [sigs[i] for i in mine], [flipped[i] for i in mine]
                )


@pytest.mark.parametrize("name", NAMES)
def test_pooled_counts_are_the_folds_sums(learners: tuple[list[Any], list[Any]], name: str) -> None:
    users, queries = learners
    c = _candidate(name)
    sigs = rc.signals(c, users, queries)
    cv = rc.cross_validate(c, users, queries, sigs, CONFIGS)
    pooled = cv.pooled()
    assert np.array_equal(pooled, np.sum([f.counts for f in cv.folds], axis=0))
    assert np.array_equal(pooled, cv.per_query.sum(axis=0))
    assert np.array_equal(cv.pooled([1, 2]), cv.folds[1].counts + cv.folds[2].counts)
    n_ans = sum(bool(q.relevant) for q in queries)
    assert (pooled[4], pooled[5]) == (n_ans, len(queries) - n_ans)
    assert cv.per_query.shape == (len(queries), len(rc.COUNTS))
    assert set(np.unique(cv.per_query)) <= {0, 1}  # each query counts once per figure
    # the defaults are one configuration for every fold: pooled, they are the figures on all
    assert rc.as_figures(cv.default_per_query.sum(axis=0)) == rc.figures(
        c, rc.product_default(c), sigs, queries
    )
