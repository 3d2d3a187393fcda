"""The people the engine talks to: the language it speaks to each learner, their usage limits and
what their calls cost, their profile for a context, their today, how the model provider knows
them, and what they are told after a reply."""

from __future__ import annotations

import logging
from datetime import UTC, date

from memora.engine.state import EngineState
from memora.extraction import Answered
from memora.i18n import speaking
from memora.learner.service import LANGUAGE_FIELD, Learner
from memora.llm import ProviderIdentity, Usage
from memora.storage import Database
from memora.storage.keys import PROVIDER_IDENTIFIER
from memora.types import UserRef
from memora.usage import Call
from memora.views import Reply

log = logging.getLogger(__name__)


class People:
    """Per learner: language, limits and metering, profile lines, today, provider id, notices."""

    def __init__(self, db: Database, learner: Learner, state: EngineState) -> None:
        self.db = db
        self.learner = learner
        self.state = state
        self.identity: ProviderIdentity | None = None  # its key is read once, when first needed

    async def provider_id(self, user: UserRef) -> str:
        """The learner as the model provider is told: their keyed hash (memora.llm.identity),
        never their id."""
        if self.identity is None:
            self.identity = ProviderIdentity(await self.db.keys.server_key(PROVIDER_IDENTIFIER))
        return self.identity.of(user.id)

    def usage_call(
        self, kind: str, input_tokens: int = 0, output_tokens: int = 0, audio_seconds: float = 0.0
    ) -> Call:
        """One call of this kind as the ledger counts it (on the model configured for it)."""
        metering = self.state.metering
        if metering is None:
            return Call(kind, "", input_tokens, output_tokens, audio_seconds)
        return metering.call(kind, input_tokens, output_tokens, audio_seconds)

    def model_call(self, kind: str, usage: Usage) -> Call:
        """One model call of this kind as the ledger counts it, as its provider reported it."""
        if self.state.metering is None:
            return Call(kind, "", usage.input_tokens, usage.output_tokens)
        return self.state.metering.model_call(kind, usage)

    async def meter(self, user: UserRef, calls: list[Call], *, turns: int = 0) -> None:
        """Count what these calls of the learner's turn cost (see memora.usage)."""
        if self.state.metering is not None:
            await self.state.metering.add(user.id, self.state.clock(), calls, turns=turns)

    async def over_limit(self, user: UserRef) -> str | None:
        """Why the learner may not be answered now (a usage limit), in their language; None if
        they may."""
        metering = self.state.metering
        if metering is None:
            return None
        now = self.state.clock()
        if await metering.refusal(user.id, now) is None:
            return None
        with speaking(await self.language(user)):  # only a refusal pays for the lookup
            return await metering.refusal(user.id, now)

    async def language(self, user: UserRef) -> str:
        """The language the bot speaks to this learner (see memora.i18n.resolve)."""
        return await self.learner.language(user.id, self.state.clock(), user.language)

    async def set_language(self, user_id: int, lang: str | None) -> bool:
        """Save the learner's /language choice (None: follow the profile and the platform)."""
        return await self.learner.profiles.set_field(
            user_id, LANGUAGE_FIELD, lang, source="you", now=self.state.clock()
        )

    async def profile_lines(self, user: UserRef, *, teaching_only: bool = False) -> list[str]:
        """The speaker's learner profile for a context (two indexed queries, no LLM);
        `teaching_only`: level and explanation language alone (see learner.TEACHING_FIELDS)."""
        if not self.state.config.learner_enabled:
            return []
        try:
            return await self.learner.context_lines(
                user.id, self.state.clock(), teaching_only=teaching_only
            )
        except Exception:
            log.exception("reading the profile of user %s failed; answering without it", user.id)
            return []

    async def today(self, user: UserRef) -> date:
        """The learner's today (their time zone; UTC until they set one)."""
        now = self.state.clock()
        try:
            return (await self.learner.profile(user.id, now)).today(now)
        except Exception:
            log.exception("reading the time zone of user %s failed; using UTC", user.id)
            return now.astimezone(UTC).date()

    async def tell(self, done: Answered, notice: str | Reply) -> None:
        """Tell the learner something after the reply, through the adapter (if it listens)."""
        notify = self.state.notify
        if notify is None:
            return
        try:
            await notify(done.chat, done.user, Reply(notice) if isinstance(notice, str) else notice)
        except Exception:
            log.exception("the notice to chat %s could not be delivered", done.chat.id)
