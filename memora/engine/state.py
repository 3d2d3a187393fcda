"""What the parts of the engine share as plain data: the settings every part reads as it runs
(which an adapter, or a test, may change on the running engine), and how the adapter hears what
the engine tells a learner after a reply."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from memora.engine.options import EngineConfig
from memora.types import ChatRef, UserRef
from memora.usage import Metering
from memora.views import Reply

Notify = Callable[[ChatRef, UserRef, Reply], Awaitable[None]]


@dataclass
class EngineState:
    """Read by every part when it runs, never copied: `engine.state.config = …` reaches them all."""

    config: EngineConfig
    clock: Callable[[], datetime]
    metering: Metering | None = None  # usage per learner, its limits (None: not counted)
    # How the adapter tells a learner something after the reply (what they asked to be
    # forgotten, a lesson's notice); None: nobody listens (benchmarks, imports)
    notify: Notify | None = None

    def now(self) -> datetime:
        """The time by the engine's clock as it is set now."""
        return self.clock()

    def memory_origin(self, chat: ChatRef) -> int | None:
        """Which chat's memories a turn or command in this chat may use: in a group, by default
        only what the member said in that group (their private facts stay private); None means
        all of the user's memories ([retrieval] group_memories = "all", and private chats)."""
        if chat.is_group and self.config.group_memories == "group":
            return chat.id
        return None
