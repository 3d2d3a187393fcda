"""What every part of the engine shares: its collaborators (database, model clients, stores, the
learner model, reminders), its configuration, and the per-chat and per-user state the turn and
the after-reply work keep."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memora.clock import now
from memora.engine.config import EngineConfig
from memora.engine.followups import FollowUps
from memora.i18n import speaking
from memora.learner.service import LANGUAGE_FIELD, Learner
from memora.llm import LLM, ProviderIdentity, Usage
from memora.llm.audio import Speaker, Transcriber
from memora.longterm import MemoryStore
from memora.reminders import Reminders
from memora.shortterm.tokens import TokenCounter
from memora.storage import Database, ModeRow, SharedChatLock
from memora.storage.asked import AskedOnce
from memora.storage.keys import PROVIDER_IDENTIFIER
from memora.types import ChatRef, UserRef
from memora.usage import Call, Metering
from memora.views import Reply
from memora.weekly import WeeklyReports

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answered:
    """A turn that was answered and stored: what the after-reply work needs."""

    chat: ChatRef
    user: UserRef
    text: str
    reply: str
    turn_id: int
    message_id: int | None  # the platform's id of the learner's message
    mode: ModeRow | None = None  # the chat's lesson mode as the turn left it
    since: int | None = None  # the erasure mark the turn began at (memora.storage.erasure)


Notify = Callable[[ChatRef, UserRef, Reply], Awaitable[None]]


class EngineBase:
    """The engine's state; the other classes of this package add its behaviour."""

    def __init__(
        self,
        *,
        db: Database,
        llm: LLM,
        counter: TokenCounter,
        store: MemoryStore | None = None,
        config: EngineConfig | None = None,
        summary_llm: LLM | None = None,
        extraction_llm: LLM | None = None,
        clock: Callable[[], datetime] = now,
        transcriber: Transcriber | None = None,
        speaker: Speaker | None = None,
        metering: Metering | None = None,
    ) -> None:
        self.db = db
        self.llm = llm
        self.summary_llm = summary_llm or llm
        self.extraction_llm = extraction_llm or llm
        self.counter = counter
        self.store = store
        self.learner = Learner(db)
        self.config = config or EngineConfig()
        self.clock = clock
        self.transcriber = transcriber  # voice messages (None: turned off)
        self.speaker = speaker  # spoken answers (None: turned off, the default)
        self.metering = metering  # usage per learner, its limits (None: not counted)
        # How the adapter tells a learner something after the reply (what they asked to be
        # forgotten); None: nobody listens (benchmarks, imports)
        self.notify: Notify | None = None
        self.reminders = Reminders(db, learner=self.learner, clock=clock)
        self.followups = FollowUps(self.learner, store, AskedOnce(db.connection))
        self.weekly = WeeklyReports(db, self.reminders, by_default=self.config.weekly_by_default)
        # Weak values: a chat's lock lives while some turn holds or awaits it, then goes away.
        self._locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
        # After-reply work in two lanes. Folding the window is per chat, and the chat's next
        # turn waits for it (it must see the window the fold left). Extraction is per user, one
        # after another (each sees the memories the last one stored), and no reply waits for it.
        self._after: dict[int, asyncio.Task[None]] = {}
        self._extracting: dict[int, asyncio.Task[None]] = {}
        # The shared store's hold on a chat, from the start of a turn to the end of its
        # after-reply work (nothing to hold on SQLite, which one process owns).
        self._held: dict[int, SharedChatLock] = {}
        # The extraction call's form: "compact" once the model's server refused the full one as
        # longer than its context (learned like the LLM's structured-output form; see extract).
        self.extraction_form: Literal["full", "compact"] = "full"
        # Per user, term-less memories the extraction call was asked about and did not answer
        # (memory id → times); see extraction.MAX_ASKS. In process only: a restart asks again.
        self._terms_unanswered: dict[int, dict[str, int]] = {}
        self._identity: ProviderIdentity | None = None  # its key is read once, when first needed

    async def _provider_id(self, user: UserRef) -> str:
        """The learner as the model provider is told: their keyed hash (memora.llm.identity),
        never their id."""
        if self._identity is None:
            self._identity = ProviderIdentity(await self.db.keys.server_key(PROVIDER_IDENTIFIER))
        return self._identity.of(user.id)

    @property
    def has_memory(self) -> bool:
        """Whether this bot keeps long-term memories (a store is configured)."""
        return self.store is not None

    def _memory(self) -> MemoryStore:
        if self.store is None:
            raise RuntimeError("long-term memory is off on this engine")
        return self.store

    def memory_origin(self, chat: ChatRef) -> int | None:
        """Which chat's memories a turn or command in this chat may use: in a group, by default
        only what the member said in that group (their private facts stay private); None means
        all of the user's memories ([retrieval] group_memories = "all", and private chats)."""
        if chat.is_group and self.config.group_memories == "group":
            return chat.id
        return None

    def _usage_call(
        self, kind: str, input_tokens: int = 0, output_tokens: int = 0, audio_seconds: float = 0.0
    ) -> Call:
        """One call of this kind as the ledger counts it (on the model configured for it)."""
        if self.metering is None:
            return Call(kind, "", input_tokens, output_tokens, audio_seconds)
        return self.metering.call(kind, input_tokens, output_tokens, audio_seconds)

    def _model_call(self, kind: str, usage: Usage) -> Call:
        """One model call of this kind as the ledger counts it, as its provider reported it."""
        if self.metering is None:
            return Call(kind, "", usage.input_tokens, usage.output_tokens)
        return self.metering.model_call(kind, usage)

    async def _meter(self, user: UserRef, calls: list[Call], *, turns: int = 0) -> None:
        """Count what these calls of the learner's turn cost (see memora.usage)."""
        if self.metering is not None:
            await self.metering.add(user.id, self.clock(), calls, turns=turns)

    async def over_limit(self, user: UserRef) -> str | None:
        """Why the learner may not be answered now (a usage limit), in their language; None if
        they may."""
        if self.metering is None:
            return None
        now = self.clock()
        if await self.metering.refusal(user.id, now) is None:
            return None
        with speaking(await self.language(user)):  # only a refusal pays for the lookup
            return await self.metering.refusal(user.id, now)

    async def language(self, user: UserRef) -> str:
        """The language the bot speaks to this learner (see memora.i18n.resolve)."""
        return await self.learner.language(user.id, self.clock(), user.language)

    async def set_language(self, user_id: int, lang: str | None) -> bool:
        """Save the learner's /language choice (None: follow the profile and the platform)."""
        return await self.learner.store.set_field(
            user_id, LANGUAGE_FIELD, lang, source="you", now=self.clock()
        )

    async def _profile_lines(self, user: UserRef, *, teaching_only: bool = False) -> list[str]:
        """The speaker's learner profile for a context (two indexed queries, no LLM);
        `teaching_only`: level and explanation language alone (see learner.TEACHING_FIELDS)."""
        if not self.config.learner_enabled:
            return []
        try:
            return await self.learner.context_lines(
                user.id, self.clock(), teaching_only=teaching_only
            )
        except Exception:
            log.exception("reading the profile of user %s failed; answering without it", user.id)
            return []
