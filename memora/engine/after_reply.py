"""The work after a reply: the turn's usage counted, folding the window into the summary (the
chat's next turn waits for it), and the extraction from the exchange (memora.extraction.run,
which no reply waits for)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from memora.clock import utcnow
from memora.engine.people import People
from memora.engine.state import EngineState
from memora.errors import LLMError
from memora.extraction import Answered, TurnExtraction
from memora.learner.service import Learner
from memora.llm import LLM
from memora.shortterm.folding import summarize
from memora.shortterm.window import Window
from memora.storage import Database, TurnUsage
from memora.types import ChatRef, UserRef
from memora.usage import Call

log = logging.getLogger(__name__)


@dataclass(eq=False, kw_only=True)
class AfterReply:
    """The turn counted, the window folded, the extraction started."""

    db: Database
    learner: Learner
    summary_llm: LLM
    extraction: TurnExtraction | None  # None: no long-term store, nothing is extracted
    people: People
    state: EngineState

    def forget_user(self, user_id: int) -> None:
        """Drop what this process keeps about a user between extractions."""
        if self.extraction is not None:
            self.extraction.forget_user(user_id)

    async def run(self, done: Answered, calls: list[Call]) -> None:
        """The chat's ordered work after a reply (the next turn waits for it): the turn's
        usage counted, a study day noted, the window folded."""
        await self.people.meter(done.user, calls, turns=1)
        if self.state.config.learner_enabled:  # a study day for /progress and the streak
            await self.learner.note_message(done.user.id, self.state.clock())
        await self._fold_backlog(done.chat, done.user, done.turn_id)

    async def _fold_backlog(self, chat: ChatRef, user: UserRef, turn_id: int) -> None:
        # A member forgotten meanwhile: no summary written.
        since = await self.db.erasure.erasure_mark()
        row = await self.db.chats.chat(chat.id)
        pending = await self.db.chats.messages(chat.id, from_seq=row.summarized_count)
        backlog = Window(row.summary, row.summarized_count, pending).backlog(
            self.state.config.max_recent_turns
        )
        if not backlog:
            return
        try:
            learner = await self.people.provider_id(user)
            fold = await summarize(
                self.summary_llm, row.summary, backlog, backlog[-1].seq + 1, learner
            )
        except LLMError as exc:
            log.warning("summary update failed for chat %s: %s", chat.id, exc)
            await self.db.chats.note_summary_error(chat.id, f"{utcnow()}: {exc}")
            return
        await self.db.chats.save_summary(
            chat.id,
            fold.summary,
            fold.summarized_count,
            expected_from=row.summarized_count,
            since=since,
        )
        spent = TurnUsage(
            summary_tokens=fold.tokens,
            summary_cached=fold.usage.cached_tokens,
            summary_reasoning=fold.usage.reasoning_tokens,
        )
        await self.db.turns.add_turn_usage(turn_id, spent)
        await self.people.meter(user, [self.people.model_call("summary", fold.usage)])

    async def extract(self, done: Answered, now: datetime | None = None) -> None:
        """Extract from the turn (memora.extraction.run); `now` stands for when it was said."""
        assert self.extraction is not None, "extraction runs only with a long-term store"
        await self.extraction.run(
            done,
            now or self.state.clock(),
            origin=self.state.memory_origin(done.chat),
            learner_enabled=self.state.config.learner_enabled,
        )
