"""What reaches the context for learners with a year of memories, through the real store.

Run from the repository root (``nice -n 19`` on a shared machine; about 10 s a file)::

    .venv/bin/python benchmarks/heavy_learners.py [FILE ...]

Default: ``benchmarks/data/heavy_learners_dev.json``. Each file holds learners with ~120
memories about themselves (job, family, schedule, difficulties, health, trips… as a tutor's
memory accumulates them over a year), each with the category, search terms and situations the
extraction call writes (``*_situations.json`` beside it), and 30 messages each, labelled with
the memories that should shape the reply (``benchmarks/data/README.md``, "Heavy learners").

Section (f) of ``benchmarks/retrieval.py`` measures a learner past the memory budget by padding
the learner's ~8 memories with 353 LoCoMo observations about other people. Here every memory is
the learner's own, so the memories that compete for the budget are as close to the message as
a real heavy learner's.

Every memory goes into a real :class:`~memora.longterm.MemoryStore` (embedded Chroma in a
temporary folder, LocalUSE) with ``add_many``, as the extraction call would store it (its
dedupe rules apply: a memory it folds into another is counted, and its label then points at
the memory that holds it). Each message is searched as ``Engine._retrieve`` searches it: 50
hits, no score cut, the learner's previous message as the follow-up context, the
word-question floor; ``Engine.used_in_reply``'s rule picks what the context gets.

Printed per set:

1. The retrieval function at the product's defaults without a budget (``top_k`` 3,
   ``min_score`` 0.14): hit@1, answerable kept, unrelated → nothing: issue 12's targets, here
   on learners whose every memory is their own.
2. What reaches the context under the product's ``memory_tokens`` (500; 120 and 250 beside
   it), for the product's rule and the candidates below: the share of answerable messages
   whose relevant memory is in the context (all of them, and those whose relevant memory is a
   constraint), unrelated messages with no memory block, and memory tokens a turn (o200k, with
   the "- " framing).

The candidates ("pin constraints") lost on the development file at a budget of 250 and were
not adopted (``benchmarks/data/README.md``, "Heavy learners"); their rows stay as a report.

The candidates (``pinned``): past the budget, the learner's memories of category ``constraint``
(allergies, diets, health, hours they cannot study…) go first, best-ranked first, while they fit
half the budget ("pin constraints, half") or the whole budget ("pin constraints"), then the
rest by rank until the budget is spent. Chit-chat still gets nothing and a question about a
word keeps its floor (no pins). The learner profile is always in the context; these facts are
not in it, and a reply that forgets them can harm ("Is satay sauce OK for me?" and a peanut
allergy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import retrieval as rb  # noqa: E402

from memora.config import DEFAULT_MEMORY_TOKENS as BUDGET  # noqa: E402
from memora.engine import MAX_BUDGETED_MEMORIES, within_memory_budget  # noqa: E402
from memora.longterm import MemoryStore  # noqa: E402
from memora.longterm.embeddings import LocalUSE  # noqa: E402
from memora.longterm.phatic import is_phatic, is_word_question, min_score_for  # noqa: E402
from memora.longterm.ranking import DEFAULT_MIN_SCORE  # noqa: E402
from memora.longterm.records import Memory, NewMemory, SearchHit, SearchResult  # noqa: E402
from memora.tokens import o200k  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
TOP_K = 3  # the product's default [retrieval] top_k (no budget)
PINNED_CATEGORY = "constraint"
# as section (f) of benchmarks/retrieval.py compares (250 was the product's until 2026-12-02)
OTHER_BUDGETS = tuple(b for b in (120, 250, 500) if b != BUDGET)


@dataclass
class Message:
    text: str
    previous: str | None
    relevant: set[str]  # the store's memory ids


@dataclass
class Learner:
    name: str
    user_id: int
    written: int  # memories in the file
    memories: list[Memory] = field(default_factory=list)  # as the store holds them
    messages: list[Message] = field(default_factory=list)


def situations_file(path: Path) -> Path:
    return path.with_name(path.stem + "_situations.json")


def as_tuple(words: Any) -> tuple[str, ...]:
    """Terms or situations as the extraction call gives them (a list; a string is split)."""
    return tuple(words.split()) if isinstance(words, str) else tuple(words or ())


def read(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A heavy-learners file and its situations (empty when it has none)."""
    side = situations_file(path)
    sits = json.loads(side.read_text("utf-8")) if side.exists() else {}
    return json.loads(path.read_text("utf-8")), sits


