"""Long-term memory: what the bot remembers about each user across conversations. It stores and
ranks; what to remember is decided above it (:mod:`memora.extraction`).

- the front: :mod:`~memora.longterm.memory_store` (:class:`MemoryStore`, every call scoped to
  one user, composed of the parts below) and :mod:`~memora.longterm.memories` (what a memory
  is, and its Chroma record);
- the index and its cache: :mod:`~memora.longterm.chroma` (the Chroma collection, erasure),
  :mod:`~memora.longterm.chroma_server` (version tokens on a server shared by replicas),
  :mod:`~memora.longterm.embeddings` (the local model or an embeddings API),
  :mod:`~memora.longterm.snapshot` (one user's memories, vectors and derived indexes, immutable),
  :mod:`~memora.longterm.matrix` (the vectors in shared chunks) and
  :mod:`~memora.longterm.user_cache` (which users' snapshots are held, loaded, kept current);
- ranking: :mod:`~memora.longterm.search` (the ranked reads),
  :mod:`~memora.longterm.ranking` (the hybrid dense + BM25 score),
  :mod:`~memora.longterm.lexical` (the mixed Chinese/English tokenizer and BM25),
  :mod:`~memora.longterm.calibration` (each embedder's tuned numbers, ``profiles/*.toml``),
  :mod:`~memora.longterm.timeline` (facts that are over, pins) and
  :mod:`~memora.longterm.retrieval_policy` (what reaches the reply's context; the engine calls it);
- the write policy: :mod:`~memora.longterm.writes` (duplicates, updates, the per-user write
  lock) and :mod:`~memora.longterm.dedupe` (duplicate / update / distinct between two memories).
"""

from memora.longterm.memories import (
    MAX_MEMORY_CHARS,
    AddResult,
    Memory,
    MemoryNotFound,
    NewMemory,
    Revision,
    SearchHit,
    SearchResult,
    SearchWords,
    StoreError,
)
from memora.longterm.memory_store import MemoryStore

__all__ = [
    "MAX_MEMORY_CHARS",
    "AddResult",
    "Memory",
    "MemoryNotFound",
    "MemoryStore",
    "NewMemory",
    "Revision",
    "SearchHit",
    "SearchResult",
    "SearchWords",
    "StoreError",
]
