"""Long-term memory: what the bot remembers about each user across conversations.

- :mod:`~memora.longterm.store`: :class:`MemoryStore`, one Chroma collection, every call
  scoped to one user;
- :mod:`~memora.longterm.records`: a memory, its history, and its Chroma record;
- :mod:`~memora.longterm.cache`: each user's memories and vectors held in process, and the
  per-user write locks;
- :mod:`~memora.longterm.ranking`: the hybrid (dense + BM25) score and the no-result rule;
- :mod:`~memora.longterm.lexical`: the mixed Chinese/English tokenizer and BM25;
- :mod:`~memora.longterm.dedupe`: duplicate / update / distinct between two memories;
- :mod:`~memora.longterm.embeddings`: the local multilingual model or an embeddings API;
- :mod:`~memora.longterm.extraction`: the after-reply call that decides what to remember.
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
