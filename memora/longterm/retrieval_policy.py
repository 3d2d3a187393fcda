"""What reaches the reply's context: the one retrieval policy, which the engine calls.

With a memory budget (``memory_tokens``), every memory of the learner goes in while they all fit;
when they do not, the best-ranked fill it until it is spent. Without one (``memory_tokens`` 0),
the first ``top_k`` at or above ``min_score`` go in. With ``use_last_turn`` the learner's
previous message is ranked together with the message, after what the message finds by itself
(``MemorySearch.search``).

Given the learner's ``today``, time decides too (memora.longterm.timeline): a fact that is over
stays out, and the learner's pinned memories go in first, whatever the message; under a budget
the newest pins first while they fit, and the ranked rest fills what they leave.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from memora.longterm.memories import Memory, SearchHit, SearchResult
from memora.longterm.memory_store import MemoryStore
from memora.longterm.timeline import asks_about_past, ended, past_notes, pins_first
from memora.shortterm.tokens import o200k

__all__ = [
    "MAX_BUDGETED_MEMORIES",
    "ReplyQuery",
    "RetrievalPolicy",
    "context_lines",
    "describe",
    "memory_cost",
    "pins_that_fit",
    "retrieve",
    "used_in_reply",
    "used_in_time",
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


@dataclass(frozen=True)
class ReplyQuery:
    """What a reply's memories are looked up for: the learner, their message, their previous
    message in the chat (None: none), the chat the memories must come from (None: any of
    theirs) and the learner's ``today`` (None: the rule before time, a benchmark's baseline)."""

    user_id: int
    message: str
    previous: str | None = None
    origin_chat: int | None = None
    today: date | None = None


def memory_cost(text: str) -> int:
    """A memory's tokens in the context (its text and line framing)."""
    return len(o200k().encode(text, disallowed_special=())) + 3


def within_memory_budget(hits: list[SearchHit], budget: int) -> list[SearchHit]:
    """The memories that go into the context under a token budget (best first): all of them
    while they fit, else the first ones until the budget is spent."""
    cost = [memory_cost(h.memory.text) for h in hits]
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


async def retrieve(store: MemoryStore, policy: RetrievalPolicy, query: ReplyQuery) -> SearchResult:
    """The memories the reply to the query's message puts in its context, best first, and the
    embedding tokens the search spent; with `today`, facts that are over stay out and pins come
    first."""
    budget = policy.memory_tokens
    found = await store.searcher.search(
        query.user_id,
        query.message,
        top_k=MAX_BUDGETED_MEMORIES if budget else policy.top_k,
        min_score=0.0 if budget else policy.min_score,
        extra_context=query.previous if policy.use_last_turn else None,
        origin_chat=query.origin_chat,
        floor=policy.min_score,
    )
    if query.today is None:
        return SearchResult(used_in_reply(policy, found.hits), found.embedding_tokens)
    mine = await store.memories(query.user_id, origin_chat=query.origin_chat)
    used = used_in_time(policy, found.hits, mine, query.today)
    return SearchResult(used, found.embedding_tokens)


def used_in_time(
    policy: RetrievalPolicy, hits: list[SearchHit], memories: list[Memory], today: date
) -> list[SearchHit]:
    """Which memories a reply's context gets on the learner's `today`: the pins among
    `memories` first (newest pin first, within the budget), then of `hits` (ranked for the
    message) those not over, in what the pins left."""
    pins = pins_first(memories)
    pinned = {m.id for m in pins}
    current = [h for h in hits if h.memory.id not in pinned and not ended(h.memory, today)]
    first = [SearchHit(m, 1.0) for m in pins]
    budget = policy.memory_tokens
    if budget:
        first = within_memory_budget(first, budget) if first else []
        left = budget - sum(memory_cost(h.memory.text) for h in first)
        rest = within_memory_budget(current, left) if left > 0 else []
    else:
        rest = used_in_reply(policy, current)
    return [*first, *rest]


def pins_that_fit(policy: RetrievalPolicy, memories: list[Memory]) -> int:
    """How many of the user's pins (newest first) reach the context: all without a budget."""
    pins = [SearchHit(m, 1.0) for m in pins_first(memories)]
    return len(within_memory_budget(pins, policy.memory_tokens) if policy.memory_tokens else pins)


async def context_lines(
    store: MemoryStore, policy: RetrievalPolicy, query: ReplyQuery
) -> tuple[dict[str, str], int]:
    """The memory block's lines for the reply to the query's message (:func:`retrieve`), by
    memory id, and the embedding tokens spent; with `today`, a question about the past also gets
    what was true before, with its dates (memora.longterm.timeline), on the line of the memory
    it belongs to."""
    found = await retrieve(store, policy, query)
    lines = {h.memory.id: f"- {h.memory.text}" for h in found.hits}
    if query.today is not None and asks_about_past(query.message):
        mine = await store.memories(query.user_id, origin_chat=query.origin_chat)
        for memory_id, note in past_notes(mine, query.today, query.origin_chat).items():
            current = lines.get(memory_id)
            lines[memory_id] = f"{current} (earlier: {note})" if current else f"- {note}"
    return lines, found.embedding_tokens
