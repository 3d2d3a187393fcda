"""What reaches the reply's context: the one retrieval policy, called by the engine.

Every memory of the learner goes in while they all fit ``memory_tokens``; when they do not,
the best-ranked fill the budget (a question about a word only with a strong match, see
:func:`memora.longterm.phatic.min_score_for`). Without a budget (``memory_tokens`` 0) the first
``top_k`` at or above ``min_score`` go in. With ``use_last_turn`` the learner's previous
message is the context a follow-up is also ranked with (``MemoryStore.search``).
"""

from __future__ import annotations

from dataclasses import dataclass

from memora.longterm.phatic import min_score_for
from memora.longterm.records import SearchHit, SearchResult
from memora.longterm.store import MemoryStore
from memora.tokens import o200k

__all__ = [
    "MAX_BUDGETED_MEMORIES",
    "RetrievalPolicy",
    "budget_floor",
    "describe",
    "retrieve",
    "used_in_reply",
    "within_memory_budget",
]

# Hits ranked for a reply under a token budget (enough to fill 500 tokens of short memories).
MAX_BUDGETED_MEMORIES = 50


@dataclass(frozen=True)
class RetrievalPolicy:
    """The settings of the policy ([retrieval] in the configuration)."""

    memory_tokens: int
    top_k: int = 3
    min_score: float = 0.0
    use_last_turn: bool = True


def within_memory_budget(hits: list[SearchHit], budget: int, min_score: float) -> list[SearchHit]:
    """The memories that go into the context under a memory token budget (best first): all of
    them while they fit, else the hits at or above `min_score`, best first, until it is spent."""
    cost = [len(o200k().encode(h.memory.text, disallowed_special=())) + 3 for h in hits]
    if sum(cost) <= budget:
        return hits
    kept: list[SearchHit] = []
    spent = 0
    for hit, tokens in zip(hits, cost, strict=True):
        if hit.score < min_score or spent + tokens > budget:
            break
        kept.append(hit)
        spent += tokens
    return kept


def budget_floor(message: str) -> float:
    """The score a memory needs when the memories do not all fit the budget: none, but a
    question about a word's floor."""
    return min_score_for(message, 0.0)


def used_in_reply(policy: RetrievalPolicy, message: str, hits: list[SearchHit]) -> list[SearchHit]:
    """Which of `hits` (ranked for `message`, best first, scores down to 0) the reply's context
    gets (see the module docstring)."""
    if policy.memory_tokens:
        return within_memory_budget(hits, policy.memory_tokens, budget_floor(message))
    floor = min_score_for(message, policy.min_score)
    return [h for h in hits if h.score >= floor][: policy.top_k]


def describe(policy: RetrievalPolicy, message: str) -> str:
    """The policy in words, for `message` (what /search marks as used)."""
    if policy.memory_tokens:
        floor = budget_floor(message)
        cut = f" at or above {floor:.2f} (as for a question about a word)" if floor else ""
        return (
            f"every memory while they fit {policy.memory_tokens} tokens, else the"
            f" best-ranked{cut} until they are spent"
        )
    floor = min_score_for(message, policy.min_score)
    why = "" if floor == policy.min_score else ", as for a question about a word"
    return f"the best {policy.top_k} at or above min_score {floor:.2f}{why}"


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
    floor = min_score_for(message, policy.min_score)
    found = await store.search(
        user_id,
        message,
        top_k=MAX_BUDGETED_MEMORIES if budget else policy.top_k,
        min_score=0.0 if budget else floor,
        extra_context=previous if policy.use_last_turn else None,
        origin_chat=origin_chat,
        floor=floor,
    )
    return SearchResult(used_in_reply(policy, message, found.hits), found.embedding_tokens)
