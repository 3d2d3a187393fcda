"""Memora: an English tutor that remembers its learners (platform-neutral core)."""

__version__ = "0.1.0"
