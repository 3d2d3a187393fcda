"""Deleted means gone from the files: what the two embedded stores need after a deletion, where a
DELETE alone leaves the bytes behind (in free pages, logs and unused index slots).

- Memora's database runs with ``PRAGMA secure_delete=ON`` (:data:`SECURE_DELETE`) and is
  checkpointed with ``wal_checkpoint(TRUNCATE)`` (:data:`CHECKPOINT`) after a deletion, so the
  WAL, which still holds the old pages, is emptied (``Connection.checkpoint``).
- Chroma purges its write log only up to what its vector index has persisted: a deletion
  switches the collection to ``sync_threshold = 1`` (:data:`ERASE_HNSW`, then back to
  :data:`CHROMA_HNSW`) and reopens it, so the log is replayed, persisted and purged
  (``memora.longterm.memory_store.MemoryStore``).
- hnswlib writes its whole element array, unused slots included (whatever this process freed
  there), and keeps a deleted element's vector until a later insertion reuses the slot: the
  store zeroes unused slots after each index creation and erasure (:func:`scrub_hnsw`) and the
  vector and norm of every element marked deleted (:func:`erase_deleted_vectors`). Both read
  the layout from hnswlib's header (persistence version 1) and refuse one they do not know.
- Chroma's file is then vacuumed as ``chroma utils vacuum`` does, after merging its full-text
  index, whose segments still list a deleted document's words (:func:`vacuum_chroma`).

``tests/storage/test_erase.py`` searches every file for the deleted words and embedding after
each step.
"""

from __future__ import annotations

import shutil
import sqlite3
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Chroma's HNSW settings for writes (Chroma's default), and during a deletion: the log holds no
# more than the last write (see above).
CHROMA_HNSW = {"sync_threshold": 1000}
ERASE_HNSW = {"sync_threshold": 1}
CHROMA_FILE = "chroma.sqlite3"
_FTS = "embedding_fulltext_search"  # Chroma's FTS5 table over documents
CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"
SECURE_DELETE = "PRAGMA secure_delete=ON"


# hnswlib's persisted index (chroma-core/hnswlib, hnswalg.h, HEADER_FIELDS): header.bin starts
# with PERSISTENCE_VERSION (int), offsetLevel0_, max_elements_, cur_element_count,
# size_data_per_element_, label_offset_, offsetData_ (size_t each, packed); data_level0.bin holds
# size_data_per_element_ bytes per element slot: its level-0 link list (a 4-byte header whose
# third byte carries DELETE_MARK 0x01, then maxM0_ neighbour ids), its vector (from offsetData_
# to label_offset_) and its 8-byte label; length.bin holds one float per slot (the vector's norm
# before normalising).
HNSW_HEADER = "header.bin"
_HNSW_FIELDS = struct.Struct("<iQQQQQQ")
_HNSW_VERSION = 1
_FLOAT = 4
_LABEL = 8  # labeltype, size_t
_LINK_HEADER = 4  # linklistsizeint: a 16-bit neighbour count, a flags byte, one unused byte
_FLAGS_BYTE = 2
_DELETE_MARK = 0x01


def hnsw_indexes(chroma_dir: Path) -> list[Path]:
    """The folders of Chroma's persisted HNSW indexes under chroma_dir (none before the first
    write of a collection)."""
    return sorted(p.parent for p in Path(chroma_dir).glob(f"*/{HNSW_HEADER}"))


def scrub_hnsw(chroma_dir: Path) -> int:
    """Zero the slots past the last element in Chroma's HNSW index files; bytes zeroed (blocking).

    hnswlib allocates its element array with ``malloc`` and, when it creates a persisted index,
    writes the whole array (every slot up to its capacity) to ``data_level0.bin`` and
    ``length.bin``: the slots no element uses yet hold whatever the allocator handed out, freed
    memory of this process included (learners' words read from Chroma's log, SQLite pages).
    Later writes only fill a slot after zeroing it in memory, so zeroing the unused slots once
    after a creation leaves the files with vectors, links and labels only. Chroma creates the
    index at a collection's first write, and again on loading one that never persisted an
    element (writes held in its log: the flush at an erasure). No other call on the client may
    run meanwhile: a write there could fill the slot being zeroed.
    """
    zeroed = 0
    for folder in hnsw_indexes(chroma_dir):
        layout = _hnsw_layout(folder)
        zeroed += _zero_from(folder / "data_level0.bin", layout.count * layout.per_element)
        zeroed += _zero_from(folder / "length.bin", layout.count * _FLOAT)
    return zeroed


