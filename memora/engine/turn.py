"""One turn: the learner's message → context in budget → the reply → the turn stored in one
transaction → the after-reply work scheduled."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from memora.engine.after_reply import AfterReply
from memora.engine.followups import FOLLOW_UP_BLOCK, FollowUp
from memora.engine.forgetting import without_erased
from memora.engine.lanes import Lanes
from memora.engine.lesson_modes import LessonModes
from memora.engine.people import People
from memora.engine.retrieval import Retrieval
from memora.engine.state import EngineState
from memora.errors import LLMError, OverBudget
from memora.extraction import Answered
from memora.i18n import N_, _, ngettext, speaking
from memora.llm import LLM, CallInfo, Completion, OnDelta
from memora.llm.audio import Transcript
from memora.llm.sdk_errors import API_FIX, NO_RESPONSES_API
from memora.longterm import MemoryStore
from memora.modes import LESSONS
from memora.privacy.secretfilter import mask_secrets
from memora.shortterm.tokens import TokenCounter
from memora.shortterm.window import BuiltContext, Window, build_context
from memora.storage import Database, Erased, ForgottenMeanwhile, ModeRow, NewTurn, TurnUsage
from memora.types import ChatMessage, ChatRef, UserRef
from memora.views import Reply, TurnStats

log = logging.getLogger(__name__)


LLM_FAILED = N_(
    "Sorry — I couldn't reach my language model just now ({why}). Nothing was saved; "
    "please send your message again in a moment."
)
LLM_WRONG_API = N_(
    "Sorry — my language model is set up wrong, so I can't answer: its server has no "
    "Responses API. Nothing was saved. (For the bot's operator: set {fix}.)"
)


def too_long(n: int, limit: int) -> str:
    """A message over `max_message_chars`, refused before anything happens."""
    return ngettext(
        "That message is too long for me ({n} character; the limit is {limit}). "
        "Please send it in shorter parts. Nothing was saved.",
        "That message is too long for me ({n} characters; the limit is {limit}). "
        "Please send it in shorter parts. Nothing was saved.",
        n,
    ).format(n=n, limit=limit)


def over_budget(counted: int, budget: int) -> str:
    """A message that cannot fit the input budget with the memories and summary it needs."""
    return ngettext(
        "That message is too long to fit my memory budget ({counted} token; the limit is "
        "{budget}). Please shorten it or split it into parts. Nothing was saved.",
        "That message is too long to fit my memory budget ({counted} tokens; the limit is "
        "{budget}). Please shorten it or split it into parts. Nothing was saved.",
        counted,
    ).format(counted=counted, budget=budget)


FORWARDED = "[forwarded message, not the learner's own words] "
EMPTY = N_("I didn't get any text. Write a message, or /help for what I can do.")


def llm_failed(exc: LLMError) -> str:
    """The learner's answer to a failed reply call: "again in a moment", or, for a server
    without the API the config names, what the operator must change (waiting would not help)."""
    if exc.code == NO_RESPONSES_API:
        return _(LLM_WRONG_API).format(fix=API_FIX)
    return _(LLM_FAILED).format(why=exc)


@dataclass(frozen=True)
class _Turn:
    """One learner message on its way through the reply path."""

    chat: ChatRef
    user: UserRef
    text: str
    message_id: int | None
    extract: bool
    transcript: Transcript | None
    update_id: int | None = None  # the platform update it answers
    mode: ModeRow | None = None  # the lesson mode the turn is in (see memora.modes)


@dataclass(frozen=True)
class _Prepared:
    """The context built for a turn, and what building it cost."""

    window: Window
    built: BuiltContext
    memories_used: int
    embedding_tokens: int
    summary_tokens: int
    memory_lines: dict[str, str]  # the retrieved memories' lines by id
    since: int  # the erasure mark the turn began at (memora.storage.erasure)
    follow_up: FollowUp | None = None  # asked in this reply, once (memora.engine.followups)


def _shielded(on_delta: OnDelta) -> OnDelta:
    """The adapter's progress callback, never able to break the turn."""
    broken = False

    async def deliver(text: str) -> None:
        nonlocal broken
        if broken:
            return
        try:
            await on_delta(text)
        except Exception:
            broken = True
            log.exception("the progress callback failed; the reply goes on without it")

    return deliver


