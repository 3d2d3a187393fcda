"""The learner model (design §7): profile, mistakes, vocabulary, spaced review, progress.

Platform-neutral like the rest of the core; every read and write names its user. Built from the
same after-reply extraction call as long-term memories (a wider structured output), never from a
new LLM call; reviewing needs no LLM call at all. Entry point: :class:`memora.learner.service.
Learner`; its tables are memora/storage/learner_schema.py.
"""
