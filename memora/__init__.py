"""Memora: an English tutor that remembers its learners (the platform-neutral core).

What an embedder needs, in full::

    from memora import ChatRef, UserRef, load_settings, open_engine

    async with open_engine(load_settings()) as engine:
        reply = await engine.handle_turn(ChatRef(1), UserRef(1, "Ana"), "Hi! 'in' or 'on' Monday?")
        print(reply.text)

Everything the core raises on purpose is a `MemoraError`. The rest of the package is the
implementation; its modules may move.
"""

from memora.app import open_engine
from memora.config import Settings, load_settings
from memora.engine import Engine
from memora.errors import MemoraError
from memora.types import ChatRef, UserRef
from memora.views import Reply

__version__ = "0.1.0"

__all__ = [
    "ChatRef",
    "Engine",
    "MemoraError",
    "Reply",
    "Settings",
    "UserRef",
    "__version__",
    "load_settings",
    "open_engine",
]
