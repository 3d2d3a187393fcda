"""The extraction of one answered turn, after the reply: the memories it finds, the learner
model's part, the lesson's judgement of the turn, the memories the learner asked in words to
forget (asked to confirm, never deleted here); what it found written, what it cost counted and
logged. The engine's after-reply work calls `TurnExtraction.run` once per turn, in the user's
lane (memora.engine.lanes)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal, Protocol

from memora.clock import utcnow
from memora.extraction.apply import apply, apply_terms
from memora.extraction.call import extract, needing_terms
from memora.extraction.prompts import ExtractionInput
from memora.extraction.schema import (
    ExtractionOutcome,
    LearnerExtractionResult,
    ModeAsk,
    Rejection,
)
from memora.extraction.screening import profile_first
from memora.i18n import N_, _, ngettext, speaking
from memora.learner.service import Learner
from memora.llm import LLM, Usage
from memora.longterm import Memory, MemoryStore
from memora.privacy.confirmations import FORGET, ask
from memora.storage import Database, ExtractionLog, ModeRow, TurnUsage
from memora.types import ChatRef, UserRef
from memora.usage import Call
from memora.views import Reply

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


class LearnerSide(Protocol):
    """What the extraction asks about the learner of whoever runs it (memora.engine.people):
    how the provider knows them, their profile, their language, what their calls cost, and a
    word to them after the reply."""

    async def provider_id(self, user: UserRef) -> str: ...
    async def profile_lines(self, user: UserRef, *, teaching_only: bool) -> list[str]: ...
    async def language(self, user: UserRef) -> str: ...
    async def meter(self, user: UserRef, calls: list[Call]) -> None: ...
    def model_call(self, kind: str, usage: Usage) -> Call: ...
    def usage_call(self, kind: str, input_tokens: int) -> Call: ...
    async def tell(self, done: Answered, notice: str | Reply) -> None: ...


class LessonSide(Protocol):
    """What the extraction asks of the lesson the turn was in (memora.engine.lesson_modes):
    what to judge, and acting on the judgement (log lines back)."""

    def mode_ask(self, mode: ModeRow | None) -> ModeAsk | None: ...
    async def settle_mode(
        self, done: Answered, found: LearnerExtractionResult | None
    ) -> list[str]: ...


UNCLEAR = N_(
    "You asked me to forget something, but I couldn't tell which memory you meant, so "
    "nothing was deleted. /memories lists them; /forget <n> deletes one."
)


def forget_question(chosen: list[Memory], chat: ChatRef) -> str:
    """What a learner who asked in words to forget something is asked before anything goes:
    the memories the model chose, by their words (in a group, only those said in that group:
    a memory from a private chat stays private)."""
    n = len(chosen)
    lines = [
        m.text if not chat.is_group or m.chat_id == chat.id else _("(a memory from another chat)")
        for m in chosen
    ]
    return "\n".join(
        [
            ngettext(
                "🗑 You asked me to forget this memory:",
                "🗑 You asked me to forget these {n} memories:",
                n,
            ).format(n=n),
            *(f"• {line}" for line in lines),
            ngettext(
                "Delete it for good? Nothing can bring it back.",
                "Delete them for good? Nothing can bring them back.",
                n,
            ),
        ]
    )


@dataclass(eq=False, kw_only=True)
class TurnExtraction:
    """Extract, apply, ask, log: one turn's extraction from start to end."""

    db: Database
    store: MemoryStore
    learner: Learner
    llm: LLM
    people: LearnerSide
    lessons: LessonSide
    clock: Callable[[], datetime]  # the time now (a question asked carries it)
    # The call's form: "compact" once the model's server refused the full one as longer than
    # its context (learned like the LLM's structured-output form; see memora.extraction.call).
    form: Literal["full", "compact"] = field(default="full", init=False)
    # Per user, term-less memories the call was asked about and did not answer (memory id →
    # times); see prompts.MAX_ASKS. In process only: a restart asks again.
    terms_unanswered: dict[int, dict[str, int]] = field(default_factory=dict, init=False)

    def forget_user(self, user_id: int) -> None:
        """Drop what this process keeps about a user between extractions."""
        self.terms_unanswered.pop(user_id, None)

    async def run(
        self, done: Answered, now: datetime, *, origin: int | None, learner_enabled: bool
    ) -> None:
        """Extract from one answered turn and write what it found, then log it: `now` stands
        for when it was said; `origin` is the chat whose memories the call may see (in a group
        under the default scope, only what the member said there, so no private memory can be
        listed, replaced or quoted there; None: all of theirs); `learner_enabled` adds the
        learner model's part to the call."""
        chat, user, text, turn_id = done.chat, done.user, done.text, done.turn_id
        try:
            existing = await self.store.searcher.similar(user.id, text, k=5, origin_chat=origin)
            # This user's memories without search terms (a /remember fact, an older memory):
            # the same call writes theirs. Only this user's: the call never sees another's.
            mine = await self.store.memories(
                user.id, origin_chat=chat.id if chat.is_group else None
            )
            unanswered = self.terms_unanswered.setdefault(user.id, {})
            needs = needing_terms(mine, unanswered=unanswered)
        except Exception as exc:
            log.exception("memory lookup before extraction failed")
            why = "\n".join([f"store: {exc}", *await self.lessons.settle_mode(done, None)])
            await self._log_extraction(user, chat, "failed", "", why, 0)
            return
        profile = (
            await self.people.profile_lines(user, teaching_only=origin is not None)
            if learner_enabled
            else None
        )
        outcome = await extract(
            self.llm,
            ExtractionInput(
                text, done.reply, existing, now, profile_lines=profile, needs_terms=needs
            ),
            form=self.form,
            mode=self.lessons.mode_ask(done.mode),
            learner=await self.people.provider_id(user),
        )
        self.form = outcome.form
        if await self._forgotten_since(done):  # nothing about them is written any more
            return
        used = outcome.usage
        await self.people.meter(user, [self.people.model_call("extraction", used)])
        tokens = used.total_tokens
        cost = TurnUsage(
            extraction_tokens=tokens,
            extraction_cached=used.cached_tokens,
            extraction_reasoning=used.reasoning_tokens,
        )
        raw = outcome.raw  # extraction has masked every rejected secret in it already
        if outcome.error:
            spent = (turn_id, cost)
            why = "\n".join([outcome.error, *await self.lessons.settle_mode(done, None)])
            await self._log_extraction(user, chat, "failed", raw, why, tokens, spent)
            return
        learned, held = await self._apply_learner(done, outcome, now)
        learned += await self.lessons.settle_mode(done, outcome.learner)
        kept, moved = profile_first(outcome.memories, held)
        outcome = replace(outcome, memories=kept, rejected=[*outcome.rejected, *moved])
        asked = await self._ask_to_forget(done, outcome, existing)
        try:
            results = await apply(
                self.store,
                user.id,
                outcome,
                existing,
                chat_id=chat.id,
                message_id=done.message_id,  # the platform's id of the learner's message
                now=now,
                within=origin,
            )
            filled, filled_tokens = await apply_terms(self.store, user.id, outcome, needs)
        except Exception as exc:  # the embedder or the store failed; the reply already went out
            log.exception("storing extracted memories failed for user %s", user.id)
            spent = (turn_id, cost)
            await self._log_extraction(user, chat, "failed", raw, f"store: {exc}", tokens, spent)
            return
        got = {m.id for m in filled}
        for memory in needs[: outcome.terms_listed]:  # listed in a call that was answered
            if memory.id in got:
                unanswered.pop(memory.id, None)
            else:
                unanswered[memory.id] = unanswered.get(memory.id, 0) + 1
        embed = sum(r.embedding_tokens for r in results) + filled_tokens
        await self.people.meter(user, [self.people.usage_call("embedding", embed)])
        spent = (turn_id, replace(cost, embedding_tokens=embed))
        detail = "\n".join(f"{r.action}: {r.memory.text}" for r in results)
        detail += "".join(
            f"\nsearch terms added: {m.text} ({', '.join([*m.terms, *m.situations])})"
            for m in filled
        )
        detail += "".join(f"\nignored terms for unlisted memory {n}" for n in outcome.unlisted)
        if outcome.rejected:
            detail += "\n" + "\n".join(
                f"rejected ({why}): {'[redacted]' if why is Rejection.SECRET else text}"
                for text, why in outcome.rejected
            )
        if learned:
            detail += "\n" + "\n".join(learned)
        if asked:  # their ids: once a Yes deletes them, the log must not keep their words
            ids = ", ".join(m.id for m in asked)
            detail += f"\nthe learner asked to forget {len(asked)} ({ids}): asked to confirm"
        if outcome.unknown_forget:
            detail += f"\nignored forget ids naming no listed memory: {outcome.unknown_forget}"
        if outcome.asks_to_forget and not asked:
            detail += "\nthe learner asked to forget, but no listed memory was named"
        status = f"ok, memories written: {len(results)}" if results else "ok, nothing worth keeping"
        await self._log_extraction(user, chat, status, raw, detail.strip(), tokens, spent)

    async def _forgotten_since(self, done: Answered) -> bool:
        """Whether the turn's speaker asked to be forgotten after the turn began (in any process
        on this store)."""
        if done.since is None:
            return False
        return (await self.db.erasure.erased_since(done.since, done.user.id, done.chat.id)).speaker

    async def _ask_to_forget(
        self, done: Answered, outcome: ExtractionOutcome, existing: list[Memory]
    ) -> list[Memory]:
        """Ask the learner to confirm the memories they asked in words to forget (Yes/No;
        memora.privacy.confirmations): nothing is deleted here, nor on No, nor when nobody
        answers. The memories asked about."""
        if not outcome.asks_to_forget:
            return []
        if done.mode is not None and not outcome.forget:
            # A lesson's answer ("Two times.") that a small model read as a request to forget,
            # naming no listed memory: a slip, not the learner's wish; nothing to tell them.
            return []
        chosen = [existing[n - 1] for n in outcome.forget]
        with speaking(await self.people.language(done.user)):  # background work: resolve again
            if not chosen:
                await self.people.tell(done, _(UNCLEAR))
                return []
            ids = [m.id for m in chosen]
            buttons = await ask(self.db.asks, done.chat, done.user, FORGET, self.clock(), ids)
            question = Reply(forget_question(chosen, done.chat), buttons=buttons)
        await self.people.tell(done, question)
        return chosen

    async def _apply_learner(
        self, done: Answered, outcome: ExtractionOutcome, now: datetime
    ) -> tuple[list[str], frozenset[str]]:
        """Store the extraction's learner part (profile, mistakes, words); lines for the log and
        the profile fields that now hold what it said."""
        found = outcome.learner
        if found is None:
            return [], frozenset()
        try:
            applied = await self.learner.apply(
                done.user.id,
                message=done.text,
                profile=found.profile,
                mistakes=found.mistakes,
                words=found.vocabulary,
                now=now,
                chat_id=done.chat.id,
                message_id=done.message_id,
            )
        except Exception as exc:
            log.exception("storing the learner part failed for user %s", done.user.id)
            return [f"learner: failed ({exc})"], frozenset()
        return [f"learner {line}" for line in applied.lines()], applied.held

    async def _log_extraction(
        self,
        user: UserRef,
        chat: ChatRef,
        status: str,
        raw: str,
        detail: str,
        tokens: int,
        spent: tuple[int, TurnUsage] | None = None,
    ) -> None:
        """Log the extraction; with `spent` (turn id, tokens) add them to the turn's usage in the
        same commit."""
        await self.db.turns.log_extraction(
            ExtractionLog(user.id, chat.id, utcnow(), status, raw, detail, tokens), spent=spent
        )
