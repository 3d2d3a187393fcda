"""The learner model (design §7): profile, mistakes, vocabulary, spaced review, progress.

Platform-neutral like the rest of the core; every read and write names its user. Built from the
same after-reply extraction call as long-term memories (a wider structured output), never from a
new LLM call; reviewing needs no LLM call at all. Entry point: :class:`memora.learner.service.
Learner`, which holds the stored parts (profiles, entries, cards); this package keeps the
model's rules and writes no SQL: its tables are memora/storage/learner_schema.py, read and
written by memora/storage/learner_*.py.
"""
