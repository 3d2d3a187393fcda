"""The heavy-learners benchmark (``benchmarks/heavy_learners.py``): a file goes into the real
store as the extraction call would write it (labels follow the store's dedupe), the product's
rule is ``within_memory_budget`` with the engine's floor, and the pinned candidate puts
constraints first past the budget only. Plus the data files, development and blind."""

from __future__ import annotations

import json
from pathlib import Path

from memora.longterm import MemoryStore
from memora.longterm.records import Memory, SearchHit
from tests.bench import load_benchmark

hl = load_benchmark("heavy_learners")
DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data"


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "heavy.json"
    memories = [
        {"id": "t1", "text": "使用者對花生過敏", "category": "constraint", "terms": ["peanut"]},
        {"id": "t2", "text": "使用者養了一隻柴犬叫麻糬", "category": "personal", "terms": "dog 狗"},
        {"id": "t3", "text": "使用者養了一隻柴犬叫麻糬", "category": "personal"},  # said twice
    ]
    queries = [
        {"text": "Is satay sauce OK for me?", "relevant": ["t1"]},
        {"text": "麻糬今天又咬拖鞋了", "relevant": ["t3"]},
        {"text": "牠叫什麼名字？", "relevant": ["t2"], "previous": ["我家的狗很可愛"]},
    ]
    path.write_text(
        json.dumps({"users": [{"id": "z1", "memories": memories, "queries": queries}]}), "utf-8"
    )
    (tmp_path / "heavy_situations.json").write_text(
        json.dumps({"t1": ["ordering food", "點餐"]}), "utf-8"
    )
    return path


async def test_a_file_is_stored_as_the_extraction_call_would_store_it(
    tmp_path: Path, store: MemoryStore
) -> None:
    (learner,) = await hl.load(store, _write(tmp_path), 7)
    assert (learner.name, learner.user_id, learner.written) == ("z1", 7, 3)
    # the repeated memory is a duplicate in the store, and its label points at the one it holds
    assert len(learner.memories) == 2 == await store.count(7)
    held = {m.text: m for m in learner.memories}
    allergy, dog = held["使用者對花生過敏"], held["使用者養了一隻柴犬叫麻糬"]
    assert allergy.category == "constraint"
    assert allergy.terms == ("peanut",) and allergy.situations == ("ordering food", "點餐")
    assert dog.terms == ("dog", "狗")
    first, second, third = learner.messages
    assert first.relevant == {allergy.id} and second.relevant == {dog.id}
    # a message's previous one is the set's `previous`, else the message before it
    assert (first.previous, second.previous, third.previous) == (
        None,
        "Is satay sauce OK for me?",
        "我家的狗很可愛",
    )


def _memory(n: int, category: str, words: int = 30) -> Memory:
    text = f"memory {n} " + " ".join(["word"] * words)
    return Memory(str(n), 1, text, "extracted", category, "", "")


def test_pins_go_first_past_the_budget_and_nowhere_else() -> None:
    memories = [_memory(n, "constraint" if n in (8, 60) else "personal") for n in range(70)]
    hits = [SearchHit(m, 0.5 - 0.005 * n) for n, m in enumerate(memories[:50])]
    product = [h.memory.id for h in hl.product("plan my weekend", hits, memories)]
    assert product == [str(n) for n in range(len(product))] and len(product) < len(hits)
    for share in (0.5, 1.0):
        chosen = [h.memory.id for h in hl.pinned(share)("plan my weekend", hits, memories)]
        # the ranked constraint first, then the one the search did not return, then by rank
        assert chosen[:2] == ["8", "60"]
        assert chosen[2:] == [str(n) for n in range(50) if n != 8][: len(chosen) - 2]
        assert sum(hl.tokens(memories[int(i)].text) for i in chosen) <= hl.BUDGET
        # a question about a word keeps the product's rule: its floor (0.6), and no pins
        word = "What does 'procrastinate' mean?"
        assert hl.pinned(share)(word, hits, memories) == hl.product(word, hits, memories) == []
        # everything fits: every memory, as the product sends it
        few = [SearchHit(m, 0.5) for m in memories[:3]]
        assert hl.pinned(share)("plan my weekend", few, memories[:3]) == few


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