def new_memories(user: dict[str, Any], sits: dict[str, Any]) -> list[NewMemory]:
    """A learner's memories as the extraction call hands them to the store."""
    return [
        NewMemory(
            m["text"],
            category=m.get("category", "other"),
            terms=as_tuple(m.get("terms")),
            situations=as_tuple(sits.get(m["id"])),
        )
        for m in user["memories"]
    ]


async def load(store: MemoryStore, path: Path, first_id: int) -> list[Learner]:
    """Every learner of `path` stored in `store`, their labels mapped to the store's ids."""
    data, sits = read(path)
    learners = []
    for n, u in enumerate(data["users"]):
        uid = first_id + n
        items = new_memories(u, sits)
        results = await store.add_many(uid, items)
        held = {m["id"]: r.memory.id for m, r in zip(u["memories"], results, strict=True)}
        learner = Learner(u["id"], uid, len(items), await store.memories(uid))
        last: str | None = None
        for q in u["queries"]:
            prev = q["previous"][-1] if q.get("previous") else last
            learner.messages.append(Message(q["text"], prev, {held[r] for r in q["relevant"]}))
            last = q["text"]
        learners.append(learner)
    return learners


Rule = Callable[[str, list[SearchHit], list[Memory]], list[SearchHit]]


def by_rank(budget: int) -> Rule:
    """``Engine.used_in_reply`` with `budget` as ``memory_tokens``: every memory while they
    fit, else the best-ranked at or above ``Engine.budget_floor`` until the budget is spent."""

    def rule(text: str, hits: list[SearchHit], memories: list[Memory]) -> list[SearchHit]:
        return within_memory_budget(hits, budget, min_score_for(text, 0.0))

    return rule


product = by_rank(BUDGET)


def pinned(share: float) -> Rule:
    """The candidate: past the budget, the constraint memories first (best-ranked first)
    while they fit `share` of it, then the product's rule over the rest."""

    def rule(text: str, hits: list[SearchHit], memories: list[Memory]) -> list[SearchHit]:
        everything = within_memory_budget(hits, BUDGET, 0.0)
        if len(everything) == len(hits) and len(hits) == len(memories):
            return hits  # they all fit
        if is_word_question(text):
            return product(text, hits, memories)
        ranked = {h.memory.id: h for h in hits}
        order = [h for h in hits if h.memory.category == PINNED_CATEGORY]
        order += [
            SearchHit(m, 0.0)
            for m in memories
            if m.category == PINNED_CATEGORY and m.id not in ranked
        ]
        pins = within_memory_budget(order, int(BUDGET * share), 0.0) if order else []
        spent = sum(tokens(h.memory.text) for h in pins)
        taken = {h.memory.id for h in pins}
        rest = within_memory_budget(
            [h for h in hits if h.memory.id not in taken], BUDGET - spent, 0.0
        )
        return pins + rest

    return rule


def tokens(text: str) -> int:
    """A memory's cost as ``within_memory_budget`` counts it."""
    return len(o200k().encode(text, disallowed_special=())) + 3


RULES: tuple[tuple[str, Rule], ...] = (
    (f"product: memory_tokens {BUDGET}, past it by rank", product),
    *((f"memory_tokens {b}, past it by rank", by_rank(b)) for b in OTHER_BUDGETS),
    ("pin constraints, half the budget", pinned(0.5)),
    ("pin constraints, the whole budget", pinned(1.0)),
)


@dataclass
class Tally:
    reached: int = 0
    answerable: int = 0
    reached_pinned: int = 0
    answerable_pinned: int = 0
    silent: int = 0
    unrelated: int = 0
    tokens: int = 0
    most: int = 0
    turns: int = 0


def frac(n: int, d: int) -> str:
    return f"{n / d:.2f} ({n}/{d})" if d else "–"


