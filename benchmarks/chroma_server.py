"""Retrieval on a Chroma server (`[longterm] chroma_url`): one user among many, cache vs none.

Fills a fresh `chroma run` server (started here from the chromadb wheel) with --total memories
(random unit vectors of the local model's 512 dimensions, memora's own record format) spread
over users, --user of them for one learner, then times that learner's retrieval through the
real MemoryStore (query embedded by the real local model):

- cold start: the first search after a restart (version check, the server's filtered kNN for
  the candidates, rank), beside the baseline of loading the whole user first and ranking, and
  the time the rest of the load then takes in the background;
- warm, version-checked: the cache is used after one `get` of the user's version token
  (memora.longterm.shared), what every search costs when nobody else wrote, beside the
  baseline of no cache (the user reloaded from the server for every search).

    .venv/bin/python benchmarks/chroma_server.py [--total 1000000] [--user 10000]
        [--data DIR [--load-only] [--load-seconds S]] [--searches 100] [--restarts 5]

The load goes through an embedded PersistentClient on the server's folder before the server
starts. On the shared 2-core machine it ran at 70-100 memories a second under other work
(about 500/s alone), so --data keeps the folder and a later run resumes or measures it.
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

from machine import load

from benchmarks.retrieval_overhead import learner_pool
from memora.erase import CHROMA_HNSW
from memora.longterm import MemoryStore
from memora.longterm.embeddings import LocalUSE
from memora.longterm.records import Memory, to_metadata
from memora.longterm.store import COLLECTION
from tests.engines import start_chroma

LEARNER = 424242
STAMP = "2026-11-30T00:00:00+00:00"
SPREAD = 20  # the learner's memories are one row in 20 of the first 20 × --user rows
QUERIES = ["what exam am I preparing for?", "我下個月去哪裡出差？", "which words should I review"]


def record(k: int, user: int, text: str) -> tuple[str, str, dict[str, object]]:
    """Memory k in memora's own record format (id, document, metadata)."""
    memory = Memory(
        id=str(uuid.UUID(int=k)),
        user_id=user,
        text=text,
        source="extracted",
        category="other",
        created_at=STAMP,
        updated_at=STAMP,
    )
    return memory.id, memory.text, to_metadata(memory, k)