@dataclass(eq=False, kw_only=True)
class Turns:
    """Answering messages (and taking in exchanges from elsewhere)."""

    db: Database
    llm: LLM
    summary_llm: LLM
    counter: TokenCounter
    store: MemoryStore | None
    people: People
    lanes: Lanes
    lessons: LessonModes
    retrieval: Retrieval
    after_reply: AfterReply
    state: EngineState

    async def handle_turn(
        self,
        chat: ChatRef,
        user: UserRef,
        text: str,
        *,
        message_id: int | None = None,
        update_id: int | None = None,
        extract: bool = True,
        on_delta: OnDelta | None = None,
        transcript: Transcript | None = None,
        forwarded: bool = False,
        unlimited: bool = False,
    ) -> Reply:
        """Answer one learner message; the whole turn is stored only once the reply exists.

        `forwarded` says the text is someone else's (a forwarded message): it is answered and
        kept in the history marked as forwarded, and no memory is extracted from it.

        `transcript` is set when `text` was spoken: what its transcription cost is recorded with
        the turn, like every other call's usage.

        With `on_delta`, the reply is streamed: it is awaited with the reply text so far as the
        model writes it. It only shows progress: what counts is the Reply returned, and a turn
        that fails part-way stores nothing, like any failed turn. A callback that raises is
        logged and not called again; the turn goes on.

        `update_id` names the platform update being answered; it is stored with the turn, and an
        update answered before (delivered again after a crash) gets the stored reply back without
        a new turn.

        A learner over a usage limit (`[limits]`; `unlimited` for the bot's admins) is told when
        it resets, before any model call; nothing is stored. What the bot itself says is in the
        learner's language (`language`)."""
        text = text.strip()
        if not text:
            return await self._refuse(user, EMPTY)
        if len(text) > self.state.config.max_message_chars:
            with speaking(await self.people.language(user)):
                return Reply(too_long(len(text), self.state.config.max_message_chars), ok=False)
        if forwarded:
            text, extract = FORWARDED + text, False
        if not unlimited and transcript is None:  # a voice turn was checked before transcribing
            refused = await self.people.over_limit(user)
            if refused is not None:
                return Reply(refused, ok=False)
        async with self.lanes.lock(chat.id):
            answered = None if update_id is None else await self.db.turns.answer_to(update_id)
            if answered is not None:  # delivered again after a crash: answered once, ever
                return Reply(answered, stored=True, markdown=True)
            await self.lanes.settle(chat.id)
            # Replicas on one PostgreSQL: the chat is theirs too, so hold it in the database
            # for the turn and its after-reply work (its task takes it, see Lanes.schedule).
            await self.lanes.hold(chat.id)
            try:
                mode = await self.lessons.turn_mode(chat, user)
                turn = _Turn(chat, user, text, message_id, extract, transcript, update_id, mode)
                # under the lock: turns keep order
                with speaking(await self.people.language(user)):
                    return await self._turn(turn, on_delta)
            finally:
                await self.lanes.release(chat.id)  # no after-reply work was scheduled

    async def _refuse(self, user: UserRef, message: str, **fields: object) -> Reply:
        """A message refused before the turn starts, told in the learner's language."""
        with speaking(await self.people.language(user)):
            return Reply(_(message).format(**fields), ok=False)

    async def _turn(self, turn: _Turn, on_delta: OnDelta | None) -> Reply:
        """Context → reply → store; each step answers the learner itself when it fails."""
        prepared = await self._prepare(turn, await self.db.erasure.erasure_mark())
        if isinstance(prepared, Reply):
            return prepared
        answer = await self._answer(turn.chat, turn.user, prepared.built, on_delta)
        if isinstance(answer, Reply):
            return answer
        try:
            return await self._store(turn, prepared, answer)
        except ForgottenMeanwhile:  # the speaker asked to be forgotten meanwhile
            return Reply(answer.text, markdown=True)

    async def _prepare(self, turn: _Turn, since: int) -> _Prepared | Reply:
        """Retrieve memories and build the context inside the budget (folding if needed);
        `since` is the erasure mark the turn began at, taken before anything was read."""
        chat, user = turn.chat, turn.user
        await self.db.chats.ensure_chat(chat.id, chat.kind, chat.title)
        row = await self.db.chats.chat(chat.id)
        pending = await self.db.chats.messages(chat.id, from_seq=row.summarized_count)
        window = Window(row.summary, row.summarized_count, pending)
        memory_lines, embed_tokens = await self.retrieval.retrieve(chat, user, turn.text, pending)
        # In a group under the default scope only what pitches the English: the rest of the
        # profile spans the member's private chats, like their memories.
        teaching_only = self.state.memory_origin(chat) is not None
        profile_lines = await self.people.profile_lines(user, teaching_only=teaching_only)
        shown = f"[{user.name}] {turn.text}" if chat.is_group and user.name else turn.text
        follow_up = await self.retrieval.follow_up(chat, user, turn.mode)
        try:
            built = await build_context(
                window=window,
                current=ChatMessage("user", shown),
                memory_lines=list(memory_lines.values()),
                instructions=self.state.config.instructions,
                counter=self.counter,
                budget=self.state.config.max_input_tokens,
                max_recent_turns=self.state.config.max_recent_turns,
                llm=self.summary_llm,
                group=chat.is_group,
                profile_lines=profile_lines,
                mode_lines=self.lessons.mode_lines(turn.mode),
                learner=await self.people.provider_id(user),
                note=FOLLOW_UP_BLOCK + follow_up.line if follow_up else "",
            )
        except OverBudget as exc:
            return Reply(over_budget(exc.counted, exc.budget), ok=False)
        except LLMError as exc:
            return Reply(llm_failed(exc), ok=False)
        summary_tokens = await self._save_folds(chat.id, window, built, since)
        return _Prepared(
            window=window,
            built=built,
            memories_used=len(memory_lines) - built.memories_dropped,
            embedding_tokens=embed_tokens,
            summary_tokens=summary_tokens,
            memory_lines=memory_lines,
            since=since,
            follow_up=follow_up,
        )

    async def _answer(
        self, chat: ChatRef, user: UserRef, built: BuiltContext, on_delta: OnDelta | None
    ) -> Completion | Reply:
        """The one LLM call of the reply path (streamed when the adapter asked)."""
        call = CallInfo("reply", await self.people.provider_id(user))
        try:
            if on_delta is None:
                return await self.llm.complete(
                    self.state.config.instructions, built.messages, call=call
                )
            return await self.llm.complete(
                self.state.config.instructions,
                built.messages,
                on_delta=_shielded(on_delta),
                call=call,
            )
        except LLMError as exc:
            log.warning("reply failed for chat %s: %s", chat.id, exc)
            return Reply(llm_failed(exc), ok=False)

    async def _store(self, turn: _Turn, prepared: _Prepared, answer: Completion) -> Reply:
        """Write the whole turn in one transaction, then schedule the after-reply work."""
        chat, transcript = turn.chat, turn.transcript
        built = prepared.built
        mode, text = turn.mode, answer.text
        if mode is not None:  # the lesson moves on with the turn (its next exercise, if any)
            mode, added = LESSONS[mode.kind].answered(mode, answer.text)
            text = f"{text}\n\n{added}" if added else text
        self.counter.observe(built.counted, answer.usage.input_tokens)  # the budget learns
        usage = TurnUsage(
            counted_input=built.counted,
            actual_input=answer.usage.input_tokens,
            output_tokens=answer.usage.output_tokens,
            summary_tokens=prepared.summary_tokens,
            embedding_tokens=prepared.embedding_tokens,
            memories_used=prepared.memories_used,
            transcription_tokens=transcript.tokens if transcript else 0,
            transcription_seconds=round(transcript.seconds) if transcript else 0,
            reply_cached=answer.usage.cached_tokens,
            reply_reasoning=answer.usage.reasoning_tokens,
            summary_cached=sum(f.usage.cached_tokens for f in built.folds),
            summary_reasoning=sum(f.usage.reasoning_tokens for f in built.folds),
        )
        # The model saw any secret once, in this request; nothing stored (and so nothing sent
        # later: history, summaries, extraction) keeps it. The context's other messages were
        # masked when they were stored (history, summary) or never take a secret (memories and
        # profile values are screened): only its last, the message itself, is new.
        kept_text, kept_reply = mask_secrets(turn.text), mask_secrets(text)
        *earlier, current = built.messages
        context = [*earlier, ChatMessage(current.role, mask_secrets(current.content))]

        def scrub(erased: Erased) -> list[ChatMessage]:
            return without_erased(
                context,
                erased,
                pending=prepared.window.pending,
                group=chat.is_group,
                memory_lines=prepared.memory_lines,
            )

        turn_id = await self.db.turns.record_turn(
            NewTurn(
                chat_id=chat.id,
                user_id=turn.user.id,
                user_name=turn.user.name,
                user_text=kept_text,
                reply_text=kept_reply,
                context=context,
                usage=usage,
                external_id=turn.message_id,
                update_id=turn.update_id,
                mode=mode,
            ),
            since=prepared.since,
            scrub=scrub,
        )
        if prepared.follow_up is not None:
            await self.retrieval.asked(turn.user, prepared.follow_up)
        window = prepared.window
        folded = built.folds[-1].summarized_count - window.summarized_count if built.folds else 0
        unsummarized = len(window.pending) - folded + 2  # with this turn's two messages
        stats = TurnStats(
            usage=usage,
            newly_summarized=folded,
            context_messages=1 + len(built.messages),  # the system prompt, then the messages
            session_total=(await self.db.turns.total_usage(chat.id)).total,
            fold_pending=max(0, unsummarized - 2 * self.state.config.max_recent_turns),
        )
        calls = [
            self.people.model_call("reply", answer.usage),
            self.people.usage_call("embedding", prepared.embedding_tokens),
            *(self.people.model_call("summary", f.usage) for f in built.folds),
        ]
        if transcript is not None:
            calls.append(
                self.people.usage_call(
                    "transcription",
                    transcript.tokens,
                    audio_seconds=transcript.length or transcript.seconds,
                )
            )
        done = Answered(
            chat, turn.user, kept_text, kept_reply, turn_id, turn.message_id, mode, prepared.since
        )
        self.lanes.schedule(
            chat.id, self.after_reply.run(done, calls)
        )  # the next turn waits for it
        if turn.extract and self.store is not None and self.state.config.extraction_enabled:
            self.lanes.extract_later(turn.user.id, self.after_reply.extract(done))
        elif mode is not None:  # no extraction to judge the lesson's turn: it goes on without
            self.lanes.extract_later(turn.user.id, self.lessons.settle_alone(done))
        return Reply(text, stats=stats, stored=True, markdown=True)

    async def import_exchange(
        self, chat: ChatRef, user: UserRef, text: str, reply: str, *, at: datetime | None = None
    ) -> None:
        """Take in an exchange that happened elsewhere (an imported history, the LoCoMo harness
        in benchmarks/memory_eval.py): store it as a turn, then extract memories from it with the
        same code as after a live reply, `at` standing for the time it was said (relative dates
        in it resolve against that). No reply is generated and nothing is folded into the running
        summary here: the chat's next live turn folds whatever is due."""
        async with self.lanes.exclusive(chat.id):
            await self.db.chats.ensure_chat(chat.id, chat.kind, chat.title)
            turn_id = await self.db.turns.record_turn(
                NewTurn(chat.id, user.id, user.name, text, reply, [], TurnUsage())
            )
            if self.store is not None and self.state.config.extraction_enabled:
                await self.after_reply.extract(
                    Answered(chat, user, text, reply, turn_id, None), now=at
                )

    async def _save_folds(
        self, chat_id: int, window: Window, built: BuiltContext, since: int
    ) -> int:
        tokens = sum(f.tokens for f in built.folds)
        if built.folds:
            last = built.folds[-1]
            await self.db.chats.save_summary(
                chat_id,
                last.summary,
                last.summarized_count,
                expected_from=window.summarized_count,
                since=since,
            )
        return tokens
