"""Retrieval on a Chroma server (`[longterm] chroma_url`): one user among many, cache vs none.

Fills a fresh `chroma run` server (started here from the chromadb wheel) with --total memories
(random unit vectors of the local model's 512 dimensions, memora's own record format) spread
over users, --user of them for one learner, then times that learner's retrieval through the
real MemoryStore (query embedded by the real local model):

- cold start: the first search after a restart (version check + load + BM25 index + rank);
- warm, version-checked: the cache is used after one `get` of the user's version token
  (memora.longterm.shared), what every search costs when nobody else wrote;
- no cache: the user reloaded from the server on every search (the alternative design).

    .venv/bin/python benchmarks/chroma_server.py [--total 1000000] [--user 10000] [--searches 50]

Ingest runs at a few thousand vectors a second on a 2-core machine; 1,000,000 takes a while.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memora.longterm import MemoryStore
from memora.longterm.embeddings import LocalUSE
from memora.longterm.records import Memory, to_metadata
from tests.engines import start_chroma

LEARNER = 424242
QUERIES = ["what exam am I preparing for?", "我下個月去哪裡出差？", "which words should I review"]


def fill(store: MemoryStore, total: int, for_learner: int, batch: int = 2000) -> float:
    """Upsert `total` memories, `for_learner` of them the learner's; returns seconds taken."""
    col = store._col
    rng = np.random.default_rng(5)
    stamp = "2026-11-30T00:00:00+00:00"
    others = max(1, (total - for_learner) // 100)  # ~100 memories per other user
    start = time.perf_counter()
    for first in range(0, total, batch):
        n = min(batch, total - first)
        vecs = rng.standard_normal((n, 512)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        ids, docs, metas = [], [], []
        for k in range(first, first + n):
            user = LEARNER if k < for_learner else 1 + k % others
            memory = Memory(
                id=str(uuid.UUID(int=k)),
                user_id=user,
                text=f"Memory {k}: the learner said something worth keeping about topic {k % 97}.",
                source="extracted",
                category="other",
                created_at=stamp,
                updated_at=stamp,
            )
            ids.append(memory.id)
            docs.append(memory.text)
            metas.append(to_metadata(memory, k))
        col.upsert(ids=ids, embeddings=vecs, documents=docs, metadatas=metas)
    return time.perf_counter() - start


async def timed_search(store: MemoryStore, query: str) -> float:
    t0 = time.perf_counter()
    found = await store.search(LEARNER, query, top_k=3, min_score=0.0)
    assert found.hits and all(h.memory.user_id == LEARNER for h in found.hits)
    return (time.perf_counter() - t0) * 1000


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--total", type=int, default=1_000_000)
    ap.add_argument("--user", type=int, default=10_000)
    ap.add_argument("--searches", type=int, default=50)
    args = ap.parse_args()
    embedder = LocalUSE()
    embedder.warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        server = start_chroma(Path(tmp))
        try:
            store = MemoryStore(Path(tmp) / "unused", embedder, url=server.url)
            await store.open()
            seconds = await asyncio.to_thread(fill, store, args.total, args.user)
            count = await asyncio.to_thread(store._col.count)
            await store.close()

            store = MemoryStore(Path(tmp) / "unused", embedder, url=server.url)  # a restart
            await store.open()
            cold = await timed_search(store, QUERIES[0])
            warm = [await timed_search(store, QUERIES[i % 3]) for i in range(args.searches)]
            none = []
            for i in range(args.searches):
                store._cache.invalidate(LEARNER)  # what "no cache when remote" would do
                none.append(await timed_search(store, QUERIES[i % 3]))
            await store.close()
        finally:
            server.stop()
    print(f"Chroma server: {count:,} memories ({args.user:,} of them the learner's)")
    print(f"ingest: {seconds:.0f} s ({count / seconds:,.0f} memories/s)")
    print(f"cold start (first search after a restart): {cold:9.1f} ms")
    print(
        f"search, cache + version check:  median {statistics.median(warm):8.1f} ms"
        f"  p95 {p95(warm):8.1f} ms"
    )
    print(
        f"search, no cache (reload each): median {statistics.median(none):8.1f} ms"
        f"  p95 {p95(none):8.1f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
