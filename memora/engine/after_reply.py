"""The work after a reply: folding the window into the summary, and extracting memories and the
learner model from the exchange (asking the learner to confirm what they asked in words to
forget)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

import memora.extraction as extraction
from memora.clock import utcnow
from memora.engine.lesson_modes import LessonModes
from memora.engine.people import People
from memora.engine.state import Answered, EngineState
from memora.errors import LLMError
from memora.extraction import ExtractionOutcome
from memora.i18n import N_, _, ngettext, speaking
from memora.learner.service import Learner
from memora.llm import LLM
from memora.longterm import Memory, MemoryStore
from memora.privacy.confirmations import FORGET, ask
from memora.shortterm.folding import summarize
from memora.shortterm.window import Window
from memora.storage import Database, ExtractionLog, TurnUsage
from memora.types import ChatRef, UserRef
from memora.usage import Call
from memora.views import Reply

log = logging.getLogger(__name__)


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
class AfterReply:
    """Fold, extract, apply, log."""

    db: Database
    store: MemoryStore | None
    learner: Learner
    summary_llm: LLM
    extraction_llm: LLM
    people: People
    lessons: LessonModes
    state: EngineState
    # The extraction call's form: "compact" once the model's server refused the full one as
    # longer than its context (learned like the LLM's structured-output form; see extract).
    extraction_form: Literal["full", "compact"] = field(default="full", init=False)
    # Per user, term-less memories the extraction call was asked about and did not answer
    # (memory id → times); see extraction.MAX_ASKS. In process only: a restart asks again.
    terms_unanswered: dict[int, dict[str, int]] = field(default_factory=dict, init=False)

    def forget_user(self, user_id: int) -> None:
        """Drop what this process keeps about a user between extractions."""
        self.terms_unanswered.pop(user_id, None)

    async def run(self, done: Answered, calls: list[Call]) -> None:
        """The chat's ordered work after a reply (the next turn waits for it): the turn's
        usage counted, a study day noted, the window folded."""
        await self.people.meter(done.user, calls, turns=1)
        if self.state.config.learner_enabled:  # a study day for /progress and the streak
            await self.learner.note_message(done.user.id, self.state.clock())
        await self._fold_backlog(done.chat, done.user, done.turn_id)

    async def _fold_backlog(self, chat: ChatRef, user: UserRef, turn_id: int) -> None:
        since = (
            await self.db.erasure.erasure_mark()
        )  # a member forgotten meanwhile: no summary written
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
        chat, user, text, turn_id = done.chat, done.user, done.text, done.turn_id
        assert self.store is not None
        now = now or self.state.clock()
        try:
            # In a group (under the default scope) the call sees only what the member said in
            # that group, so no private memory can be listed, replaced or quoted there.
            origin = self.state.memory_origin(chat)
            existing = await self.store.similar(user.id, text, k=5, origin_chat=origin)
            # This user's memories without search terms (a /remember fact, an older memory):
            # the same call writes theirs. Only this user's: the call never sees another's.
            mine = await self.store.memories(
                user.id, origin_chat=chat.id if chat.is_group else None
            )
            unanswered = self.terms_unanswered.setdefault(user.id, {})
            needs = extraction.needing_terms(mine, unanswered=unanswered)
        except Exception as exc:
            log.exception("memory lookup before extraction failed")
            why = "\n".join([f"store: {exc}", *await self.lessons.settle_mode(done, None)])
            await self._log_extraction(user, chat, "failed", "", why, 0)
            return
        outcome = await extraction.extract(
            self.extraction_llm,
            user_message=text,
            assistant_reply=done.reply,
            existing=existing,
            now=now,
            profile_lines=(
                await self.people.profile_lines(user, teaching_only=origin is not None)
                if self.state.config.learner_enabled
                else None
            ),
            needs_terms=needs,
            form=self.extraction_form,
            mode=self.lessons.mode_ask(done.mode),
            learner=await self.people.provider_id(user),
        )
        self.extraction_form = outcome.form
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
        kept, moved = extraction.profile_first(outcome.memories, held)
        outcome = replace(outcome, memories=kept, rejected=[*outcome.rejected, *moved])
        asked = await self._ask_to_forget(done, outcome, existing)
        try:
            results = await extraction.apply(
                self.store,
                user.id,
                outcome,
                existing,
                chat_id=chat.id,
                message_id=done.message_id,  # the platform's id of the learner's message
                now=now,
                within=origin,
            )
            filled, filled_tokens = await extraction.apply_terms(
                self.store, user.id, outcome, needs
            )
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
                f"rejected ({why}): {'[redacted]' if why is extraction.Rejection.SECRET else text}"
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
            buttons = await ask(
                self.db.connection, done.chat, done.user, FORGET, self.state.clock(), ids
            )
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
