"""The turn engine: one entry point for every adapter (`Engine`), a lock per chat, work after the
reply. Its parts, each one job: base.py (state), lanes.py (order of work), turn.py (a turn),
retrieval.py (what reaches the context), after_reply.py (fold, extract), queries.py (what
commands read and change), export.py, voice.py."""

from memora.engine.base import Answered, Notify
from memora.engine.config import EngineConfig
from memora.engine.engine import Engine
from memora.engine.retrieval import MAX_BUDGETED_MEMORIES, previous_message
from memora.engine.turn import EMPTY, FORWARDED, LLM_FAILED
from memora.types import ChatRef, UserRef

__all__ = [
    "EMPTY",
    "FORWARDED",
    "LLM_FAILED",
    "MAX_BUDGETED_MEMORIES",
    "Answered",
    "ChatRef",
    "Engine",
    "EngineConfig",
    "Notify",
    "UserRef",
    "previous_message",
]
