"""Memora's exceptions: one tree under `MemoraError`, so an embedder can catch everything the
core raises on purpose with one `except`. Each is also importable where it is raised."""

from __future__ import annotations

__all__ = [
    "AlreadyGraded",
    "CardGone",
    "ConfigError",
    "LLMError",
    "MemoraError",
    "NotYourCard",
    "OverBudget",
    "ProfileError",
    "ReminderError",
    "StartupError",
]


class MemoraError(Exception):
    """The root of every error the core raises on purpose."""


class ConfigError(MemoraError):
    """A configuration problem, phrased as one line that names the key."""


class StartupError(MemoraError):
    """A store cannot be used; the message is one line that names it and says why."""


class LLMError(MemoraError):
    """The model could not answer (outage, timeout, refusal, bad response).

    `code` is the error code the server named, if any (e.g. "context_length_exceeded": the
    caller may ask again in fewer tokens)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class OverBudget(MemoraError):
    """The current message (with memories and summary) cannot fit the input budget."""

    def __init__(self, counted: int, budget: int) -> None:
        super().__init__(f"{counted} tokens counted, budget {budget}")
        self.counted = counted
        self.budget = budget


class ProfileError(MemoraError, ValueError):
    """A value the learner (or the model) gave does not fit the field; the message says why."""


class ReminderError(MemoraError, ValueError):
    """A /remind or /timezone argument that does not parse; the message says how to write it."""


class CardGone(MemoraError, LookupError):
    """No such review card (deleted, or forgotten with /forgetme)."""


class NotYourCard(MemoraError, PermissionError):
    """The review card belongs to another user."""


class AlreadyGraded(MemoraError, RuntimeError):
    """The review card was graded since it was shown (a second tap, an old message)."""


class StoreError(MemoraError):
    """The long-term store cannot be used as asked (not open, wrong embedder for the stored
    vectors)."""


class MemoryNotFound(MemoraError, KeyError):
    """No memory with that id belongs to that user."""
