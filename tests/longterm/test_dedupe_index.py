"""The shortcuts that keep a write and a search cheap for a user with thousands of memories
decide exactly what the full comparison decided: the duplicate index only skips memories that
`relation` calls DISTINCT at any cosine, and the ranking sorts only the scores that can be hits."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest

from memora.longterm import MemoryStore, NewMemory
from memora.longterm.calibration import LOCAL_DEDUPE
from memora.longterm.dedupe import (
    DedupeIndex,
    Relation,
    candidate_cosines,
    embedding_text,
    normalise_text,
    relation,
)
from memora.longterm.embeddings import LocalUSE
from memora.longterm.matrix import Matrix
from memora.longterm.ranking import Scores, _top_order, follow_up_rank
from memora.longterm.snapshot import UserData
from memora.textnorm import to_simplified
from tests.support.index import RELATION_TEXTS, entry

# -- the ranking's selection -----------------------------------------------------------------


def full_sort(score: np.ndarray, dense: np.ndarray, top_k: int, min_score: float) -> list[int]:
    """The ranking before the shortcut: sort every candidate, stop at min_score or top_k."""
    hits: list[int] = []
    for i in np.lexsort((np.arange(len(score)), -dense, -score)):
        if score[i] < min_score or len(hits) >= top_k:
            break
        hits.append(int(i))
    return hits


def test_ranking_sorts_only_what_can_be_a_hit_and_orders_as_the_full_sort() -> None:
    rng = np.random.default_rng(4)
    for trial in range(400):
        n = int(rng.integers(0, 60))
        # few distinct values: many ties on the score, on the cosine, or on both
        score = rng.choice([0.0, 0.1, 0.14, 0.2, 0.5, 0.9, 1.0], size=n)
        dense = rng.choice([-0.2, 0.1, 0.3, 0.3, 0.7], size=n)
        if trial % 7 == 0 and n:
            score[rng.integers(n)] = np.nan  # a zero vector's cosine: sorts after numbers
        top_k = int(rng.integers(1, 8))
        min_score = float(rng.choice([0.14, 0.0, -np.inf, 0.5]))
        got = _top_order(score, dense, top_k, min_score).tolist()
        assert got == full_sort(score, dense, top_k, min_score), (score, dense, top_k, min_score)


def full_sort_follow_up(
    message: Scores, context: Scores, floor: float, top_k: int, min_score: float
) -> list[tuple[int, float]]:
    """A follow-up's ranking with every memory sorted (ranking.follow_up_rank's rule)."""
    own = message.score >= floor
    added = ~own & (context.score >= floor)
    score = np.where(added, context.score, message.score)
    dense = np.where(added, context.dense, message.dense)
    group = np.where(own, 0, np.where(added, 1, 2))
    hits: list[tuple[int, float]] = []
    for i in np.lexsort((np.arange(len(score)), -dense, -score, group)):
        if score[i] < min_score or len(hits) >= top_k:
            break
        hits.append((int(i), float(score[i])))
    return hits


def test_a_follow_up_sorts_only_what_can_be_a_hit_and_orders_as_the_full_sort() -> None:
    rng = np.random.default_rng(6)
    values = [0.0, 0.1, 0.14, 0.2, 0.3, 0.5, 0.9]

    def scores(n: int) -> Scores:
        return Scores(
            rng.choice(values, size=n),
            rng.choice([-0.2, 0.1, 0.3, 0.7], size=n),
            rng.choice([0.0, 0.5], size=n),
        )

    for trial in range(400):
        n = int(rng.integers(1, 60))
        message, context = scores(n), scores(n)
        if trial % 9 == 0:
            message.score[rng.integers(n)] = np.nan
        floor = float(rng.choice([0.14, 0.2, 0.3]))
        top_k = int(rng.integers(1, 8))
        min_score = float(rng.choice([0.14, 0.0, -np.inf]))
        got = [
            (h.index, h.score) for h in follow_up_rank(message, context, floor, top_k, min_score)
        ]
        want = full_sort_follow_up(message, context, floor, top_k, min_score)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert np.array_equal([v for _, v in got], [v for _, v in want], equal_nan=True)


# -- the duplicate index ---------------------------------------------------------------------


def test_the_index_leaves_out_only_memories_relation_calls_distinct_at_any_cosine() -> None:
    texts = [*RELATION_TEXTS, *[to_simplified(t) for t in RELATION_TEXTS], *facts(120)]
    index = DedupeIndex(texts)
    cosines = np.linspace(-1.0, 1.0, 41)
    left_out = kept = 0
    for new in texts:
        candidates = set(index.candidates(new).tolist())
        for i, old in enumerate(texts):
            if i in candidates or normalise_text(new) == normalise_text(old):
                kept += 1
                continue
            for cosine in cosines:
                assert relation(new, old, float(cosine)) is Relation.DISTINCT, (new, old, cosine)
            left_out += 1
    assert left_out > 2 * kept  # most pairs need no comparison at all


def test_the_index_carried_through_writes_equals_a_fresh_build() -> None:
    rng = random.Random(3)
    pool = [*RELATION_TEXTS, *facts(60)]
    texts: list[str] = []
    index = DedupeIndex([])
    snapshots: list[tuple[DedupeIndex, dict[str, dict[object, list[int]]]]] = []
    for _ in range(150):
        op = rng.random()
        if texts and op < 0.3:
            i = rng.randrange(len(texts))
            old, texts[i] = texts[i], rng.choice(pool)
            index = index.replaced(i, old, texts[i])
        elif texts and op < 0.4:
            i = rng.randrange(len(texts))
            del texts[i]
            index = index.removed(i)
        else:
            texts.append(rng.choice(pool))
            index = index.appended(texts[-1])
        want = DedupeIndex(texts)
        assert index.postings() == want.postings()
        assert len(index) == len(texts)
        snapshots.append((index, want.postings()))
    for snapshot, postings in snapshots:  # later writes never changed an earlier index
        assert snapshot.postings() == postings


def test_user_data_carries_the_index_and_the_next_order_number() -> None:
    data = UserData((), np.zeros((0, 8), dtype=np.float32))
    assert data.next_seq == 1
    data.dedupe  # noqa: B018 - the writes carry it from here on
    for k, text in enumerate(RELATION_TEXTS[:6], start=1):
        data = data.appended(entry(k, text))
        assert "dedupe" in data.__dict__
    data = data.replaced(2, entry(3, RELATION_TEXTS[9]))
    assert data.dedupe.postings() == DedupeIndex(data.texts).postings()
    assert data.next_seq == max(e.seq for e in data.entries) + 1
    data = data.without(data.entries[-1].memory.id)
    assert data.dedupe.postings() == DedupeIndex(data.texts).postings()
    assert data.next_seq == max(e.seq for e in data.entries) + 1


# -- the store, with real Chroma and the real embedder -----------------------------------------

LEVELS = ["A2", "B1", "B2", "C1"]
TOPICS_EN = """airports hotels meetings emails interviews contracts hospitals banks trains museums
movies podcasts football tennis hiking cooking coffee gardens dogs cats phones marketing sales
finance nursing teaching history music guitar yoga shopping travel weddings""".split()
TOPICS_ZH = """機場 飯店 會議 郵件 面試 合約 醫院 銀行 火車 博物館 電影 足球 網球 爬山 做菜 咖啡
花園 寵物 手機 行銷 業務 財務 護理 教學 歷史 音樂 吉他 瑜伽 購物 旅遊 婚禮 机场 会议 电影""".split()


def facts(n: int, seed: int = 7) -> list[str]:
    """n distinct learner facts in English, 繁體 and 简体 that share many words (templates)."""
    rng = random.Random(seed)
    makers = [
        lambda: (
            f"The user wants to learn words about {rng.choice(TOPICS_EN)}"
            f" and {rng.choice(TOPICS_EN)}."
        ),
        lambda: f"使用者想學和{rng.choice(TOPICS_ZH)}、{rng.choice(TOPICS_ZH)}有關的英文單字。",
        lambda: (
            f"The user's level is {rng.choice(LEVELS)} when discussing {rng.choice(TOPICS_EN)}."
        ),
        lambda: f"使用者談{rng.choice(TOPICS_ZH)}時的程度是 {rng.choice(LEVELS)}。",
        lambda: (
            f"The user has a TOEIC exam about {rng.choice(TOPICS_EN)} in 2027-"
            f"{rng.randint(1, 12):02d}."
        ),
        lambda: f"用户希望多练习{rng.choice(TOPICS_ZH)}相关的对话。",
    ]
    out: dict[str, None] = {}
    while len(out) < n:
        out.setdefault(rng.choice(makers)(), None)
    return list(out)


def probes(pool: list[str], n: int) -> list[str]:
    """New facts that repeat, update or differ from pool facts: other levels and months,
    繁 → 简, the two topics swapped, one topic dropped, and brand-new facts."""
    rng = random.Random(9)
    out: list[str] = []
    for text in rng.sample(pool, n):
        for a, b in itertools.pairwise([*LEVELS, LEVELS[0]]):
            text = text.replace(a, b) if rng.random() < 0.5 else text
        if " and " in text and rng.random() < 0.5:
            head, tail = text.removesuffix(".").split(" about ", 1)
            first, second = tail.split(" and ")
            text = rng.choice([f"{head} about {second} and {first}.", f"{head} about {first}."])
        out.append(to_simplified(text) if rng.random() < 0.5 else text)
    return out + facts(n, seed=11)[: n // 3]


def full_scan(data: UserData, text: str, vec: np.ndarray) -> tuple[str, str | None]:
    """What a new memory is, compared with every one of the user's memories (no index, no
    floor): ("duplicate" | "superseded" | "added", the memory it repeats or updates)."""
    for e in data.entries:
        if normalise_text(e.memory.text) == normalise_text(text):
            return "duplicate", e.memory.id
    cosines = data.vectors @ vec
    update: str | None = None
    for i in np.argsort(-cosines, kind="stable"):
        verdict = relation(text, data.entries[i].memory.text, float(cosines[i]))
        if verdict is Relation.DUPLICATE:
            return "duplicate", data.entries[i].memory.id
        if verdict is Relation.UPDATE and update is None:
            update = data.entries[i].memory.id
    return ("superseded", update) if update else ("added", None)


@pytest.mark.parametrize("pool_size", [400])
async def test_a_large_pool_gets_the_same_decisions_as_the_full_scan(
    tmp_path: Path, embedder: LocalUSE, pool_size: int
) -> None:
    pool = facts(pool_size)
    async with MemoryStore(tmp_path / "chroma", embedder) as store:
        seeded = await store.writer.add_many(5, [NewMemory(t) for t in pool])
        await store.writer.add(
            6, NewMemory(pool[0], "manual")
        )  # another user's memory is never compared
        decided: dict[str, int] = {}
        for text in probes([r.memory.text for r in seeded], 60):
            data = store._cache.get(5)
            assert data is not None
            vec = (await embedder.embed([embedding_text(text)], kind="passage")).vectors[0]
            want = full_scan(data, text, vec)
            got = await store.writer.add(5, NewMemory(text, "extracted"))
            target = got.memory.id if got.action != "added" else None
            assert (got.action, target) == want, text
            decided[got.action] = decided.get(got.action, 0) + 1
            assert got.memory.user_id == 5
        assert await store.count(6) == 1
    assert set(decided) == {"added", "duplicate", "superseded"}, decided  # all three happened


def test_candidate_cosines_decide_as_the_whole_product() -> None:
    """The candidates' own rows give their cosines unless rounding could change a decision:
    then the whole product's (a cosine at a threshold, or two candidates that close)."""
    rng = np.random.default_rng(2)
    dim = 512
    matrix = rng.standard_normal((2000, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    t = LOCAL_DEDUPE
    thresholds = [t.same_terms, t.same_words, t.cross_language, t.update]
    for _ in range(200):
        vec = matrix[rng.integers(len(matrix))] + 0.8 * rng.standard_normal(dim).astype(np.float32)
        vec /= np.linalg.norm(vec)
        candidates = np.sort(rng.choice(len(matrix), int(rng.integers(1, 60)), replace=False))
        full = (matrix @ vec)[candidates]
        got = candidate_cosines(Matrix.of(matrix), candidates, vec, 0.35)
        for t in [0.35, *thresholds]:
            assert np.array_equal(got >= t, full >= t)
        above = full >= 0.35
        assert np.array_equal(
            np.argsort(-got[above], kind="stable"), np.argsort(-full[above], kind="stable")
        )
    # a row at a threshold's cosine, and two equal rows: the whole product's cosines, to the bit
    row = matrix[7]
    other = matrix[8] - (matrix[8] @ row) * row
    other /= np.linalg.norm(other)
    for t in thresholds:
        vec = (t * row + np.sqrt(1 - t * t) * other).astype(np.float32)
        rows = np.vstack([matrix, row, row]).astype(np.float32)
        candidates = np.array([3, len(matrix), len(matrix) + 1], dtype=np.intp)
        got = candidate_cosines(Matrix.of(rows), candidates, vec, 0.35)
        assert np.array_equal(got, (rows @ vec)[candidates])