async def measure(paths: Sequence[Path]) -> None:
    tok = o200k()
    with tempfile.TemporaryDirectory() as tmp:
        async with MemoryStore(Path(tmp), LocalUSE()) as store:
            for p_i, path in enumerate(paths):
                learners = await load(store, path, 1 + 100 * p_i)
                print(f"\n## {path.name}\n")
                print("| learner | memories written | stored | constraints | messages |")
                print("|---|---|---|---|---|")
                for lr in learners:
                    pins = sum(m.category == PINNED_CATEGORY for m in lr.memories)
                    print(
                        f"| {lr.name} | {lr.written} | {len(lr.memories)} | {pins} "
                        f"| {len(lr.messages)} |"
                    )
                await retrieval_function(store, learners)
                tallies = {name: Tally() for name, _ in RULES}
                misses: Counter[str] = Counter()
                for lr in learners:
                    by_id = {m.id: m for m in lr.memories}
                    for msg in lr.messages:
                        found = await search(store, lr, msg, MAX_BUDGETED_MEMORIES)
                        hits = [] if is_phatic(msg.text) else found.hits
                        for name, rule in RULES:
                            t = tallies[name]
                            chosen = rule(msg.text, hits, lr.memories) if hits else []
                            ids = {h.memory.id for h in chosen}
                            cost = sum(len(tok.encode("- " + h.memory.text)) + 1 for h in chosen)
                            t.tokens += cost
                            t.most = max(t.most, cost)
                            t.turns += 1
                            if msg.relevant:
                                t.answerable += 1
                                t.reached += bool(ids & msg.relevant)
                                if any(by_id[r].category == PINNED_CATEGORY for r in msg.relevant):
                                    t.answerable_pinned += 1
                                    t.reached_pinned += bool(ids & msg.relevant)
                            else:
                                t.unrelated += 1
                                t.silent += not ids
                            if rule is product and msg.relevant and not ids & msg.relevant:
                                misses[await miss_kind(store, lr, msg)] += 1
                print(
                    f"\nWhat reaches the context (the store's search as Engine._retrieve calls it; "
                    f"the product's budget is memory_tokens {BUDGET}):\n"
                )
                print(
                    "| rule | answerable: relevant memory in context | of them, a constraint "
                    "| unrelated: no memory block | memory tokens a turn (mean) | max |"
                )
                print("|---|---|---|---|---|---|")
                for name, t in tallies.items():
                    print(
                        f"| {name} | {frac(t.reached, t.answerable)} "
                        f"| {frac(t.reached_pinned, t.answerable_pinned)} "
                        f"| {frac(t.silent, t.unrelated)} | {t.tokens / max(t.turns, 1):.1f} "
                        f"| {t.most} |"
                    )
                print(
                    "\nThe product's misses by kind (as section (f) of benchmarks/retrieval.py): "
                    + ", ".join(f"{kind}: {misses[kind]}" for kind in rb.MISS_KINDS)
                )


async def search(store: MemoryStore, lr: Learner, msg: Message, top_k: int) -> SearchResult:
    """The learner's memories ranked for `msg` as ``Engine._retrieve`` asks for them: no score
    cut, the previous message as follow-up context, the message's own floor for that rule."""
    return await store.search(
        lr.user_id,
        msg.text,
        top_k=top_k,
        min_score=0.0,
        extra_context=msg.previous,
        floor=min_score_for(msg.text, DEFAULT_MIN_SCORE),
    )


async def miss_kind(store: MemoryStore, lr: Learner, msg: Message) -> str:
    """Why the product's context missed the relevant memory, as section (f) of
    ``benchmarks/retrieval.py`` tells it (``retrieval.miss_kind``), from the learner's whole
    ranking."""
    ranked = await search(store, lr, msg, len(lr.memories))
    ids = [h.memory.id for h in ranked.hits]
    by_rank = within_memory_budget(ranked.hits[:MAX_BUDGETED_MEMORIES], BUDGET, 0.0)
    return rb.miss_kind(
        rb.Query(msg.text, {ids.index(r) for r in msg.relevant}, 0),
        list(range(len(ids))),
        [ids.index(h.memory.id) for h in by_rank],
    )


async def retrieval_function(store: MemoryStore, learners: list[Learner]) -> None:
    """hit@1, answerable kept, unrelated → nothing at top_k 3 and min_score 0.14 (no budget)."""
    h1 = kept = silent = n_ans = n_unrel = 0
    for lr in learners:
        for msg in lr.messages:
            floor = min_score_for(msg.text, DEFAULT_MIN_SCORE)
            ranked = await search(store, lr, msg, TOP_K)
            passed = [h for h in ranked.hits if h.score >= floor]
            if msg.relevant:
                n_ans += 1
                h1 += bool(ranked.hits) and ranked.hits[0].memory.id in msg.relevant
                kept += any(h.memory.id in msg.relevant for h in passed)
            else:
                n_unrel += 1
                silent += not passed
    print(
        f"\nThe retrieval function (top_k {TOP_K}, min_score {DEFAULT_MIN_SCORE}, no budget): "
        f"hit@1 {frac(h1, n_ans)}, answerable kept {frac(kept, n_ans)}, "
        f"unrelated → nothing {frac(silent, n_unrel)}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, default=[DATA / "heavy_learners_dev.json"])
    args = ap.parse_args(argv)
    asyncio.run(measure(args.files))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
