"""Long-term memory: what the bot remembers about each user across conversations.

- :mod:`~memora.longterm.store`: :class:`MemoryStore`, every call scoped to one user, composed of
  :mod:`~memora.longterm.backend` (Chroma, erasure), :mod:`~memora.longterm.users` (the
  per-user cache), :mod:`~memora.longterm.writes` (duplicates and updates) and
  :mod:`~memora.longterm.search` (ranked reads);
- :mod:`~memora.longterm.policy`: what reaches the reply's context (the engine calls it);
- :mod:`~memora.longterm.profile`: each embedder's calibrated numbers (``profiles/*.toml``);
- :mod:`~memora.longterm.ranking`: the hybrid (dense + BM25) score;
- :mod:`~memora.longterm.lexical`: the mixed Chinese/English tokenizer and BM25;
- :mod:`~memora.longterm.dedupe`: duplicate / update / distinct between two memories;
- :mod:`~memora.longterm.records`, :mod:`~memora.longterm.cache`, :mod:`~memora.longterm.matrix`:
  a memory and its Chroma record, a user's snapshot, the vectors;
- :mod:`~memora.longterm.embeddings`: the local multilingual model or an embeddings API.
"""

from memora.longterm.records import (
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
from memora.longterm.store import MemoryStore

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
