"""How fast memories without search terms get them, what it costs per call, and what it buys.

Every memory of the learner set (benchmarks/data/learner_set.json) is saved with `/remember`
(`Engine.remember`: no extraction, so no search terms), as a memory stored before terms existed
would be. Then each learner sends ordinary messages through the real engine (real SQLite, real
Chroma, the real local embedder) until none of their memories lacks terms; the after-reply
extraction call lists up to 5 term-less memories in <needs_terms> and a scripted model answers
their terms with the set's own hand-written terms (what a capable model is asked to write; see
benchmarks/data/README.md for the caveat) and their situations with the set's
(learner_set_situations.json, written from the memories alone). It prints the turns each
learner needed until every memory had both, the input
tokens the backfill adds to one extraction call (o200k: the same call with and without the
list), and retrieval on the set's queries at the product's defaults before vs after (hit@1 of
the answerable queries, and unrelated queries that return nothing), tuning and held-out users
apart. Nothing here is tuned.

    .venv/bin/python benchmarks/terms_backfill.py
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.llm import ChatMessage, Completion, OnDelta, Parsed, Usage
from memora.longterm import MemoryStore
from memora.longterm.embeddings import LocalUSE
from memora.longterm.extraction import MAX_BACKFILL
from memora.longterm.ranking import DEFAULT_MIN_SCORE
from memora.storage import Database
from memora.tokens import LocalTokenCounter

T = TypeVar("T", bound=BaseModel)
DATA = Path(__file__).parent / "data" / "learner_set.json"
NEEDS = re.compile(r"<needs_terms>\n(.*?)\n</needs_terms>\n\n", re.DOTALL)
LISTED = re.compile(r"^(\d+)\. (.*)$")
MAX_TURNS = 10


class Scripted:
    """A model that answers each reply "OK" and each extraction with the set's terms and
    situations for the memories listed in <needs_terms>; it records the backfill's share of
    each call's input."""

    def __init__(self, terms: dict[str, list[str]], situations: dict[str, list[str]]) -> None:
        self.terms = terms
        self.situations = situations
        self.counter = LocalTokenCounter()
        self.added: list[int] = []  # o200k input tokens the backfill added, per call

    async def complete(
        self, instructions: str, messages: list[ChatMessage], on_delta: OnDelta | None = None
    ) -> Completion:
        return Completion(text="OK", usage=Usage(10, 1))

    async def parse(
        self, instructions: str, messages: list[ChatMessage], schema: type[T]
    ) -> Parsed[T]:
        content = messages[-1].content
        block = NEEDS.search(content)
        answer: dict[str, Any] = {"terms_for": []}
        if block is not None:
            from memora.longterm.extraction import TERMS_FOR_INSTRUCTIONS

            without = [ChatMessage("user", NEEDS.sub("", content))]
            bare = instructions.removesuffix(TERMS_FOR_INSTRUCTIONS)
            self.added.append(
                self.counter.count_sync(instructions, messages)
                - self.counter.count_sync(bare, without)
            )
            for line in block.group(1).splitlines():
                m = LISTED.match(line)
                if m and m.group(2) in self.terms:
                    text = m.group(2)
                    answer["terms_for"].append(
                        {
                            "id": int(m.group(1)),
                            "terms": self.terms[text],
                            "situations": self.situations.get(text, []),
                        }
                    )
        parsed = schema.model_validate(answer)
        return Parsed(text=json.dumps(answer), usage=Usage(100, 10), parsed=parsed)

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int:
        return self.counter.count_sync(instructions, messages)

    async def aclose(self) -> None:
        pass


async def retrieval(store: MemoryStore, users: list[dict[str, Any]], uid: dict[str, int]) -> str:
    """hit@1 of answerable queries and unrelated → nothing, at the product's min_score."""
    hits = answerable = nothing = unrelated = 0
    for user in users:
        ids = {m["text"]: m["id"] for m in user["memories"]}
        for query in user["queries"]:
            found = await store.search(
                uid[user["id"]], query["text"], top_k=3, min_score=DEFAULT_MIN_SCORE
            )
            if query["relevant"]:
                answerable += 1
                top = found.hits[0].memory.text if found.hits else None
                hits += top is not None and ids.get(top) in query["relevant"]
            else:
                unrelated += 1
                nothing += not found.hits
    return (
        f"hit@1 {hits / max(1, answerable):.3f} ({hits}/{answerable}), "
        f"unrelated → nothing {nothing / max(1, unrelated):.3f} ({nothing}/{unrelated})"
    )


async def main() -> None:
    users: list[dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))["users"]
    terms = {m["text"]: m["terms"].split() for u in users for m in u["memories"]}
    by_id = json.loads(DATA.with_name("learner_set_situations.json").read_text(encoding="utf-8"))
    situations = {m["text"]: by_id[m["id"]] for u in users for m in u["memories"]}
    model = Scripted(terms, situations)
    embedder = LocalUSE()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "memora.sqlite3")
        await db.open()
        store = await MemoryStore.create(Path(tmp) / "chroma", embedder)
        engine = Engine(
            db=db,
            llm=model,
            counter=LocalTokenCounter(),
            store=store,
            config=EngineConfig(learner_enabled=True),
        )
        uid = {u["id"]: 9000 + n for n, u in enumerate(users)}
        for user in users:
            ref, chat = UserRef(uid[user["id"]], user["id"]), ChatRef(uid[user["id"]])
            for memory in user["memories"]:
                await engine.remember(chat, ref, memory["text"])
        splits = {s: [u for u in users if u["split"] == s] for s in ("tune", "heldout")}
        before = {s: await retrieval(store, us, uid) for s, us in splits.items()}
        turns: list[int] = []
        for user in users:
            ref, chat = UserRef(uid[user["id"]], user["id"]), ChatRef(uid[user["id"]])
            for n in range(1, MAX_TURNS + 1):
                await engine.handle_turn(chat, ref, "Let's practise some English today.")
                await engine.drain()
                if all(m.terms and m.situations for m in await store.memories(ref.id)):
                    turns.append(n)
                    break
            else:
                turns.append(MAX_TURNS + 1)
        after = {s: await retrieval(store, us, uid) for s, us in splits.items()}
        await store.close()
        await db.close()
    per_user = [len(u["memories"]) for u in users]
    print(f"{len(users)} learners, {sum(per_user)} memories saved with /remember (no terms)")
    print(
        "turns until every memory had terms and situations: median "
        f"{statistics.median(turns)}, max {max(turns)} "
        f"(at {MAX_BACKFILL} a call: ceil(memories/{MAX_BACKFILL}) = "
        f"{statistics.median([math.ceil(n / MAX_BACKFILL) for n in per_user])} median)"
    )
    print(
        f"input tokens the backfill adds to an extraction call (o200k): median "
        f"{statistics.median(model.added)}, max {max(model.added)} over {len(model.added)} calls"
    )
    for split in ("tune", "heldout"):
        print(f"{split:>8} users, before: {before[split]}")
        print(f"{split:>8} users, after:  {after[split]}")


if __name__ == "__main__":
    asyncio.run(main())
