"""Does zeroing deleted vectors in Chroma's HNSW files hurt Chroma's own search? (memora/erase.py)

Run from the repository root::

    nice -n 19 .venv/bin/python benchmarks/erase_recall.py [--memories 10000] [--queries 200]

Prints figures, passes or fails nothing. hnswlib keeps a deleted element in its graph: a search
still walks through it, measuring the query's distance to its vector; once the vector is zeros
(`erase_deleted_vectors`, what the store does at every erasure) every query is at the same
distance from it (cosine 0), so the walk may route differently. Memora asks Chroma's index for
a learner who is not in its cache (``MemoryStore._nearest_sync``: the learner's nearest
memories, filtered by user id); a cached learner is ranked from the store's own matrix.

One embedded Chroma collection (Chroma's default HNSW settings, cosine) holds --memories
vectors, 512 dimensions, memory i belonging to user i % --users. The vectors are synthetic:
by default with the coarse shape of sentence embeddings (a direction they all share, --topics
topics, each memory its own part: the cosine figures printed show the mix); --topics 0 makes
them isotropic random vectors, the hardest case for a graph index (its recall is far from 1,
so a change in routing shows). Then, in copies of its folder, a fraction of the memories
(random, --seed) is deleted and persisted as Memora's erasure does (threshold 1), and left as
hnswlib leaves them ("kept") or zeroed ("zeroed"). --queries queries, each a live memory's
vector plus --noise times a random unit vector (1.5: cosine about 0.55 with that memory),
ask Chroma for 10 results, filtered to that memory's user as Memora asks, and unfiltered;
recall@10 is measured against exact cosine search over the live memories (the user's, or all
of them). The intact collection (nothing deleted) is the baseline of HNSW's own recall.
Query times are wall time of one query on a shared machine (noisy).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from machine import load as _load

from memora.erase import _hnsw_layout, erase_deleted_vectors, hnsw_indexes

DIM = 512
K = 10
COLLECTION = "memories"
F32 = npt.NDArray[np.float32]


def _unit(v: npt.NDArray[Any]) -> F32:
    out: F32 = (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)
    return out


def _vectors(n: int, topics: int, rng: np.random.Generator) -> F32:
    if not topics:  # no structure at all: the hardest case for a graph index
        return _unit(rng.standard_normal((n, DIM)))
    shared = _unit(rng.standard_normal(DIM))
    centres = _unit(rng.standard_normal((topics, DIM)))
    own = _unit(rng.standard_normal((n, DIM)))
    topic = rng.integers(0, topics, n)
    return _unit(0.45 * shared + 0.75 * centres[topic] + 0.6 * own)


def _client(path: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def _build(path: Path, vecs: F32, users: int) -> None:
    client = _client(path)
    col = client.get_or_create_collection(
        COLLECTION,
        configuration={"hnsw": {"space": "cosine", "sync_threshold": 1}},
        embedding_function=None,
    )
    for start in range(0, len(vecs), 1000):
        ids = range(start, min(len(vecs), start + 1000))
        col.add(
            ids=[f"m{i}" for i in ids],
            embeddings=vecs[start : start + len(ids)],
            metadatas=[{"user_id": i % users} for i in ids],
        )
    client.close()


def _delete(path: Path, gone: npt.NDArray[np.int64]) -> None:
    client = _client(path)
    col = client.get_collection(COLLECTION, embedding_function=None)
    for start in range(0, len(gone), 500):
        col.delete(ids=[f"m{i}" for i in gone[start : start + 500]])
    client.close()


def _centroids(root: Path) -> None:
    """An alternative to zeros, not what Memora does: each deleted element's vector becomes the
    normalised mean of its live level-0 neighbours' vectors (computed from what the files still
    hold: its links and their vectors), so the walk can still route through it."""
    for folder in hnsw_indexes(root):
        layout = _hnsw_layout(folder)
        shape = (layout.count, layout.per_element)
        slots = np.memmap(folder / "data_level0.bin", dtype=np.uint8, mode="r+", shape=shape)
        start, end = layout.vector_start, layout.vector_end
        deleted = (slots[:, 2] & 1).astype(bool)
        vectors = np.ascontiguousarray(slots[:, start:end]).view(np.float32).copy()
        counts = np.ascontiguousarray(slots[:, 0:2]).view(np.uint16)[:, 0]
        links = np.ascontiguousarray(slots[:, 4:start]).view(np.uint32)
        for i in np.flatnonzero(deleted):
            near = links[i, : counts[i]]
            near = near[~deleted[near]]
            mean = vectors[near].mean(axis=0) if len(near) else np.zeros(vectors.shape[1])
            norm = float(np.linalg.norm(mean))
            v = (mean / norm if norm else mean).astype(np.float32)
            slots[i, start:end] = np.frombuffer(v.tobytes(), dtype=np.uint8)
        slots.flush()
        del slots


def _exact(
    vecs: F32, live: npt.NDArray[np.bool_], q: F32, user: int | None, users: int
) -> set[int]:
    mask = live.copy()
    if user is not None:
        mask &= np.arange(len(vecs)) % users == user
    ids = np.flatnonzero(mask)
    sims = vecs[ids] @ q
    return {int(i) for i in ids[np.argsort(-sims, kind="stable")[:K]]}


def _measure(
    path: Path,
    vecs: F32,
    live: npt.NDArray[np.bool_],
    queries: list[tuple[F32, int]],
    users: int,
) -> dict[str, tuple[float, list[float]]]:
    """{"user"|"all": (mean recall@10, query ms)} for one folder, a fresh client."""
    client = _client(path)
    col = client.get_collection(COLLECTION, embedding_function=None)
    col.count()  # loads the index
    col.query(query_embeddings=queries[0][0][None, :], n_results=K, include=[])  # warm
    out: dict[str, tuple[float, list[float]]] = {}
    for scope in ("user", "all"):
        recalls, ms = [], []
        for q, user in queries:
            where = {"user_id": user} if scope == "user" else None
            t = time.perf_counter()
            got = col.query(query_embeddings=q[None, :], n_results=K, where=where, include=[])
            ms.append(1000 * (time.perf_counter() - t))
            found = {int(i[1:]) for i in got["ids"][0]}
            truth = _exact(vecs, live, q, user if scope == "user" else None, users)
            recalls.append(len(found & truth) / len(truth))
        out[scope] = (statistics.fmean(recalls), ms)
    client.close()
    return out


def _ms(ms: list[float]) -> str:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered):5.1f} ms p95 {p95:5.1f} ms"


def _queries(
    vecs: F32,
    live: npt.NDArray[np.bool_],
    n: int,
    noise: float,
    users: int,
    rng: np.random.Generator,
) -> list[tuple[F32, int]]:
    picks = rng.choice(np.flatnonzero(live), size=n, replace=False)
    qs = _unit(vecs[picks] + noise * _unit(rng.standard_normal((n, DIM))))
    return [(qs[j], int(picks[j]) % users) for j in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--users", type=int, default=100, help="memories i belong to user i %% users"
    )
    parser.add_argument("--topics", type=int, default=500, help="0: isotropic random vectors")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.3])
    parser.add_argument(
        "--noise", type=float, default=1.5, help="a query: a memory + this much noise"
    )
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--centroids",
        action="store_true",
        help="also: deleted vectors set to their neighbours' mean",
    )
    args = parser.parse_args()
    print(f"start: {_load()}")
    rng = np.random.default_rng(args.seed)
    vecs = _vectors(args.memories, args.topics, rng)
    sample = vecs[rng.choice(len(vecs), 500, replace=False)]
    sims = sample @ vecs.T
    sims[sims > 0.9999] = -1
    pairs = sample @ sample.T
    print(
        f"{args.memories} memories, {args.topics} topics: cosine of random pairs median"
        f" {np.median(pairs[np.triu_indices(500, 1)]):.2f}, to the nearest other memory"
        f" median {np.median(sims.max(axis=1)):.2f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "intact"
        t = time.perf_counter()
        _build(base, vecs, args.users)
        print(f"built in {time.perf_counter() - t:.0f} s")
        live = np.ones(len(vecs), dtype=bool)
        intact = _measure(
            base,
            vecs,
            live,
            _queries(vecs, live, args.queries, args.noise, args.users, rng),
            args.users,
        )
        _print("nothing deleted", intact, None)
        for fraction in args.fractions:
            gone = rng.choice(len(vecs), size=int(fraction * len(vecs)), replace=False)
            live = np.ones(len(vecs), dtype=bool)
            live[gone] = False
            queries = _queries(vecs, live, args.queries, args.noise, args.users, rng)
            kept, zeroed = Path(tmp) / f"kept{fraction}", Path(tmp) / f"zeroed{fraction}"
            shutil.copytree(base, kept)
            _delete(kept, gone)
            shutil.copytree(kept, zeroed)
            t = time.perf_counter()
            n = erase_deleted_vectors(zeroed)
            took = 1000 * (time.perf_counter() - t)
            print(f"{fraction:.0%} deleted ({len(gone)}): zeroed {n} bytes in {took:.0f} ms")
            before = _measure(kept, vecs, live, queries, args.users)
            _print("  deleted, vectors kept (hnswlib as is)", before, None)
            after = _measure(zeroed, vecs, live, queries, args.users)
            _print("  deleted, vectors zeroed (Memora)", after, before)
            if args.centroids:
                moved = Path(tmp) / f"centroids{fraction}"
                shutil.copytree(kept, moved)
                _centroids(moved)
                got = _measure(moved, vecs, live, queries, args.users)
                _print("  deleted, neighbours' mean (alternative, not Memora's)", got, before)
                shutil.rmtree(moved)
            shutil.rmtree(kept)
            shutil.rmtree(zeroed)
    print(f"end: {_load()}")


def _print(
    label: str,
    got: dict[str, tuple[float, list[float]]],
    baseline: dict[str, tuple[float, list[float]]] | None,
) -> None:
    print(label)
    for scope, name in (("user", "filtered to the user"), ("all", "unfiltered")):
        recall, ms = got[scope]
        ratio = ""
        if baseline is not None:
            ratio = f" (x{recall / baseline[scope][0]:.3f} of kept)"
        print(f"    {name:21s} recall@10 {recall:.3f}{ratio} | {_ms(ms)}")


if __name__ == "__main__":
    main()