def hnsw_elements(chroma_dir: Path) -> int:
    """How many elements Chroma's persisted HNSW indexes hold (0 before any is persisted)."""
    return sum(_hnsw_layout(folder).count for folder in hnsw_indexes(chroma_dir))


def erase_deleted_vectors(chroma_dir: Path) -> int:
    """Zero the vector (and its norm) of every element Chroma's HNSW indexes mark deleted; bytes
    zeroed (blocking). Run it while no client has the index loaded: a loaded index keeps the
    vector in memory, uses it in searches and writes the element's whole slot from there
    whenever it persists that element again; loaded after this, it holds zeros too.

    hnswlib deletes by setting DELETE_MARK in the element's link-list header and keeps the
    slot, vector included, until an insertion reuses it (Chroma's index replaces deleted
    elements); a search still walks through the slot. Refuses a layout it does not know.
    """
    zeroed = 0
    for folder in hnsw_indexes(chroma_dir):
        layout = _hnsw_layout(folder)
        data, lengths = folder / "data_level0.bin", folder / "length.bin"
        if not layout.count or not data.is_file():
            continue
        if data.stat().st_size < layout.count * layout.per_element:
            raise RuntimeError(f"{data}: shorter than its {layout.count} elements")
        slots = np.memmap(data, dtype=np.uint8, mode="r+", shape=(layout.count, layout.per_element))
        try:
            deleted = np.flatnonzero(slots[:, _FLAGS_BYTE] & _DELETE_MARK)
            vectors = slots[deleted, layout.vector_start : layout.vector_end]
            left = deleted[vectors.any(axis=1)]
            if len(left):
                slots[left, layout.vector_start : layout.vector_end] = 0
                slots.flush()
                zeroed += len(left) * (layout.vector_end - layout.vector_start)
        finally:
            del slots
        if len(deleted) and lengths.is_file() and lengths.stat().st_size >= layout.count * _FLOAT:
            norms = np.memmap(lengths, dtype=np.float32, mode="r+", shape=(layout.count,))
            try:
                if norms[deleted].any():
                    zeroed += int(np.count_nonzero(norms[deleted])) * _FLOAT
                    norms[deleted] = 0
                    norms.flush()
            finally:
                del norms
    return zeroed


@dataclass(frozen=True)
class _Layout:
    count: int  # elements (deleted ones included)
    per_element: int  # bytes per slot of data_level0.bin
    vector_start: int  # the vector's bytes within a slot
    vector_end: int


def _hnsw_layout(folder: Path) -> _Layout:
    """An index's slot layout from its header; refuses a layout it does not know rather than
    zero the wrong bytes."""
    head = (folder / HNSW_HEADER).read_bytes()
    if len(head) < _HNSW_FIELDS.size:
        raise RuntimeError(f"{folder}: hnswlib header too short ({len(head)} bytes)")
    version, level0, capacity, count, per_element, label_at, data_at = _HNSW_FIELDS.unpack_from(
        head
    )
    known = (
        version == _HNSW_VERSION
        and level0 == 0
        and count <= capacity
        and data_at >= _LINK_HEADER
        and (data_at - _LINK_HEADER) % _FLOAT == 0
        and label_at > data_at
        and (label_at - data_at) % _FLOAT == 0
        and per_element == label_at + _LABEL
    )
    if not known:
        raise RuntimeError(
            f"{folder}: unknown hnswlib index layout (version {version}, {count} of"
            f" {capacity} slots of {per_element} bytes, vector at {data_at}..{label_at}):"
            " cannot scrub its slots"
        )
    return _Layout(count, per_element, data_at, label_at)


def _zero_from(path: Path, start: int) -> int:
    """Overwrite with zeros the bytes of path from start to its end, if any is not zero."""
    if not path.is_file():
        return 0
    with path.open("r+b") as f:
        f.seek(start)
        tail = f.read()
        if tail.count(0) == len(tail):
            return 0
        f.seek(start)
        f.write(bytes(len(tail)))
    return len(tail)


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


def remove_folder(folder: Path) -> int:
    """Delete a learner's folder of files (charts, exports) with everything in it; how many
    files it held (0 when there is none) (blocking)."""
    if not folder.is_dir():
        return 0
    count = sum(1 for p in folder.rglob("*") if not p.is_dir())
    shutil.rmtree(folder)
    return count
