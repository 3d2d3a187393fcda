"""The time limit of background model calls (summaries, extraction), following the endpoint.

A local model on a small CPU server (llama.cpp, Ollama) can take minutes for the extraction
call, far past `[llm] background_timeout` (30 s): every call would time out and nothing would be
learned. So the limit learns from what this endpoint has shown: a call that answered in `d`
seconds lets the next ones run for `factor × d` (the slowest of the last few), and a call that
hit the limit doubles it for the next, never below the configured limit nor above
`background_timeout_max`. A fast hosted model keeps the configured limit.
"""

from __future__ import annotations

from collections import deque

__all__ = ["AdaptiveTimeout"]


class AdaptiveTimeout:
    """The next background call's limit in seconds (`current`), from the calls before it."""

    def __init__(self, floor: float, cap: float, *, factor: float = 3.0, window: int = 10) -> None:
        self.floor = floor
        self.cap = max(cap, floor)
        self.factor = factor
        self._took: deque[float] = deque(maxlen=window)
        self._raised = floor  # after timeouts: the limit they pushed it to
        self.last_timeout: float | None = None  # the limit the last timed-out call had

    @property
    def current(self) -> float:
        shown = self.factor * max(self._took, default=0.0)
        return min(self.cap, max(self.floor, shown, self._raised))

    def took(self, seconds: float) -> None:
        """A call that answered, in this many seconds."""
        self._took.append(seconds)
        self._raised = self.floor  # what it took is the measure now
        self.last_timeout = None

    def timed_out(self, limit: float) -> None:
        """A call that hit `limit`: the next one may take twice as long (up to the cap)."""
        self.last_timeout = limit
        self._raised = min(self.cap, 2 * max(limit, self._raised))
