"""What one turn and one memory cost on disk, and one cached user in RAM (for deploy/CAPACITY.md).

- bytes per turn: N turns of learner-sized messages through the real engine (zero-latency fake
  model, the default 3-turn window, summaries folded) into the SQLite file (after a WAL
  checkpoint) and into PostgreSQL (pg_total_relation_size of every table; pgserver started if no
  --database-url);
- bytes per memory: M memories (real local embeddings, 512 dimensions) into the embedded Chroma
  store, its directory size over M;
- RAM per cached user: tracemalloc's growth when a user with K memories is loaded into the
  per-process cache and searched once (vectors, texts, records, the BM25 index).

    .venv/bin/python -m benchmarks.capacity [--turns 500] [--memories 1000] [--per-user 100]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import tracemalloc
import warnings
from pathlib import Path

from benchmarks.core_turns import REPLY, TOPICS, ZeroLatencyLLM
from benchmarks.retrieval_overhead import learner_facts, words_for
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.longterm import MemoryStore, NewMemory
from memora.longterm.embeddings import LocalUSE
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from memora.textnorm import warm as warm_text


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


async def turns_into(engine: Engine, turns: int, first: int) -> None:
    rng = random.Random(first)
    for i in range(first, first + turns):
        chat = ChatRef(10_000 + i % 20)
        reply = await engine.handle_turn(chat, UserRef(chat.id, "learner"), rng.choice(TOPICS))
        assert reply.ok, reply.text
        await engine.drain()


async def bytes_per_turn(db: Database, turns: int) -> float:
    """Growth over the second half of 2N turns: the schema's fixed cost is not counted."""
    await db.open()
    engine = Engine(db=db, llm=ZeroLatencyLLM(), counter=LocalTokenCounter(), config=EngineConfig())
    await turns_into(engine, turns, 0)
    before = await used_bytes(db)
    await turns_into(engine, turns, turns)
    after = await used_bytes(db)
    await db.close()
    return (after - before) / turns


async def used_bytes(db: Database) -> int:
    if db.connection.dialect == "sqlite":
        await db.connection.checkpoint()
        assert db.connection.path is not None
        return db.connection.path.stat().st_size
    async with db.connection.db.execute("VACUUM") as _:
        pass
    async with db.connection.db.execute(
        "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'r' AND n.nspname = current_schema()"
    ) as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def chroma_bytes_per_memory(
    tmp: Path, embedder: LocalUSE, memories: int, words: bool = False
) -> float:
    """Growth of the store's directory (closed, so everything is on disk) over M memories added
    after the first M, per memory the store kept: the collection's fixed cost is not counted.
    The texts are distinct learner facts (retrieval_overhead.learner_facts): texts that differ
    only in a number would be kept as one memory, superseded (the duplicate guard). `words`:
    each with 6 search terms and 6 situations, as the extraction call writes them."""
    path = tmp / ("chroma-words" if words else "chroma")
    facts = learner_facts(2 * memories, seed=3)
    rng = random.Random(5)

    def item(text: str) -> NewMemory:
        if not words:
            return NewMemory(text, source="manual")
        terms, situations = words_for(rng)
        return NewMemory(text, "extracted", terms=terms, situations=situations)

    sizes, kept = [], []
    for half in range(2):
        async with MemoryStore(path, embedder) as store:
            for start in range(half * memories, (half + 1) * memories, 100):
                user = 1 + start // 100
                items = [item(t) for t in facts[start : start + 100]]
                await store.writer.add_many(user, items)
            kept.append(sum([await store.count(1 + u) for u in range(2 * memories // 100)]))
        sizes.append(dir_size(path))
    return (sizes[1] - sizes[0]) / max(kept[1] - kept[0], 1)


async def ram_per_cached_user(tmp: Path, embedder: LocalUSE, per_user: int) -> tuple[float, int]:
    """tracemalloc's growth when one user's memories load into the cache (a cold search, then
    the background load it starts), and how many memories the user has."""
    async with MemoryStore(tmp / "ram", embedder) as store:
        await store.writer.add_many(7, [NewMemory(t) for t in learner_facts(per_user, seed=5)])
        kept = await store.count(7)
        store._cache.clear()  # measure a cold load, as after a restart
        await store.searcher.search(
            8, "warm up", top_k=3, min_score=0.0
        )  # another user: loads nothing
        # Once per process, not per user: the stemmer's dictionary, which the engine loads at
        # start (app.open_engine, text.warm_in_background).
        warm_text()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        await store.searcher.search(
            7, "what exam is the learner preparing for?", top_k=3, min_score=0.0
        )
        await store.memories(7)  # the background load the search started, into the cache
        grown = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
    return float(grown), kept


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--per-user", type=int, default=100)
    ap.add_argument("--database-url", default="")
    args = ap.parse_args()
    embedder = LocalUSE()
    embedder.warm_up()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        url, server = args.database_url, None
        if not url:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import pgserver  # lazily: the dev extra's PostgreSQL wheel; its import warns

                server = pgserver.get_server(tmp / "pg", cleanup_mode="delete")
            url = server.get_uri()
        per_turn_sqlite = await bytes_per_turn(Database(tmp / "turns.sqlite3"), args.turns)
        per_turn_pg = await bytes_per_turn(Database(url=url), args.turns)
        if server is not None:
            server.cleanup()
        per_memory = await chroma_bytes_per_memory(tmp, embedder, args.memories)
        per_worded = await chroma_bytes_per_memory(tmp, embedder, args.memories, words=True)
        ram_cold, cached = await ram_per_cached_user(tmp, embedder, args.per_user)
    n, m = args.turns, args.memories
    print(f"reply length {len(REPLY)} chars; messages from benchmarks/core_turns.py TOPICS")
    print(f"bytes per turn, SQLite file:        {per_turn_sqlite:10.0f}  (turns {n}-{2 * n})")
    print(f"bytes per turn, PostgreSQL tables:  {per_turn_pg:10.0f}  (turns {n}-{2 * n})")
    print(f"bytes per memory, embedded Chroma:  {per_memory:10.0f}  (memories {m}-{2 * m})")
    print(f"  with 6 terms + 6 situations each: {per_worded:10.0f}  (the extraction call's)")
    print(
        f"RAM per cached user ({cached} memories): {ram_cold:10.0f} bytes "
        f"= {ram_cold / max(cached, 1):.0f} per memory"
    )


if __name__ == "__main__":
    asyncio.run(main())
