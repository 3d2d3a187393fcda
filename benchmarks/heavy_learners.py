"""What reaches the reply's context, through the real memory store, at the product's budget.

Run from the repository root (``nice -n 19`` on a shared machine; ~10-20 s a file)::

    .venv/bin/python -m benchmarks.heavy_learners [FILE ...]

Default: the held-out heavy learners (``heavy_learners_blind*.json``, ~120 memories each) and
the held-out learner sets ``learner_set_fresh5/6/7.json`` (~8 memories each). Each file holds
learners with their memories (category, search terms, and situations in ``*_situations.json``
beside it, as the extraction call writes them) and messages labelled with the memories that
should shape the reply (``benchmarks/data/README.md``).

Every memory goes into a real :class:`~memora.longterm.MemoryStore` (embedded Chroma in a
temporary folder, LocalUSE) with ``add_many`` (its dedupe applies: a folded memory's label
points at the memory that holds it). Each message is retrieved by
:func:`memora.longterm.retrieval_policy.retrieve`, the function the engine calls, with the learner's
previous message as the follow-up context, at the default budget and without one (top_k 3 at
the embedder profile's min_score). Printed per file and policy: the share of answerable
messages whose relevant memory is in the context, unrelated messages with no memory block,
memory tokens a turn (o200k, with the "- " framing), and the wall time of the file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memora.config import DEFAULT_MEMORY_TOKENS
from memora.longterm import MemoryStore
from memora.longterm.embeddings import LocalUSE
from memora.longterm.memories import NewMemory
from memora.longterm.retrieval_policy import ReplyQuery, RetrievalPolicy, retrieve
from memora.shortterm.tokens import o200k

DATA = Path(__file__).resolve().parent / "data"
DEFAULT_FILES = (
    *(DATA / f"heavy_learners_{n}.json" for n in ("blind", "blind2", "blind3")),
    *(DATA / f"learner_set_{n}.json" for n in ("fresh5", "fresh6", "fresh7")),
)


@dataclass
class Message:
    text: str
    previous: str | None
    relevant: set[str]  # the store's memory ids


@dataclass
class Learner:
    name: str
    user_id: int
    messages: list[Message] = field(default_factory=list)


@dataclass
class Tally:
    reached: int = 0
    answerable: int = 0
    silent: int = 0
    unrelated: int = 0
    tokens: int = 0
    turns: int = 0
    stored: int = 0
    written: int = 0

    def row(self, name: str, seconds: float) -> str:
        return (
            f"| {name} | {self.written}→{self.stored} | {frac(self.reached, self.answerable)} "
            f"| {frac(self.silent, self.unrelated)} | {self.tokens / max(self.turns, 1):.1f} "
            f"| {seconds:.1f} |"
        )


HEADER = (
    "| file, policy | memories written→stored | answerable: relevant memory in context "
    "| unrelated: no memory block | memory tokens a turn | seconds |\n|---|---|---|---|---|---|"
)


def frac(n: int, d: int) -> str:
    return f"{n / d:.3f} ({n}/{d})" if d else "–"


def words(value: Any) -> tuple[str, ...]:
    """Terms or situations as the extraction call gives them (a list; a string is split)."""
    return tuple(value.split()) if isinstance(value, str) else tuple(value or ())


def read(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A learners file and its situations (empty when it has none)."""
    side = path.with_name(path.stem + "_situations.json")
    sits = json.loads(side.read_text("utf-8")) if side.exists() else {}
    return json.loads(path.read_text("utf-8")), sits


def new_memories(user: dict[str, Any], sits: dict[str, Any]) -> list[NewMemory]:
    """A learner's memories as the extraction call hands them to the store."""
    return [
        NewMemory(
            m["text"],
            category=m.get("category", "other"),
            terms=words(m.get("terms")),
            situations=words(sits.get(m["id"])),
        )
        for m in user["memories"]
    ]


async def load(store: MemoryStore, path: Path, first_id: int, tally: Tally) -> list[Learner]:
    """Every learner of `path` stored in `store`, their labels mapped to the store's ids."""
    data, sits = read(path)
    learners = []
    for n, user in enumerate(data["users"]):
        uid = first_id + n
        items = new_memories(user, sits)
        results = await store.writer.add_many(uid, items)
        held = {m["id"]: r.memory.id for m, r in zip(user["memories"], results, strict=True)}
        tally.written += len(items)
        tally.stored += await store.count(uid)
        learner = Learner(user["id"], uid)
        last: str | None = None
        for q in user["queries"]:
            prev = q["previous"][-1] if q.get("previous") else last
            learner.messages.append(Message(q["text"], prev, {held[r] for r in q["relevant"]}))
            last = q["text"]
        learners.append(learner)
    return learners


POLICIES = (
    ("memory_tokens 500 (the default)", RetrievalPolicy(DEFAULT_MEMORY_TOKENS)),
    ("no budget: top_k 3, min_score", RetrievalPolicy(0, top_k=3)),
)


async def measure_file(store: MemoryStore, path: Path, first_id: int) -> dict[str, Tally]:
    tok = o200k()
    tallies = {name: Tally() for name, _ in POLICIES}
    counted = Tally()
    learners = await load(store, path, first_id, counted)
    for name, policy in POLICIES:
        tally = tallies[name]
        tally.written, tally.stored = counted.written, counted.stored
        policy = replace(policy, min_score=store.profile.min_score)
        for learner in learners:
            for msg in learner.messages:
                found = await retrieve(
                    store, policy, ReplyQuery(learner.user_id, msg.text, msg.previous)
                )
                ids = {h.memory.id for h in found.hits}
                tally.tokens += sum(len(tok.encode("- " + h.memory.text)) + 1 for h in found.hits)
                tally.turns += 1
                if msg.relevant:
                    tally.answerable += 1
                    tally.reached += bool(ids & msg.relevant)
                else:
                    tally.unrelated += 1
                    tally.silent += not ids
    return tallies


async def measure(paths: Sequence[Path]) -> None:
    print(HEADER)
    with tempfile.TemporaryDirectory() as tmp:
        async with MemoryStore(Path(tmp), LocalUSE()) as store:
            for n, path in enumerate(paths):
                start = time.perf_counter()
                tallies = await measure_file(store, path, 1 + 1000 * n)
                seconds = time.perf_counter() - start
                for name, tally in tallies.items():
                    print(tally.row(f"{path.name}, {name}", seconds), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, default=list(DEFAULT_FILES))
    asyncio.run(measure(ap.parse_args(argv).files))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