def fill(
    folder: Path,
    total: int,
    pool: tuple[list[str], np.ndarray],
    batch: int = 5000,
    seconds: float = float("inf"),
) -> float:
    """Write `total` memories into a Chroma folder with an embedded PersistentClient (the
    server reads the same files), resuming where an earlier run stopped; returns seconds taken.

    The learner's memories (real facts with their USE vectors) are spread evenly over the first
    SPREAD × --user rows, among the others' (random unit vectors, ~100 memories per other user),
    so a load stopped early (--load-seconds, then measure with the same --data) already holds
    all of them. Collection name, space, HNSW settings and metadata are memora's.
    """
    import chromadb
    from chromadb.config import Settings

    texts, vectors = pool
    stride = max(1, min(total, SPREAD * len(texts)) // len(texts))
    others = max(1, (total - len(texts)) // 100)
    client = chromadb.PersistentClient(
        path=str(folder), settings=Settings(anonymized_telemetry=False)
    )
    try:
        col = client.get_or_create_collection(
            COLLECTION,
            configuration={"hnsw": {"space": "cosine", **CHROMA_HNSW}},
            metadata={"embedder": LocalUSE.name, "dim": LocalUSE.dim},
            embedding_function=None,
        )
        done = col.count()
        rng = np.random.default_rng(5 + done)
        start = time.perf_counter()
        for first in range(done - done % batch, total, batch):
            n = min(batch, total - first)
            vecs = rng.standard_normal((n, 512)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            ids, docs, metas = [], [], []
            for row, k in enumerate(range(first, first + n)):
                mine = k % stride == 0 and k // stride < len(texts)
                if mine:
                    vecs[row] = vectors[k // stride]
                    rec = record(k, LEARNER, texts[k // stride])
                else:
                    topic = f"the learner said something worth keeping about topic {k % 97}."
                    rec = record(k, 1 + k % others, f"Memory {k}: {topic}")
                ids.append(rec[0])
                docs.append(rec[1])
                metas.append(rec[2])
            col.upsert(ids=ids, embeddings=vecs, documents=docs, metadatas=metas)
            elapsed = time.perf_counter() - start
            if elapsed > seconds:
                print(f"  stopped by --load-seconds at {first + n:,}", flush=True)
                break
            if (first // batch) % 4 == 0 or first + n >= total:
                rate = (first + n - done) / elapsed if elapsed else 0.0
                print(f"  {first + n:>9,} stored, {elapsed:6.0f} s, {rate:,.0f}/s", flush=True)
        return time.perf_counter() - start
    finally:
        client.close()


async def timed_search(store: MemoryStore, query: str) -> float:
    t0 = time.perf_counter()
    found = await store.search(LEARNER, query, top_k=3, min_score=0.0)
    assert found.hits and all(h.memory.user_id == LEARNER for h in found.hits)
    return (time.perf_counter() - t0) * 1000


def p95(values: list[float]) -> float:
    return float(np.percentile(np.asarray(values), 95))


async def restarted(url: str, embedder: LocalUSE) -> MemoryStore:
    store = MemoryStore(Path("unused"), embedder, url=url)  # a new process's store
    await store.open()
    return store


async def measure(url: str, embedder: LocalUSE, searches: int, restarts: int) -> None:
    cold, refill, whole = [], [], []
    for i in range(restarts):
        store = await restarted(url, embedder)
        try:  # the first search answers from the server's filtered kNN while the user loads
            cold.append(await timed_search(store, QUERIES[i % 3]))
            t0 = time.perf_counter()
            await store.memories(LEARNER)  # joins the background load
            refill.append((time.perf_counter() - t0) * 1000)
        finally:
            await store.close()
        store = await restarted(url, embedder)
        try:  # baseline: what the first search did before, load everything, then rank
            t0 = time.perf_counter()
            await store.memories(LEARNER)
            await timed_search(store, QUERIES[i % 3])
            whole.append((time.perf_counter() - t0) * 1000)
        finally:
            await store.close()
    store = await restarted(url, embedder)
    try:
        await store.memories(LEARNER)
        warm = [await timed_search(store, QUERIES[i % 3]) for i in range(searches)]
        none = []
        for i in range(max(3, searches // 10)):
            store._cache.invalidate(LEARNER)  # what "no cache when remote" would do
            t0 = time.perf_counter()
            await store.memories(LEARNER)
            await timed_search(store, QUERIES[i % 3])
            none.append((time.perf_counter() - t0) * 1000)
    finally:
        await store.close()
    report("cold start: first search after a restart", cold, whole)
    report("  then the rest of the user's load", refill)
    report("  baseline: load the whole user, then rank", whole)
    report("search, cache + version check", warm, none)
    report("  baseline: no cache (reload, then rank)", none)


def report(name: str, ms: list[float], base: list[float] | None = None) -> None:
    ratio = f"  ({statistics.median(ms) / statistics.median(base):.3f}× baseline)" if base else ""
    print(
        f"{name:<44} n={len(ms):>3}  median {statistics.median(ms):8.1f} ms"
        f"  p95 {p95(ms):8.1f} ms{ratio}"
    )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--total", type=int, default=1_000_000)
    ap.add_argument("--user", type=int, default=10_000)
    ap.add_argument("--searches", type=int, default=100)
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument(
        "--data",
        type=Path,
        help="keep the server's folder here between runs (resumes an unfinished load)",
    )
    ap.add_argument("--load-only", action="store_true", help="fill --data and stop")
    ap.add_argument(
        "--load-seconds", type=float, default=float("inf"), help="stop loading after this long"
    )
    args = ap.parse_args()
    embedder = LocalUSE()
    embedder.warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.data or Path(tmp)
        folder = root / "chroma-server"  # where tests.engines.start_chroma serves from
        pool = learner_pool(args.user, embedder)
        seconds = await asyncio.to_thread(fill, folder, args.total, pool, seconds=args.load_seconds)
        if args.load_only:
            return
        server = start_chroma(root)
        try:
            store = await restarted(server.url, embedder)
            count = await asyncio.to_thread(store._col.count)
            await store.close()
            print(f"Chroma server: {count:,} memories ({args.user:,} of them the learner's)")
            print(f"load of this run: {seconds:.0f} s")
            print(f"start: {load()}")
            await measure(server.url, embedder, args.searches, args.restarts)
            print(f"end: {load()}")
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
