"""The engine's side of what reaches a reply's context: its retrieval policy (the rule itself is
memora.longterm.retrieval_policy's) and the learner's previous message, ranked after what the
message finds."""

from __future__ import annotations

import logging
from datetime import UTC, date

from memora.engine.base import EngineBase
from memora.engine.followups import FollowUp
from memora.longterm import SearchHit
from memora.longterm import retrieval_policy as memory_policy
from memora.storage import ModeRow, StoredMessage
from memora.types import ChatRef, UserRef

log = logging.getLogger(__name__)


MAX_BUDGETED_MEMORIES = memory_policy.MAX_BUDGETED_MEMORIES


def previous_message(pending: list[StoredMessage], user_id: int) -> str | None:
    """The learner's own previous message in this chat (not the bot's reply, not another group
    member's): the context a follow-up such as "那如果他們要去火車站呢" leans on. The store uses
    it for follow-ups only (MemoryStore.search); the learner set measured it this way."""
    for message in reversed(pending):
        if message.role == "user" and message.user_id == user_id:
            return message.content
    return None


class Retrieval(EngineBase):
    """The memories a turn puts in its context."""

    @property
    def retrieval_policy(self) -> memory_policy.RetrievalPolicy:
        """What reaches a reply's context (memora.longterm.retrieval_policy), from this engine's
        config."""
        c = self.config
        min_score = c.min_score
        if min_score is None:
            min_score = self.store.profile.min_score if self.store is not None else 0.0
        return memory_policy.RetrievalPolicy(c.memory_tokens, c.top_k, min_score, c.use_last_turn)

    def used_in_reply(self, hits: list[SearchHit]) -> list[SearchHit]:
        """Which of `hits` (ranked for a message, best first) a reply puts in its context."""
        return memory_policy.used_in_reply(self.retrieval_policy, hits)

    async def _retrieve(
        self, chat: ChatRef, user: UserRef, text: str, pending: list[StoredMessage]
    ) -> tuple[dict[str, str], int]:
        """The memories for the context, as their lines by memory id, and the embedding tokens."""
        if self.store is None or self.config.top_k == 0:
            return {}, 0
        try:
            return await memory_policy.context_lines(
                self.store,
                self.retrieval_policy,
                user.id,
                text,
                previous_message(pending, user.id),
                origin_chat=self.memory_origin(chat),
                today=await self.learner_today(user),
            )
        except Exception:
            log.exception("memory retrieval failed for user %s; answering without it", user.id)
            return {}, 0

    async def learner_today(self, user: UserRef) -> date:
        """The learner's today (their time zone; UTC until they set one)."""
        now = self.clock()
        try:
            return (await self.learner.profile(user.id, now)).today(now)
        except Exception:
            log.exception("reading the time zone of user %s failed; using UTC", user.id)
            return now.astimezone(UTC).date()

    async def _follow_up(
        self, chat: ChatRef, user: UserRef, mode: ModeRow | None
    ) -> FollowUp | None:
        """What this turn asks about once (memora.engine.followups): only in a private chat,
        outside a lesson."""
        if chat.is_group or mode is not None:
            return None
        try:
            return await self.followups.due(user.id, self.clock())
        except Exception:
            log.exception("finding a follow-up for user %s failed; answering without", user.id)
            return None

    async def _asked(self, user: UserRef, follow_up: FollowUp) -> None:
        try:
            await self.followups.done(user.id, follow_up, self.clock())
        except Exception:  # asked again next turn: better than failing a reply that went out
            log.exception("recording a follow-up for user %s failed", user.id)
