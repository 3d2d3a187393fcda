"""The CC-CEDICT bridge (memora.longterm.bridge) with the real packaged dictionary: Chinese
words meet their English glosses in BM25 and back, only at the bridge's weight, never more than
the words they translate, never for "English" itself, and never across users."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memora.longterm import MemoryStore, NewMemory
from memora.longterm.bridge import UNBRIDGED, bridged_coverage, dictionary, units
from memora.longterm.lexical import BM25, tokenize
from memora.longterm.records import indexed_text
from tests.bench import load_benchmark

# The bridge as first written, one pass over every memory per term and per translation (the
# formula of the module docstring, dense): the reference that bridged_coverage, which sums
# over postings, must equal; retrieval_overhead.py times it as "the code before".
dense_pass_bridge = load_benchmark("retrieval_overhead").dense_pass_bridge

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)

MEMORIES = [
    "每天搭捷運要四十分鐘",  # commutes on the MRT
    "在台中的醫院當護理師，常輪夜班",  # a nurse on night shifts
    "Has a daughter in first grade",
    "Likes hiking on weekends",
]


def test_the_packaged_dictionary_translates_both_ways() -> None:
    d = dictionary()
    assert ["night", "shift"] in d.glosses("夜班")
    assert ["subway"] in d.glosses("捷运")  # keyed by the folded form of 捷運 as well
    assert "夜班" in d.words("night shift")
    assert "女儿" in d.words("daughter")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("something to listen to on the subway?", 0),  # subway → 捷运 (written 捷運)
        ("I have a night shift tomorrow", 1),  # night shift → 夜班
        ("我女兒今天很開心", 2),  # 女兒 → daughter
        ("週末想去爬山健行", 3),  # 爬山 → climb a mountain / hike
    ],
)
def test_a_translation_is_a_lexical_match_across_scripts(query: str, expected: int) -> None:
    index = BM25.from_texts(MEMORIES)
    plain = index.coverage(tokenize(query))
    bridged = bridged_coverage(index, query, 0.5)
    assert plain[expected] == 0.0  # no shared word: only the bridge can find it
    assert bridged[expected] > 0.05
    assert int(np.argmax(bridged)) == expected
    assert np.all(bridged >= plain)  # it only adds
    assert np.all(bridged <= plain + 0.5 + 1e-12)  # at most the weight × the whole message


def test_weight_zero_or_no_dictionary_word_is_plain_bm25() -> None:
    index = BM25.from_texts(MEMORIES)
    query = "I have a night shift tomorrow"
    assert np.array_equal(bridged_coverage(index, query, 0.0), index.coverage(tokenize(query)))
    english = BM25.from_texts(["Caroline went to the LGBTQ support group", "Mel paints sunsets"])
    # English memories, English message (LoCoMo): Chinese translations match nothing
    query = "When did Caroline go to the support group?"
    assert np.array_equal(bridged_coverage(english, query, 1.0), english.coverage(tokenize(query)))


def test_english_itself_is_not_bridged() -> None:
    """In an English tutor nearly every memory names English: 英文 ↔ "English" would lift
    whichever memory mentions it."""
    assert "english" in UNBRIDGED and "英文" in UNBRIDGED
    found = [a for u in units("給我一個今天的英文單字") for a in u.alternatives]
    assert ("word",) in found and ("english",) not in found
    found = [a for u in units("an English word for today") for a in u.alternatives]
    assert found and not {("英文",), ("英语",)} & set(found)
    index = BM25.from_texts(["English level is B1", "每天搭捷運要四十分鐘"])
    assert (
        bridged_coverage(index, "我的英文不好", 1.0)[0]
        == index.coverage(tokenize("我的英文不好"))[0]
    )


def test_a_word_with_many_translations_counts_once() -> None:
    """捷运 glosses as "rapid transit" and "subway": a memory holding both is not doubly
    matched; the best translation counts."""
    both = bridged_coverage(BM25.from_texts(["subway, rapid transit", "other"]), "捷運", 1.0)
    one = bridged_coverage(BM25.from_texts(["rapid transit", "other"]), "捷運", 1.0)
    assert 0.0 < both[0] <= one[0]  # not the sum of the two: the longer memory, a bit less
    assert both[1] == 0.0


async def test_the_bridge_never_reaches_another_users_memories(store: MemoryStore) -> None:
    """User 1's 捷運 memory matches "subway" for user 1 through the bridge; user 2, with
    memories of their own, never sees it, whatever the threshold."""
    await store.add_many(1, [NewMemory(t) for t in MEMORIES], now=NOW)
    await store.add_many(2, [NewMemory("Likes cooking pasta")], now=NOW)
    query = "something to listen to on the subway?"
    mine = (await store.search(1, query, top_k=4, min_score=0.0)).hits
    assert mine[0].memory.text == MEMORIES[0]
    theirs = (await store.search(2, query, top_k=10, min_score=0.0)).hits
    assert [h.memory.text for h in theirs] == ["Likes cooking pasta"]


def _learner_pool() -> tuple[list[str], list[str]]:
    """Every user's memories of the tuning learner set in one pool (zh-TW, zh-CN and English,
    with and without their search terms) and every query, with the previous messages."""
    data = json.loads((Path(__file__).parents[1] / "benchmarks/data/learner_set.json").read_text())
    texts: list[str] = []
    queries: list[str] = []
    for user in data["users"]:
        for m in user["memories"]:
            texts.append(m["text"])
            texts.append(indexed_text(m["text"], m["terms"].split()))
        for q in user["queries"]:
            queries.append(q["text"])
            queries.extend(q.get("previous", []))
    return texts + MEMORIES, queries


_CROSS = [
    ("something to listen to on the subway?", 0),
    ("I have a night shift tomorrow", 1),
    ("我女兒今天很開心", 2),
    ("週末想去爬山健行", 3),
]


def test_the_postings_sum_equals_the_pass_over_every_memory() -> None:
    """The bridge summed over postings gives the figures of the dense pass, for every message
    of the learner set against a pool of ~300 mixed Chinese/English memories, at several
    weights, and after the index is changed incrementally."""
    texts, queries = _learner_pool()
    index = BM25.from_texts(texts)
    changed = (
        index.removed(3)
        .appended(tokenize("常輪夜班, night shifts"))
        .replaced(0, tokenize("每天搭地鐵上班"))
    )
    bridged = 0
    for idx in (index, changed):
        for query in [*queries, *(q for q, _ in _CROSS)]:
            for weight in (0.0, 0.5, 1.0):
                got = bridged_coverage(idx, query, weight)
                want = dense_pass_bridge(idx, query, weight)
                np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-12)
                bridged += weight > 0 and bool(np.any(want != idx.coverage(tokenize(query))))
    assert bridged > 50  # the bridge changed the figures for many of these messages


def test_a_term_s_coverage_on_its_posting_is_its_coverage() -> None:
    texts, _ = _learner_pool()
    index = BM25.from_texts(texts)
    terms = {t for text in texts for t in tokenize(text)}
    for term in [*sorted(terms), "not-a-term-here"]:
        ids, values = index.term_coverage(term)
        full = index.coverage((term,))
        assert np.array_equal(values, full[ids])
        rest = np.ones(len(index), dtype=bool)
        rest[ids] = False
        assert not np.any(full[rest])
