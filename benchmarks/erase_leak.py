"""How often a deleted memory's words reach Chroma's index files, before and after the scrub.

Run from the repository root::

    nice -n 19 .venv/bin/python benchmarks/erase_leak.py [--runs 30] [--threshold 1000]

Prints figures, passes or fails nothing. Each run is a fresh process (the allocator's state is
what varies): writes to a new Chroma folder at --threshold (Chroma's log holds them), one of them
carrying a marker word, then the erasure of a write layout that waits in the log (switch the
collection to sync_threshold 1, reopen, delete, vacuum: Chroma creates its index anew on that
load and replays the log). It then looks for the marker in every file, and where it is in
``data_level0.bin`` or ``length.bin``, at which slot against the header's element count;
then runs `memora.erase.scrub_hnsw` and looks again. The cause (memora/erase.py): hnswlib
writes its whole element array when it creates an index, unused slots from malloc'd memory.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from memora.erase import HNSW_HEADER, hnsw_indexes, scrub_hnsw, vacuum_chroma

MARKER = b"Zorblaxquintet"
DIM = 512


def _open(path: Path, threshold: int) -> tuple[Any, Any]:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.get_or_create_collection(
        "memories",
        configuration={"hnsw": {"space": "cosine", "sync_threshold": threshold}},
        embedding_function=None,
    )
    return client, collection


def _where(path: Path) -> list[str]:
    """Each place the marker is: file, offset, and for an index file its slot vs the count."""
    found = []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        data = file.read_bytes()
        at = data.find(MARKER)
        while at >= 0:
            where = f"{file.relative_to(path)}@{at}"
            header = file.parent / HNSW_HEADER
            if file.suffix == ".bin" and header.is_file():
                _, _, capacity, count, per = struct.unpack_from("<iQQQQ", header.read_bytes())
                width = per if file.name == "data_level0.bin" else 4
                where += f" slot {at // width} (elements {count}, capacity {capacity})"
            found.append(where)
            at = data.find(MARKER, at + 1)
    return found


def _unused_nonzero(path: Path) -> int:
    total = 0
    for folder in hnsw_indexes(path):
        _, _, _, count, per = struct.unpack_from("<iQQQQ", (folder / HNSW_HEADER).read_bytes())
        data = (folder / "data_level0.bin").read_bytes()[count * per :]
        total += len(data) - data.count(0)
    return total


def one(threshold: int, others: int) -> dict[str, Any]:
    rng = np.random.default_rng()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        client, collection = _open(path, threshold)
        texts = [f"The user wants words about topic {i}." for i in range(others)]
        texts += [f"The user's cat is called {MARKER.decode()}.", "The user lives in Taichung."]
        for i, text in enumerate(texts):
            collection.add(
                ids=[f"m{i}"],
                embeddings=rng.standard_normal((1, DIM)).astype(np.float32),
                documents=[text],
                metadatas=[{"user_id": 7 if "user's cat" in text else 8}],
            )
        collection.modify(configuration={"hnsw": {"sync_threshold": 1}})
        client.close()
        client, collection = _open(path, threshold)
        collection.delete(ids=[f"m{others}"])
        vacuum_chroma(path)
        client.close()
        before, garbage = _where(path), _unused_nonzero(path)
        zeroed = scrub_hnsw(path)
        return {"before": before, "garbage": garbage, "zeroed": zeroed, "after": _where(path)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threshold", type=int, default=1000)
    parser.add_argument("--others", type=int, default=5, help="writes before the marker's")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.threshold, args.others)))
        return
    one_min, five_min, _ = os.getloadavg()
    print(f"start: load average {one_min:.1f} (1 min) {five_min:.1f} (5 min)")
    leaked = garbage = after = 0
    n = args.others
    for run in range(1, args.runs + 1):
        out = subprocess.run(
            [sys.executable, __file__, "--one", f"--threshold={args.threshold}", f"--others={n}"],
            capture_output=True,
            text=True,
            check=True,
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        leaked += bool(got["before"])
        garbage += bool(got["garbage"])
        after += bool(got["after"])
        if got["before"] or got["after"]:
            print(f"run {run}: before scrub {got['before']}; after {got['after']}")
    print(
        f"{args.runs} runs at sync_threshold {args.threshold}: unused index slots not zero in"
        f" {garbage}, marker in a file after the erasure in {leaked} (before the scrub),"
        f" in {after} after it"
    )


if __name__ == "__main__":
    main()
