"""The turn engine: one entry point for every adapter (`Engine`, engine.py), a facade over named
parts, each one job: turn.py (a turn), retrieval.py (what reaches the context), after_reply.py
(fold, then memora.extraction.run), lanes.py (locks and the order of work), lesson_modes.py,
people.py (language, limits, profile), queries.py (what commands read and change), export.py,
voice.py; state.py and options.py (what they share, how the engine is configured)."""

from memora.engine.engine import Engine
from memora.engine.options import EngineConfig
from memora.engine.retrieval import MAX_BUDGETED_MEMORIES, previous_message
from memora.engine.state import Notify
from memora.engine.turn import EMPTY, FORWARDED, LLM_FAILED
from memora.types import ChatRef, UserRef

__all__ = [
    "EMPTY",
    "FORWARDED",
    "LLM_FAILED",
    "MAX_BUDGETED_MEMORIES",
    "ChatRef",
    "Engine",
    "EngineConfig",
    "Notify",
    "UserRef",
    "previous_message",
]
