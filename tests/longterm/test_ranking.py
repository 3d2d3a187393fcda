"""Unit tests for the tokenizer, BM25 and the hybrid ranking (hand-made vectors, no model)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from memora.longterm.calibration import uncalibrated
from memora.longterm.lexical import BM25, tokenize
from memora.longterm.ranking import (
    DEFAULT_DENSE_WEIGHT,
    DEFAULT_MIN_SCORE,
    DEFAULT_SAME_SCRIPT_DENSE_WEIGHT,
    DEFAULT_TERMS_DENSE_WEIGHT,
    OTHER_SCRIPT,
    SAME_SCRIPT,
    TERMS,
    USE_SCALE,
    DenseScale,
    Hit,
    Scores,
    context_can_matter,
    dense_scale_for,
    follow_up_rank,
    han_dominant,
    hybrid_rank,
    hybrid_scores,
    weight_kinds,
    weights_for_query,
)

# ----------------------------------------------------------------------------- tokenizer


def test_tokenize_mixed_chinese_english() -> None:
    toks = tokenize("我想準備雅思，目標 IELTS 6.5, TOEIC 850, level B1")
    for term in ("ielts", "6.5", "toeic", "850", "b1", "level"):
        assert term in toks
    # Han runs: unigrams and bigrams; traditional folded to simplified
    for term in ("雅思", "准备", "雅", "思", "目标"):
        assert term in toks
    assert "準備" not in toks


def test_tokenize_drops_stop_words_and_function_characters() -> None:
    toks = tokenize("I am the one who does it, 我的")
    assert "the" not in toks and "i" not in toks and "am" not in toks
    assert "的" not in toks and "我" not in toks
    assert "我的" in toks  # the bigram stays


def test_tokenize_traditional_and_simplified_meet() -> None:
    assert set(tokenize("考試程度")) == set(tokenize("考试程度"))
    assert "程度" in tokenize("英文程度")


def test_tokenize_exam_aliases_and_full_width() -> None:
    assert "toeic" in tokenize("多益 850 分")
    assert tokenize("ＩＥＬＴＳ")[0] == tokenize("ielts")[0]
    assert set(tokenize("雅思")) & set(tokenize("IELTS"))


def test_tokenize_stemming_and_contractions() -> None:
    assert tokenize("exams") == tokenize("exam")
    assert tokenize("studying painting") == tokenize("study paint")
    assert tokenize("Caroline's") == tokenize("Caroline")
    assert tokenize("don't") == []


def test_tokenize_folds_inflections_a_suffix_stripper_missed() -> None:
    # Snowball: derivations; simplemma: irregular forms (the old stripper kept all of these apart)
    assert tokenize("painting painted paints") == tokenize("paint") * 3
    assert tokenize("relaxation") == tokenize("relaxing")
    assert tokenize("went") == tokenize("go")
    assert tokenize("children") == tokenize("child")
    assert tokenize("studies") == tokenize("studying")
    # exam names stay whole, in either script
    assert tokenize("IELTS TOEFL") == ["ielts", "toefl"]
    assert "ielts" in tokenize("準備雅思")


def test_tokenize_stems_every_word_the_same_way() -> None:
    assert tokenize("painted the houses") == tokenize("paint a house") == ["paint", "hous"]


def test_bm25_a_painted_memory_answers_a_painting_question() -> None:
    memories = ["Melanie painted a lake sunrise last year", "Melanie runs a pottery class"]
    bm = BM25.from_texts(memories)
    cov = bm.coverage(tokenize("What did Melanie paint?"))
    assert cov[0] > 0.9  # both the name and the verb match
    assert cov[1] < 0.3  # the name alone


def test_tokenize_empty() -> None:
    assert tokenize("") == []
    assert tokenize("  ，。!?  ") == []


# ----------------------------------------------------------------------------- BM25


def test_bm25_orders_by_term_rarity_and_match() -> None:
    docs = [
        "goal is toeic 850 next march",
        "likes watching movies",
        "studies every morning before work",
        "watching movies every weekend with friends",
    ]
    bm = BM25.from_texts(docs)
    s = bm.scores(tokenize("what toeic score?"))
    assert int(np.argmax(s)) == 0
    assert s[1] == s[2] == s[3] == 0.0
    s = bm.scores(tokenize("movies"))
    assert s[1] > s[3] > 0  # same term, shorter document first
    assert s[0] == 0.0


def test_bm25_chinese_bigrams_match() -> None:
    bm = BM25.from_texts(["正在準備雅思考試", "喜歡看電影", "對花生過敏"])
    assert int(np.argmax(bm.scores(tokenize("雅思要考幾分")))) == 0


def test_bm25_coverage_bounded_and_independent_of_pool_size() -> None:
    target = "目標是多益 850 分"
    query = tokenize("what toeic score do I need")
    alone = BM25.from_texts([target]).coverage(query)
    fillers = [f"filler memory number {i} about cooking" for i in range(500)]
    crowd = BM25.from_texts([target, *fillers]).coverage(query)
    assert 0.0 < alone[0] <= 1.0 and 0.0 < crowd[0] <= 1.0
    assert abs(alone[0] - crowd[0]) < 0.2
    assert np.all(crowd[1:] == 0.0)
    full = BM25.from_texts(["toeic score need"]).coverage(query)
    assert full[0] == pytest.approx(1.0)


def test_bm25_empty_corpus_and_query() -> None:
    bm = BM25.from_texts([])
    assert len(bm) == 0
    assert bm.scores(["x"]).shape == (0,)
    bm = BM25.from_texts(["a memory"])
    assert bm.scores([]).tolist() == [0.0]
    assert bm.coverage([]).tolist() == [0.0]


# ----------------------------------------------------------------------------- hybrid


def _unit(*rows: list[float]) -> npt.NDArray[np.float32]:
    a = np.asarray(rows, dtype=np.float32)
    out: npt.NDArray[np.float32] = (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)
    return out


def _vec_with_cosine(query: npt.NDArray[np.float32], cos: float, axis: int) -> list[float]:
    """A unit vector whose cosine with ``query`` (a unit basis vector) is ``cos``."""
    v = np.zeros_like(query)
    v += cos * query
    v[axis] = np.sqrt(1.0 - cos * cos)
    return [float(x) for x in v]


Q = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)


def test_hybrid_orders_by_dense_when_no_word_is_shared() -> None:
    texts = ["目前英文程度大約是 B1", "養了一隻柴犬", "下個月要去東京出差"]
    vecs = _unit(
        _vec_with_cosine(Q, 0.2, 1), _vec_with_cosine(Q, 0.5, 2), _vec_with_cosine(Q, 0.35, 3)
    )
    hits = hybrid_rank(Q, vecs, "do you remember my dog?", texts, top_k=3, min_score=0.0)
    assert [h.index for h in hits] == [1, 2, 0]
    assert all(isinstance(h, Hit) and h.lexical == 0.0 for h in hits)
    assert hits[0].dense == pytest.approx(0.5, abs=1e-5)


def test_hybrid_shared_rare_words_lift_a_memory() -> None:
    texts = ["target is TOEIC 850 by March", "likes spicy food", "works as a nurse"]
    vecs = _unit(
        _vec_with_cosine(Q, 0.35, 1), _vec_with_cosine(Q, 0.4, 2), _vec_with_cosine(Q, 0.38, 3)
    )
    hits = hybrid_rank(Q, vecs, "what TOEIC score am I aiming for?", texts, top_k=3, min_score=0)
    assert hits[0].index == 0
    assert hits[0].lexical > 0.0
    assert hits[0].score > hits[1].score


def test_scores_are_in_unit_interval_and_sorted() -> None:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(50, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    q = vecs[7] * 0.9 + vecs[3] * 0.1
    texts = [f"memory {i} word{i % 5}" for i in range(50)]
    hits = hybrid_rank(q, vecs, "word3 memory", texts, top_k=50, min_score=0.0)
    assert len(hits) == 50
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert sorted(h.index for h in hits) == list(range(50))


def test_no_result_rule_returns_nothing_for_unrelated_message() -> None:
    texts = ["正在準備雅思考試", "對花生過敏", "喜歡看英劇"]
    vecs = _unit(
        _vec_with_cosine(Q, 0.12, 1), _vec_with_cosine(Q, 0.08, 2), _vec_with_cosine(Q, 0.15, 3)
    )
    assert hybrid_rank(Q, vecs, "what's the capital of Australia?", texts) == []
    # the same memories with one clearly related one: only that one passes the default threshold
    vecs2 = _unit(
        _vec_with_cosine(Q, 0.45, 1), _vec_with_cosine(Q, 0.08, 2), _vec_with_cosine(Q, 0.15, 3)
    )
    hits = hybrid_rank(Q, vecs2, "IELTS 要考幾分", texts)
    assert [h.index for h in hits] == [0]
    assert hits[0].score >= DEFAULT_MIN_SCORE


def test_a_shared_ordinary_word_alone_does_not_pass() -> None:
    texts = ["Gina got good advice from investors"]
    vecs = _unit(_vec_with_cosine(Q, 0.05, 1))
    s = hybrid_scores(Q, vecs, "hi, good morning!", texts)
    assert s.lexical[0] > 0.3  # half of the message's words are in the memory...
    assert hybrid_rank(Q, vecs, "hi, good morning!", texts) == []  # ...but the meaning is not


def test_single_memory_user() -> None:
    texts = ["目標是多益 850 分"]
    vecs = _unit(_vec_with_cosine(Q, 0.42, 1))
    hits = hybrid_rank(Q, vecs, "what TOEIC score do I need?", texts)
    assert len(hits) == 1 and hits[0].index == 0
    assert hybrid_rank(Q, vecs, "tell me a joke", texts, min_score=0.9) == []


def test_top_k_and_ties() -> None:
    texts = ["a cat", "a dog", "a bird", "a fish"]
    vecs = _unit(*([_vec_with_cosine(Q, 0.5, 1)] * 4))
    hits = hybrid_rank(Q, vecs, "pets", texts, top_k=2, min_score=0.0)
    assert [h.index for h in hits] == [0, 1]  # ties keep the caller's order
    assert hybrid_rank(Q, vecs, "pets", texts, top_k=0, min_score=0.0) == []


def test_empty_inputs() -> None:
    empty = np.zeros((0, 4), dtype=np.float32)
    assert hybrid_rank(Q, empty, "anything", []) == []
    s = hybrid_scores(Q, empty, "anything", [])
    assert s.score.shape == s.dense.shape == s.lexical.shape == (0,)
    vecs = _unit(_vec_with_cosine(Q, 0.9, 1))
    hits = hybrid_rank(Q, vecs, "", ["some memory"], min_score=0.0)
    assert len(hits) == 1 and hits[0].lexical == 0.0


def test_bad_shapes_and_parameters_raise() -> None:
    vecs = _unit(_vec_with_cosine(Q, 0.5, 1), _vec_with_cosine(Q, 0.5, 2))
    with pytest.raises(ValueError):
        hybrid_rank(Q, vecs, "x", ["only one text"], min_score=0.0)
    with pytest.raises(ValueError):
        hybrid_rank(np.ones(3, dtype=np.float32), vecs, "x", ["a", "b"], min_score=0.0)
    with pytest.raises(ValueError):
        hybrid_rank(Q, vecs, "x", ["a", "b"], index=BM25.from_texts(["a"]))
    with pytest.raises(ValueError):
        hybrid_rank(Q, vecs, "x", ["a", "b"], dense_weight=1.5)
    with pytest.raises(ValueError):
        hybrid_rank(Q, vecs, "x", ["a", "b"], dense_weight=[0.3, 0.4, 0.4])  # one too many
    with pytest.raises(ValueError):
        hybrid_rank(Q, vecs, "x", ["a", "b"], dense_weight=[0.3, -0.1])
    with pytest.raises(ValueError):
        DenseScale(0.5, 0.5)


def test_a_weight_per_memory_fuses_each_memory_with_its_own() -> None:
    """A memory with search terms weighs its cosine less (DEFAULT_TERMS_DENSE_WEIGHT): the same
    cosine and the same shared words score as a single weight would for each one."""
    texts = ["養了一隻柴犬 (dog 柴犬 pet)", "養了一隻柴犬"]
    vecs = _unit(_vec_with_cosine(Q, 0.3, 1), _vec_with_cosine(Q, 0.3, 2))
    query = "tips for my dog"
    weights = [DEFAULT_TERMS_DENSE_WEIGHT, DEFAULT_DENSE_WEIGHT]
    mixed = hybrid_scores(Q, vecs, query, texts, dense_weight=weights).score
    for i, w in enumerate(weights):
        alone = hybrid_scores(Q, vecs, query, texts, dense_weight=w).score
        assert mixed[i] == pytest.approx(alone[i])
    assert DEFAULT_TERMS_DENSE_WEIGHT < DEFAULT_DENSE_WEIGHT
    assert mixed[0] > mixed[1]  # the shared term counts, and counts more


def test_prebuilt_index_gives_the_same_result() -> None:
    texts = ["likes jazz music", "plays basketball", "jazz piano lessons on sunday"]
    vecs = _unit(
        _vec_with_cosine(Q, 0.3, 1), _vec_with_cosine(Q, 0.1, 2), _vec_with_cosine(Q, 0.3, 3)
    )
    a = hybrid_rank(Q, vecs, "jazz", texts, min_score=0.0)
    b = hybrid_rank(Q, vecs, "jazz", texts, min_score=0.0, index=BM25.from_texts(texts))
    assert a == b


def test_dense_scale_lookup() -> None:
    assert dense_scale_for("use-multilingual-v3") == USE_SCALE
    # an embedder nobody calibrated keeps its raw cosine: nothing borrowed from USE
    assert dense_scale_for("text-embedding-3-small") == DenseScale(0.0, 1.0) != USE_SCALE


# ----------------------------------------------------------------------------- script-aware weight


def test_han_dominant_counts_han_characters_against_latin_letters() -> None:
    assert han_dominant("使用者正在準備雅思考試，目標 6.5 分。")
    assert han_dominant("寫一封給 overseas client 的報價 email")  # 7 Han, 19 letters
    assert not han_dominant("The user is preparing for IELTS")
    assert not han_dominant("how do I say 謝謝 in English?")
    assert not han_dominant("850 / 6.5 !")  # neither script: Latin
    assert not han_dominant("")


def test_dense_weight_depends_on_terms_and_on_the_message_script() -> None:
    zh, en = "使用者喜歡看韓劇", "The user likes Korean dramas"
    same, other = DEFAULT_SAME_SCRIPT_DENSE_WEIGHT, DEFAULT_DENSE_WEIGHT
    assert same < other
    assert weight_kinds(zh, False) == (SAME_SCRIPT, OTHER_SCRIPT)
    assert weight_kinds(en, False) == (OTHER_SCRIPT, SAME_SCRIPT)
    both = DEFAULT_TERMS_DENSE_WEIGHT
    assert weight_kinds(zh, True) == weight_kinds(en, True) == (TERMS, TERMS)
    kinds = np.array([weight_kinds(zh, False), weight_kinds(en, False), weight_kinds(zh, True)])
    assert list(weights_for_query(kinds, "推薦一部韓劇")) == [same, other, both]
    assert list(weights_for_query(kinds, "any Korean drama to recommend?")) == [other, same, both]
    # an uncalibrated embedder weighs every kind alike
    flat = uncalibrated("text-embedding-3-small")
    assert len(set(weights_for_query(kinds, "推薦一部韓劇", flat))) == 1


def test_same_script_words_lead_and_cross_script_keeps_the_dense_threshold() -> None:
    """An English message: the English memory that shares its words scores its lexical share at
    weight 1 - 0.2, the Chinese memory (no word can be shared) keeps 0.4 x its cosine."""
    texts = ["The user likes Korean dramas", "使用者喜歡看韓劇"]
    pairs = np.array([weight_kinds(t, False) for t in texts])
    query = "any Korean dramas to recommend?"
    vecs = np.array([[1.0, 0.0], [0.8, 0.6]])
    qv = np.array([0.6, 0.8])  # cosines 0.6 and 0.96
    s = hybrid_scores(qv, vecs, query, texts, dense_weight=weights_for_query(pairs, query))
    assert s.lexical[1] == 0.0
    assert s.score[1] == pytest.approx(DEFAULT_DENSE_WEIGHT * 1.0)  # dense01 = 1 at 0.96
    same = DEFAULT_SAME_SCRIPT_DENSE_WEIGHT
    assert s.score[0] == pytest.approx(same * 1.0 + (1 - same) * s.lexical[0])


def _scores(values: list[float]) -> Scores:
    arr = np.array(values, dtype=np.float64)
    return Scores(arr, arr, np.zeros_like(arr))


def test_follow_up_rank_puts_the_context_after_what_the_message_finds() -> None:
    message = _scores([0.20, 0.05, 0.01, 0.10])
    context = _scores([0.10, 0.90, 0.30, 0.12])
    hits = follow_up_rank(message, context, 0.14, 5, 0.0)
    # the message's own hit, then the context's by their context score, then the message's rest
    assert [h.index for h in hits] == [0, 1, 2, 3]
    assert [h.score for h in hits] == [0.20, 0.90, 0.30, 0.10]
    cut = follow_up_rank(message, context, 0.14, 5, 0.14)
    assert [h.index for h in cut] == [0, 1, 2]
    assert [h.index for h in follow_up_rank(message, context, 0.14, 2, 0.0)] == [0, 1]
    assert follow_up_rank(message, context, 0.14, 0, 0.0) == []
    assert follow_up_rank(_scores([]), _scores([]), 0.14, 3, 0.0) == []
    # a message that finds nothing: the context's order, and nothing it does not find either
    weak = _scores([0.01, 0.02, 0.03, 0.04])
    assert [h.index for h in follow_up_rank(weak, context, 0.14, 5, 0.14)] == [1, 2]


def test_the_context_cannot_matter_once_the_message_fills_top_k() -> None:
    """Where context_can_matter says no, follow_up_rank gives the same hits whatever the
    context's scores (so the store may skip embedding it); where it says yes, some context
    changes them. Random scores with ties, floors above, at and below min_score."""
    rng = np.random.default_rng(12)
    skipped = mattered = 0
    for trial in range(3000):
        n = int(rng.integers(1, 12))
        grid = rng.integers(0, 8, size=(4, n)) / 20.0  # coarse values: many ties
        message = Scores(grid[0], grid[1], rng.random(n))
        context = Scores(grid[2], grid[3], rng.random(n))
        floor = float(rng.choice([0.1, 0.14, 0.2]))
        min_score = float(rng.choice([0.0, 0.1, 0.14, 0.25]))
        top_k = int(rng.integers(0, 5))
        full = follow_up_rank(message, context, floor, top_k, min_score)
        alone = follow_up_rank(message, message, floor, top_k, min_score)
        if context_can_matter(message, floor, top_k):
            mattered += full != alone
        else:
            assert full == alone, trial
            skipped += top_k > 0
    assert skipped > 1000 and mattered > 200  # both sides are exercised


def test_context_can_matter_counts_the_message_s_own_hits_at_the_floor() -> None:
    message = _scores([0.20, 0.14, 0.13, 0.50])
    assert not context_can_matter(message, 0.14, 3)  # 0.20, 0.14 and 0.50 reach the floor
    assert context_can_matter(message, 0.14, 4)
    assert context_can_matter(message, 0.15, 3)
    assert not context_can_matter(message, 0.14, 0)  # no hits at all: nothing to add
    assert not context_can_matter(_scores([]), 0.14, 3)
