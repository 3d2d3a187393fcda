"""What reaches the reply's context (memora.longterm.retrieval_policy), through the real store and
the local model: every memory while they fit the budget, else the best-ranked until it is spent;
without a budget the first top_k at or above min_score; the previous message only after what
the message finds by itself; labelled memories stored as the extraction call stores them."""

from __future__ import annotations

from memora.longterm import MemoryStore, NewMemory
from memora.longterm.memories import Memory, SearchHit
from memora.longterm.retrieval_policy import (
    ReplyQuery,
    RetrievalPolicy,
    describe,
    retrieve,
    used_in_reply,
    within_memory_budget,
)

FACTS = (
    "使用者對花生過敏",
    "使用者養了一隻柴犬叫麻糬",
    "The user works night shifts at a hospital in Kaohsiung.",
    "The user is preparing for the IELTS exam in March.",
    "The user's daughter is six years old.",
)


def _hit(n: int, words: int, score: float) -> SearchHit:
    text = " ".join(["word"] * words)
    return SearchHit(Memory(f"m{n}", 1, text, "manual", "other", "t", "t"), score)


def test_every_memory_while_they_fit_else_the_first_until_the_budget_is_spent() -> None:
    hits = [_hit(n, 10, 1.0 - n / 10) for n in range(5)]
    assert within_memory_budget(hits, 1000) == hits
    assert within_memory_budget(hits, 30) == hits[:2]  # 13 tokens each with the framing
    assert within_memory_budget(hits, 5) == []
    low = [_hit(n, 10, 0.01) for n in range(3)]  # scores do not matter under a budget
    assert used_in_reply(RetrievalPolicy(memory_tokens=1000), low) == low


def test_without_a_budget_top_k_at_or_above_min_score() -> None:
    hits = [_hit(n, 3, s) for n, s in enumerate((0.9, 0.5, 0.3, 0.2, 0.1))]
    policy = RetrievalPolicy(memory_tokens=0, top_k=3, min_score=0.25)
    assert used_in_reply(policy, hits) == hits[:3]
    assert used_in_reply(RetrievalPolicy(0, top_k=2, min_score=0.25), hits) == hits[:2]
    assert used_in_reply(RetrievalPolicy(0, top_k=5, min_score=0.6), hits) == hits[:1]
    assert describe(policy) == "the best 3 at or above min_score 0.25"
    assert describe(RetrievalPolicy(500)) == (
        "every memory while they fit 500 tokens, else the best-ranked until they are spent"
    )


async def test_retrieve_through_the_store(store: MemoryStore) -> None:
    results = await store.writer.add_many(
        7,
        [
            NewMemory(FACTS[0], category="constraint", terms=("peanut",)),
            *(NewMemory(t) for t in FACTS[1:]),
            NewMemory(FACTS[1]),  # said twice: a duplicate
        ],
    )
    assert [r.action for r in results] == ["added"] * 5 + ["duplicate"]
    satay = ReplyQuery(7, "Is satay sauce OK for me?")
    everything = await retrieve(store, RetrievalPolicy(500), satay)
    assert len(everything.hits) == 5 and everything.embedding_tokens >= 0  # all fit
    assert everything.hits[0].memory.text == FACTS[0]  # best first: the allergy
    tight = await retrieve(store, RetrievalPolicy(12), satay)
    assert [h.memory.text for h in tight.hits] == [FACTS[0]]
    strict = RetrievalPolicy(0, top_k=3, min_score=0.99)
    assert (await retrieve(store, strict, satay)).hits == []
    # another user's memories never reach the context
    assert (await retrieve(store, RetrievalPolicy(500), ReplyQuery(8, "satay sauce"))).hits == []


async def test_the_previous_message_adds_only_after_what_the_message_finds(
    store: MemoryStore,
) -> None:
    for text in FACTS:
        await store.writer.add(7, NewMemory(text, "extracted"))
    policy = RetrievalPolicy(0, top_k=2, min_score=0.14)
    alone = await retrieve(store, policy, ReplyQuery(7, "牠叫什麼名字？"))
    after_the_dog = ReplyQuery(7, "牠叫什麼名字？", "我家的狗很可愛")
    helped = await retrieve(store, policy, after_the_dog)
    own = [h for h in alone.hits if h.score >= policy.min_score]
    assert helped.hits[: len(own)] == own
    assert any(h.memory.text == FACTS[1] for h in helped.hits)  # the dog, through the context
    off = RetrievalPolicy(0, top_k=2, min_score=0.14, use_last_turn=False)
    assert (await retrieve(store, off, after_the_dog)).hits == alone.hits
