"""What "deleted means gone from the disk" costs in Chroma (memora/erase.py).

Run from the repository root::

    .venv/bin/python benchmarks/erase_cost.py [--memories 2000] [--writes 30]

Prints figures, passes or fails nothing. Three Chroma PersistentClients in temporary folders
hold --memories memories of 100 users (512-dimensional vectors, as the local embedder makes,
with a document and Memora's metadata):

* baseline: Chroma's defaults (sync_threshold 1000), a plain delete: the deleted words stay;
* the previous layout: sync_threshold = 1 on every write, and the store's erasure (a delete,
  `vacuum_chroma`, `scrub_hnsw`);
* Memora's layout: Chroma's default threshold for writes, and the store's erasure
  (`ChromaBackend._erasing`: reopen at threshold 1, delete, vacuum, reopen at the default, scrub).

In each: --writes single-memory upserts (what one extraction or /remember does), wall and CPU
(this process, Chroma's threads included); /forgetme's store part (delete one user's memories
with what the layout does around it); how many rows Chroma's log (embeddings_queue) still holds
and whether a deleted document's words, or a run of 64 consecutive float32 values of a deleted
memory's vector (as written, or normalised as hnswlib stores it), are still in any file of the
folder (the index files included).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from machine import load as _load

import memora.longterm.store as store_module
from memora.erase import CHROMA_FILE, CHROMA_HNSW, ERASE_HNSW
from memora.longterm.store import MemoryStore

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


def _ms(ms: list[float]) -> str:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered):7.1f} ms  p95 {p95:7.1f} ms"


class _Embedder:
    """What MemoryStore needs of an embedder to open a folder (nothing is embedded here)."""

    name = "bench"
    dim = DIM


def _erase_as_memora(path: Path, delete: Callable[[Any], object]) -> None:
    """The store's own erasure around `delete` (memora.longterm.backend.ChromaBackend._erasing)."""
    backend = MemoryStore(path, _Embedder()).backend  # type: ignore[arg-type]
    backend.client, backend.collection = backend.open_sync()
    try:
        backend._erasing(lambda: delete(backend.col))
    finally:
        backend.client.close()


def run(label: str, hnsw: dict[str, Any], args: argparse.Namespace, erase: str) -> None:
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        client, collection = _client(path, hnsw)
        _fill(collection, args.memories, rng)
        wall, cpu = [], []
        written = rng.standard_normal((args.writes, DIM)).astype(np.float32)
        for k in range(args.writes):
            t, c = time.perf_counter(), time.process_time()
            collection.upsert(
                ids=[f"new{k}"],
                embeddings=written[k : k + 1],
                documents=[f"Zqxmarker{k} is the learner's new fact."],
                metadatas=[{"user_id": USERS + 1, "source": "extracted"}],
            )
            wall.append(1000 * (time.perf_counter() - t))
            cpu.append(1000 * (time.process_time() - c))
        where = {"user_id": USERS + 1}
        t, c = time.perf_counter(), time.process_time()
        if erase == "memora":
            client.close()  # the store opens the folder itself
            store_module.CHROMA_HNSW = hnsw  # the store's erasure for writes at this threshold
            _erase_as_memora(path, lambda col: col.delete(where=where))
        else:
            collection.delete(where=where)
            client.close()
        deleted = (1000 * (time.perf_counter() - t), 1000 * (time.process_time() - c))
        db = path / CHROMA_FILE
        con = sqlite3.connect(db)
        log_rows = con.execute("SELECT COUNT(*) FROM embeddings_queue").fetchone()[0]
        con.close()
        left = [str(f.relative_to(path)) for f in path.rglob("*") if _holds(f, b"Zqxmarker")]
        vectors = [str(f.relative_to(path)) for f in path.rglob("*") if _holds_vector(f, written)]
    print(f"{label}")
    print(f"  one upsert at {args.memories} memories: wall {_ms(wall)} | CPU {_ms(cpu)}")
    print(f"  delete {args.writes} memories of one user, with what the layout does around it:")
    print(f"      wall {deleted[0]:.1f} ms, CPU {deleted[1]:.1f} ms")
    print(f"  log rows left: {log_rows}; files still holding deleted words: {left or 'none'}")
    print(f"  files still holding a piece of a deleted vector: {vectors or 'none'}")


def _holds(file: Path, needle: bytes) -> bool:
    return file.is_file() and needle in file.read_bytes()


def _holds_vector(file: Path, vectors: npt.NDArray[np.float32], width: int = 64) -> bool:
    """Whether the file holds, at any byte offset, `width` consecutive float32 values of one of
    the vectors' first `width`, as written or scaled to unit length (to float32 rounding)."""
    if not file.is_file():
        return False
    data = file.read_bytes()
    runs = np.concatenate([vectors[:, :width], vectors[:, :width] / _norms(vectors)])
    order = np.argsort(runs[:, 0])
    firsts = runs[order, 0]
    for offset in range(4):
        count = (len(data) - offset) // 4
        if count < width:
            continue
        values = np.frombuffer(data, dtype=np.float32, count=count, offset=offset)
        values = values[: count - width + 1]
        with np.errstate(invalid="ignore", over="ignore"):
            at = np.clip(np.searchsorted(firsts, values), 1, len(firsts) - 1)
            near = np.minimum(np.abs(firsts[at] - values), np.abs(firsts[at - 1] - values))
            for i in np.flatnonzero(near <= 1e-5 * np.abs(values) + 1e-7):
                window = np.frombuffer(data, dtype=np.float32, count=width, offset=offset + 4 * i)
                if np.isclose(window, runs, rtol=1e-5, atol=1e-7).all(axis=1).any():
                    return True
    return False


def _norms(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms: npt.NDArray[np.float32] = np.linalg.norm(vectors, axis=1, keepdims=True)
    return norms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--writes", type=int, default=30)
    args = parser.parse_args()
    print(f"start: {_load()}")
    run("baseline: Chroma defaults (sync_threshold 1000), plain delete", {}, args, "none")
    run("previous: sync_threshold 1 for every write, store's erasure", ERASE_HNSW, args, "memora")
    run("memora: default threshold, erasure reopens at 1", CHROMA_HNSW, args, "memora")
    print(f"end: {_load()}")


if __name__ == "__main__":
    main()
