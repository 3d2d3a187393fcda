"""What reaches the reply's context: the one retrieval policy, which the engine calls.

With a memory budget (``memory_tokens``), every memory of the learner goes in while they all fit;
when they do not, the best-ranked fill it until it is spent. Without one (``memory_tokens`` 0),
the first ``top_k`` at or above ``min_score`` go in. With ``use_last_turn`` the learner's
previous message is ranked together with the message, after what the message finds by itself
(``MemoryStore.search``).
"""

from __future__ import annotations

from dataclasses import dataclass

from memora.longterm.records import SearchHit, SearchResult
from memora.longterm.store import MemoryStore
from memora.tokens import o200k

__all__ = [
    "MAX_BUDGETED_MEMORIES",
    "RetrievalPolicy",
    "describe",
    "retrieve",
    "used_in_reply",
    "within_memory_budget",
]

# Hits ranked for a reply under a token budget (enough to fill 500 tokens of short memories).
MAX_BUDGETED_MEMORIES = 50


@dataclass(frozen=True)
class RetrievalPolicy:
    """The policy's settings (``[retrieval]`` in the configuration)."""

    memory_tokens: int
    top_k: int = 3
    min_score: float = 0.0
    use_last_turn: bool = True


def within_memory_budget(hits: list[SearchHit], budget: int) -> list[SearchHit]:
    """The memories that go into the context under a token budget (best first): all of them
    while they fit, else the first ones until the budget is spent."""
    cost = [len(o200k().encode(h.memory.text, disallowed_special=())) + 3 for h in hits]
    if sum(cost) <= budget:
        return hits
    kept: list[SearchHit] = []
    spent = 0
    for hit, tokens in zip(hits, cost, strict=True):
        if spent + tokens > budget:
            break
        kept.append(hit)
        spent += tokens
    return kept


def used_in_reply(policy: RetrievalPolicy, hits: list[SearchHit]) -> list[SearchHit]:
    """Which of `hits` (ranked for a message, best first, scores down to 0) the reply's context
    gets (see the module docstring)."""
    if policy.memory_tokens:
        return within_memory_budget(hits, policy.memory_tokens)
    return [h for h in hits if h.score >= policy.min_score][: policy.top_k]


def describe(policy: RetrievalPolicy) -> str:
    """The policy in words (what /search marks as used)."""
    if policy.memory_tokens:
        return (
            f"every memory while they fit {policy.memory_tokens} tokens, else the best-ranked"
            " until they are spent"
        )
    return f"the best {policy.top_k} at or above min_score {policy.min_score:.2f}"


async def retrieve(
    store: MemoryStore,
    policy: RetrievalPolicy,
    user_id: int,
    message: str,
    previous: str | None,
    *,
    origin_chat: int | None = None,
) -> SearchResult:
    """The memories the reply to `message` puts in its context, best first, and the embedding
    tokens the search spent. `previous` is the learner's previous message in the chat."""
    budget = policy.memory_tokens
    found = await store.search(
        user_id,
        message,
        top_k=MAX_BUDGETED_MEMORIES if budget else policy.top_k,
        min_score=0.0 if budget else policy.min_score,
        extra_context=previous if policy.use_last_turn else None,
        origin_chat=origin_chat,
        floor=policy.min_score,
    )
    return SearchResult(used_in_reply(policy, found.hits), found.embedding_tokens)
