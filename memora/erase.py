"""Deleted means gone from the files: what the two embedded stores need after a deletion.

Why this module exists: a DELETE in SQLite only unlinks the row. Its bytes stay in the page's free
space, in free pages and in the write-ahead log until something happens to overwrite them, and
Chroma keeps every write (document, metadata, user id) in its own log, `embeddings_queue` inside
`chroma/chroma.sqlite3`, until the vector index that applied it is persisted. Neither library
offers "erase" as one call, so the steps are spelled out here, each one a documented feature:

- Memora's database runs with ``PRAGMA secure_delete=ON`` (deleted content is overwritten with
  zeros) and is checkpointed with ``wal_checkpoint(TRUNCATE)`` after a deletion, so the WAL,
  which still holds the old pages, is emptied (``Database.checkpoint``).
- Chroma purges its log only up to what its vector index has persisted, and the index persists
  every ``sync_threshold`` writes. Writes run with ``sync_threshold = 1`` (:data:`CHROMA_HNSW`),
  so the log never holds more than the last write. A persist rewrites the index's id map, whose
  size grows with every memory of every user, so this costs each write more (one upsert at
  10,000 memories: 21.3 ms CPU against 8.8 at Chroma's default, `benchmarks/erase_cost.py`).
  Measured and not adopted: writes at Chroma's default threshold (1000), a deletion switching
  the collection to 1 and reopening it to flush the log (``MemoryStore._erasing`` still does
  that whenever the two settings differ, and a store left at another threshold is switched on
  open): in about one run in six of ``tests/test_erase.py`` a deleted memory's word was still
  in the index file (``data_level0.bin``) after the deletion, cause not found; a cheaper write
  does not buy a deletion that sometimes leaves bytes behind.
- After a delete, Chroma's file is vacuumed the way ``chroma utils vacuum`` does (Chroma's docs:
  vacuuming "blocks all reads and writes while it's running", shutting down first is "not
  strictly required"), after merging its full-text index (the FTS5 ``optimize`` command), whose
  trigram segments still list a deleted document's words until they are merged
  (:func:`vacuum_chroma`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

# Chroma's HNSW settings for writes, and during a deletion: the log holds no more than the last
# write (see above).
CHROMA_HNSW = {"sync_threshold": 1}
ERASE_HNSW = {"sync_threshold": 1}
CHROMA_FILE = "chroma.sqlite3"
_FTS = "embedding_fulltext_search"  # Chroma's FTS5 table over documents
CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"
SECURE_DELETE = "PRAGMA secure_delete=ON"


def vacuum_chroma(chroma_dir: Path, *, timeout: float = 30.0) -> None:
    """Rewrite Chroma's SQLite file so no deleted document survives in it (blocking)."""
    path = Path(chroma_dir) / CHROMA_FILE
    if not path.is_file():
        return
    con = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        con.execute(SECURE_DELETE)
        has_fts = con.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (_FTS,)
        ).fetchone()
        if has_fts:
            con.execute(f"INSERT INTO {_FTS}({_FTS}) VALUES ('optimize')")
        con.execute("VACUUM")
    finally:
        con.close()
