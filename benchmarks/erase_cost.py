"""What "deleted means gone from the disk" costs in Chroma (memora/erase.py).

Run from the repository root::

    .venv/bin/python benchmarks/erase_cost.py [--memories 2000] [--writes 30]

Prints figures, passes or fails nothing. Two Chroma PersistentClients in temporary folders hold
--memories memories of 100 users (512-dimensional vectors, as the local embedder makes, with a
document and Memora's metadata), one collection with Chroma's default log settings (the
baseline, sync_threshold 1000) and one as Memora creates it (sync_threshold = batch_size = 1).
Then, in each:

* write: --writes single-memory upserts (what one extraction or /remember does);
* /forgetme's store part: delete one user's 20 memories (filtered delete), then for Memora's
  layout also `vacuum_chroma` (FTS optimize + VACUUM), timed separately;
* how many rows Chroma's log (embeddings_queue) still holds and whether a deleted document's
  words are still anywhere in chroma.sqlite3.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from memora.erase import CHROMA_FILE, CHROMA_HNSW, vacuum_chroma

DIM = 512
USERS = 100


def _client(path: Path, hnsw: dict[str, Any]) -> tuple[Any, Any]:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.get_or_create_collection(
        "memories", configuration={"hnsw": {"space": "cosine", **hnsw}}, embedding_function=None
    )
    return client, collection


def _fill(collection: Any, n: int, rng: np.random.Generator) -> None:
    for start in range(0, n, 500):
        ids = list(range(start, min(n, start + 500)))
        collection.add(
            ids=[f"m{i}" for i in ids],
            embeddings=rng.standard_normal((len(ids), DIM)).astype(np.float32),
            documents=[f"The user {i % USERS} studies topic number {i}." for i in ids],
            metadatas=[{"user_id": i % USERS, "source": "extracted"} for i in ids],
        )


def _ms(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {1000 * statistics.median(ordered):7.1f} ms   p95 {1000 * p95:7.1f} ms"


def run(label: str, hnsw: dict[str, Any], args: argparse.Namespace, erase: bool) -> None:
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        client, collection = _client(path, hnsw)
        _fill(collection, args.memories, rng)
        writes = []
        for k in range(args.writes):
            t = time.perf_counter()
            collection.upsert(
                ids=[f"new{k}"],
                embeddings=rng.standard_normal((1, DIM)).astype(np.float32),
                documents=[f"Zqxmarker{k} is the learner's new fact."],
                metadatas=[{"user_id": USERS + 1, "source": "extracted"}],
            )
            writes.append(time.perf_counter() - t)
        t = time.perf_counter()
        collection.delete(where={"user_id": USERS + 1})
        deleted = time.perf_counter() - t
        vacuumed = 0.0
        if erase:
            t = time.perf_counter()
            vacuum_chroma(path)
            vacuumed = time.perf_counter() - t
        db = path / CHROMA_FILE
        con = sqlite3.connect(db)
        log_rows = con.execute("SELECT COUNT(*) FROM embeddings_queue").fetchone()[0]
        con.close()
        left = b"Zqxmarker" in db.read_bytes()
        client.close()
    print(f"{label}")
    print(f"  one upsert at {args.memories} memories: {_ms(writes)}")
    print(f"  delete {args.writes} memories of one user: {1000 * deleted:.1f} ms", end="")
    print(f" + vacuum {1000 * vacuumed:.1f} ms" if erase else "")
    print(f"  log rows left: {log_rows}; deleted words still in chroma.sqlite3: {left}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--writes", type=int, default=30)
    args = parser.parse_args()
    run("baseline: Chroma defaults (sync_threshold 1000)", {}, args, erase=False)
    run("memora: sync_threshold = batch_size = 1, vacuum after delete", CHROMA_HNSW, args, True)


if __name__ == "__main__":
    main()
