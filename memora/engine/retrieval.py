"""The engine's side of what reaches a reply's context: its retrieval policy (the rule itself is
memora.longterm.policy's) and the learner's previous message, ranked after what the message
finds."""

from __future__ import annotations

import logging

from memora.engine.base import EngineBase
from memora.longterm import SearchHit
from memora.longterm import policy as memory_policy
from memora.storage import StoredMessage
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
        """What reaches a reply's context (memora.longterm.policy), from this engine's config."""
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
            found = await memory_policy.retrieve(
                self.store,
                self.retrieval_policy,
                user.id,
                text,
                previous_message(pending, user.id),
                origin_chat=self.memory_origin(chat),
            )
        except Exception:
            log.exception("memory retrieval failed for user %s; answering without it", user.id)
            return {}, 0
        return {h.memory.id: f"- {h.memory.text}" for h in found.hits}, found.embedding_tokens
