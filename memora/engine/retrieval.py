"""The engine's side of what reaches a reply's context: its retrieval policy (the rule itself is
memora.longterm.retrieval_policy's) and the learner's previous message, ranked after what the
message finds."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from memora.engine.followups import FollowUp, FollowUps
from memora.engine.people import People
from memora.engine.state import EngineState
from memora.longterm import MemoryStore, SearchHit
from memora.longterm import retrieval_policy as memory_policy
from memora.storage import ModeRow, StoredMessage
from memora.types import ChatRef, UserRef

log = logging.getLogger(__name__)


MAX_BUDGETED_MEMORIES = memory_policy.MAX_BUDGETED_MEMORIES


def previous_message(pending: list[StoredMessage], user_id: int) -> str | None:
    """The learner's own previous message in this chat (not the bot's reply, not another group
    member's): the context a follow-up such as "那如果他們要去火車站呢" leans on. The store uses
    it for follow-ups only (MemorySearch.search); the learner set measured it this way."""
    for message in reversed(pending):
        if message.role == "user" and message.user_id == user_id:
            return message.content
    return None


@dataclass(eq=False)
class Retrieval:
    """The memories a turn puts in its context, and the follow-up it asks once."""

    store: MemoryStore | None
    followups: FollowUps
    people: People
    state: EngineState

    @property
    def policy(self) -> memory_policy.RetrievalPolicy:
        """What reaches a reply's context (memora.longterm.retrieval_policy), from this engine's
        config."""
        c = self.state.config
        min_score = c.min_score
        if min_score is None:
            min_score = self.store.profile.min_score if self.store is not None else 0.0
        return memory_policy.RetrievalPolicy(c.memory_tokens, c.top_k, min_score, c.use_last_turn)

    def used_in_reply(self, hits: list[SearchHit]) -> list[SearchHit]:
        """Which of `hits` (ranked for a message, best first) a reply puts in its context."""
        return memory_policy.used_in_reply(self.policy, hits)

    async def retrieve(
        self, chat: ChatRef, user: UserRef, text: str, pending: list[StoredMessage]
    ) -> tuple[dict[str, str], int]:
        """The memories for the context, as their lines by memory id, and the embedding tokens."""
        if self.store is None or self.state.config.top_k == 0:
            return {}, 0
        try:
            query = memory_policy.ReplyQuery(
                user.id,
                text,
                previous_message(pending, user.id),
                origin_chat=self.state.memory_origin(chat),
                today=await self.people.today(user),
            )
            return await memory_policy.context_lines(self.store, self.policy, query)
        except Exception:
            log.exception("memory retrieval failed for user %s; answering without it", user.id)
            return {}, 0

    async def follow_up(
        self, chat: ChatRef, user: UserRef, mode: ModeRow | None
    ) -> FollowUp | None:
        """What this turn asks about once (memora.engine.followups): only in a private chat,
        outside a lesson."""
        if chat.is_group or mode is not None:
            return None
        try:
            return await self.followups.due(user.id, self.state.clock())
        except Exception:
            log.exception("finding a follow-up for user %s failed; answering without", user.id)
            return None

    async def asked(self, user: UserRef, follow_up: FollowUp) -> None:
        try:
            await self.followups.done(user.id, follow_up, self.state.clock())
        except Exception:  # asked again next turn: better than failing a reply that went out
            log.exception("recording a follow-up for user %s failed", user.id)
