"""The turn engine: one entry point for every adapter, a lock per chat, work after the reply."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from memora.blocking import background
from memora.clock import as_utc, utcnow
from memora.config import DEFAULT_MAX_INPUT_TOKENS, DEFAULT_MEMORY_TOKENS
from memora.learner.service import Learner
from memora.llm import LLM, ChatMessage, Completion, LLMError, OnDelta
from memora.longterm import policy as memory_policy
from memora.prompts import TUTOR_INSTRUCTIONS
from memora.reminders import Reminders
from memora.secretfilter import mask_secrets
from memora.shortterm import BuiltContext, OverBudget, Window, build_context, summarize
from memora.storage import (
    ChatRow,
    Database,
    ExtractionLog,
    NewTurn,
    SharedChatLock,
    StoredMessage,
    TurnUsage,
)
from memora.tokens import TokenCounter
from memora.views import Reply, Status, TurnStats

if TYPE_CHECKING:
    from memora.longterm import AddResult, Memory, MemoryStore, SearchHit, SearchResult
    from memora.longterm.extraction import ExtractionOutcome
    from memora.voice import Speaker, Transcriber, Transcript

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChatRef:
    """Where a message came from: platform-neutral."""

    id: int
    kind: str = "private"  # "private" | "group"
    title: str = ""

    @property
    def is_group(self) -> bool:
        return self.kind != "private"


@dataclass(frozen=True)
class UserRef:
    """Who sent it."""

    id: int
    name: str = ""


@dataclass(frozen=True)
class Answered:
    """A turn that was answered and stored: what the after-reply work needs."""

    chat: ChatRef
    user: UserRef
    text: str
    reply: str
    turn_id: int
    message_id: int | None  # the platform's id of the learner's message


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


@dataclass(frozen=True)
class _Prepared:
    """The context built for a turn, and what building it cost."""

    window: Window
    built: BuiltContext
    memories_used: int
    embedding_tokens: int
    summary_tokens: int


@dataclass(frozen=True)
class EngineConfig:
    max_input_tokens: int = DEFAULT_MAX_INPUT_TOKENS
    max_recent_turns: int = 3
    max_message_chars: int = 4000
    top_k: int = 3
    min_score: float | None = None  # None: the embedder profile's (memora.longterm.profile)
    use_last_turn: bool = True  # the previous message, ranked after what the message finds
    memory_tokens: int = DEFAULT_MEMORY_TOKENS  # 0: top_k and min_score alone decide
    group_memories: Literal["group", "all"] = "group"
    extraction_enabled: bool = True
    learner_enabled: bool = True
    instructions: str = TUTOR_INSTRUCTIONS


MAX_BUDGETED_MEMORIES = memory_policy.MAX_BUDGETED_MEMORIES


def previous_message(pending: list[StoredMessage], user_id: int) -> str | None:
    """The learner's own previous message in this chat (not the bot's reply, not another group
    member's): the context a follow-up such as "那如果他們要去火車站呢" leans on. The store uses
    it for follow-ups only (MemoryStore.search); the learner set measured it this way."""
    for message in reversed(pending):
        if message.role == "user" and message.user_id == user_id:
            return message.content
    return None


Notify = Callable[["ChatRef", "UserRef", str], Awaitable[None]]


def forgotten_notice(forgotten: list[Memory], *, group: bool) -> str:
    """What a learner who asked in words to forget something is told once it is done. In a
    group the texts are not repeated: a memory from a private chat stays private."""
    if not forgotten:
        return (
            "You asked me to forget something, but I couldn't tell which memory you meant, so "
            "nothing was deleted. /memories lists them; /forget <n> deletes one."
        )
    if group:
        n = len(forgotten)
        return f"🗑 Forgotten, as you asked: {n} memor{'y' if n == 1 else 'ies'}."
    return "🗑 Forgotten, as you asked (deleted for good):\n" + "\n".join(
        f"• {m.text}" for m in forgotten
    )


LLM_FAILED = (
    "Sorry — I couldn't reach my language model just now ({why}). Nothing was saved; "
    "please send your message again in a moment."
)
TOO_LONG_CHARS = (
    "That message is too long for me ({n} characters; the limit is {limit}). "
    "Please send it in shorter parts. Nothing was saved."
)
OVER_BUDGET = (
    "That message is too long to fit my memory budget ({counted} tokens; the limit is "
    "{budget}). Please shorten it or split it into parts. Nothing was saved."
)
FORWARDED = "[forwarded message, not the learner's own words] "
EMPTY = "I didn't get any text. Write a message, or /help for what I can do."


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


class Engine:
    """Runs turns: retrieve → build context in budget → reply → store → fold + extract later."""

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
        clock: Callable[[], datetime] = as_utc,
        transcriber: Transcriber | None = None,
        speaker: Speaker | None = None,
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
        # How the adapter tells a learner something after the reply (what they asked to be
        # forgotten); None: nobody listens (benchmarks, imports)
        self.notify: Notify | None = None
        self.reminders = Reminders(db, learner=self.learner, clock=clock)
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
        # Bumped by forget_user: work begun before it must not write anything about the user.
        self._epochs: dict[int, int] = {}
        # The extraction call's form: "compact" once the model's server refused the full one as
        # longer than its context (learned like the LLM's structured-output form; see extract).
        self.extraction_form: Literal["full", "compact"] = "full"
        # Per user, term-less memories the extraction call was asked about and did not answer
        # (memory id → times); see extraction.MAX_ASKS. In process only: a restart asks again.
        self._terms_unanswered: dict[int, dict[str, int]] = {}

    # -- ordering -------------------------------------------------------------------------------
    def lock(self, chat_id: int) -> asyncio.Lock:
        lock = self._locks.get(chat_id)
        if lock is None:
            lock = self._locks[chat_id] = asyncio.Lock()
        return lock

    @asynccontextmanager
    async def exclusive(self, chat_id: int, user_id: int | None = None) -> AsyncIterator[None]:
        """The chat to oneself, in this process and across replicas, its earlier work done (and
        with `user_id`, that user's extractions)."""
        async with self.lock(chat_id):
            await self.settle(chat_id, user_id)
            held = await self.db.lock_chat(chat_id)
            try:
                yield
            finally:
                await held.release()

    async def settle(self, chat_id: int, user_id: int | None = None) -> None:
        """Wait for the chat's fold of the window; with `user_id`, for that user's extractions
        too (views that show memories want them; replies never wait for extraction)."""
        extracting = None if user_id is None else self._extracting.get(user_id)
        for task in (self._after.get(chat_id), extracting):
            if task is not None and not task.done():
                await asyncio.shield(task)

    async def drain(self) -> None:
        """Wait for all after-reply work; used at shutdown and by tests."""
        tasks = [t for t in (*self._after.values(), *self._extracting.values()) if not t.done()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _extract_later(self, user_id: int, job: Awaitable[None]) -> None:
        """Run an extraction in the user's lane: after their previous one; no reply waits."""
        before = self._extracting.get(user_id)

        async def run() -> None:
            if before is not None:
                await asyncio.gather(before, return_exceptions=True)
            try:
                with background():  # its embedding and Chroma writes never queue ahead of a reply's
                    await job
            except Exception:
                log.exception("memory extraction failed for user %s", user_id)

        task = asyncio.create_task(run(), name=f"extract-{user_id}")
        self._extracting[user_id] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._extracting.get(user_id) is done:
                del self._extracting[user_id]

        task.add_done_callback(forget)

    def _schedule(self, chat_id: int, job: Awaitable[None]) -> None:
        held = self._held.pop(chat_id, None)  # the turn's hold on the chat ends with this work

        async def run() -> None:
            try:
                await job
            except Exception:
                log.exception("after-reply work failed for chat %s", chat_id)
            finally:
                if held is not None:
                    await held.release()

        task = asyncio.create_task(run(), name=f"after-reply-{chat_id}")
        self._after[chat_id] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._after.get(chat_id) is done:
                del self._after[chat_id]

        task.add_done_callback(forget)

    async def forget_user(self, user_id: int) -> dict[str, int]:
        """Delete everything stored about a user, including what in-flight work would write."""
        self._epochs[user_id] = self._epochs.get(user_id, 0) + 1
        await self.drain()  # summaries and extractions already under way finish first
        self._terms_unanswered.pop(user_id, None)
        counts = await self.db.forget_user(user_id)
        counts["reminders"] = await self.reminders.delete_user(user_id)
        counts["memories"] = await self.store.delete_user(user_id) if self.store else 0
        self._forget_recent_vectors()
        return counts

    def _forget_recent_vectors(self) -> None:
        """A local embedder keeps the vectors of the last texts it embedded: deleted words go
        from the process's memory too."""
        forget = getattr(self.store.embedder, "forget_recent", None) if self.store else None
        if forget is not None:
            forget()

    def _epoch(self, user_id: int) -> int:
        return self._epochs.get(user_id, 0)

    # -- queries: what commands and adapters read or change, without reaching into the stores ----
    @property
    def has_memory(self) -> bool:
        """Whether this bot keeps long-term memories (a store is configured)."""
        return self.store is not None

    def _memory(self) -> MemoryStore:
        if self.store is None:
            raise RuntimeError("long-term memory is off on this engine")
        return self.store

    async def chat_state(self, chat_id: int) -> ChatRow:
        """The chat's summary, summary offset and last request context."""
        return await self.db.chat(chat_id)

    async def history(self, chat_id: int) -> list[StoredMessage]:
        return await self.db.messages(chat_id)

    async def message_count(self, chat_id: int) -> int:
        return await self.db.message_count(chat_id)

    async def last_speaker(self, chat_id: int) -> tuple[int, str] | None:
        """Who sent the chat's last user message: whose memories the last context holds."""
        return await self.db.last_speaker(chat_id)

    async def extraction_log(self, user_id: int) -> ExtractionLog | None:
        return await self.db.extraction(user_id)

    async def status(self, chat_id: int, user_id: int) -> Status:
        """The /status figures for this chat and (memories, extraction) this user."""
        row = await self.db.chat(chat_id)
        log = await self.db.extraction(user_id)
        return Status(
            history_messages=await self.db.message_count(chat_id),
            summarized_messages=row.summarized_count,
            last_context_messages=len(row.last_context),
            summary_available=bool(row.summary),
            memory_count=await self.store.count(user_id) if self.store else None,
            last=await self.db.last_usage(chat_id),
            session=await self.db.total_usage(chat_id),
            extraction_status=f"{log.status} at {log.at}" if log else "none yet",
            summary_error=row.last_summary_error,
            embedding_model=self.store.embedder.name if self.store else "off",
        )

    async def memories(self, user_id: int, *, origin_chat: int | None = None) -> list[Memory]:
        """The user's long-term memories, in the order /memories numbers them; with
        `origin_chat`, only those that came from that chat (see `memory_origin`)."""
        return await self._memory().memories(user_id, origin_chat=origin_chat)

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

    async def search_memories(
        self, user_id: int, query: str, top_k: int = 10, *, origin_chat: int | None = None
    ) -> SearchResult:
        """The user's memories ranked for `query`, below the reply's score floor too."""
        return await self._memory().search(
            user_id, query, top_k=top_k, min_score=0.0, origin_chat=origin_chat
        )

    async def remember(
        self, chat: ChatRef, user: UserRef, text: str, *, message_id: int | None = None
    ) -> AddResult:
        """Save a memory the user asked for, and note it in their extraction log."""
        result = await self._memory().add(
            user.id, text, source="manual", category="other", chat_id=chat.id, message_id=message_id
        )
        await self.db.log_extraction_manual(user.id, chat.id, text)
        return result

    async def forget_memory(self, user_id: int, memory: Memory) -> bool:
        """Delete the memory, and its words (and earlier versions) wherever SQLite kept them."""
        deleted = await self._memory().delete(user_id, memory.id)
        for text in {memory.text, *(r.text for r in memory.history)}:
            await self.db.forget_memory_text(user_id, text)
        self._forget_recent_vectors()
        return deleted

    async def undo_memory(self, user_id: int, memory_id: str) -> Memory | None:
        """Restore the memory's previous text; None if it was never updated."""
        return await self._memory().revert(user_id, memory_id)

    async def reset_chat(self, chat_id: int) -> int:
        """Forget the chat's short-term memory; return how many messages went."""
        return await self.db.reset_chat(chat_id)

    async def export_chat(self, chat_id: int) -> dict[str, Any] | None:
        """The chat's data (history, summary, usage, participants' memories and learner data) as
        a JSON-able dict; None for a chat this bot has never seen."""
        if chat_id not in await self.db.chat_ids():
            return None
        row = await self.db.chat(chat_id)
        # A group's export holds that group's data: the memories its members shared there.
        origin = None if row.kind == "private" else chat_id
        participants: dict[str, Any] = {}
        if self.store is not None:
            for uid, name in await self.db.participants(chat_id):
                mems = await self.store.memories(uid, origin_chat=origin)
                participants[str(uid)] = {"name": name, "memories": [_exported(m) for m in mems]}
        for uid, name in await self.db.participants(chat_id):  # profile, mistakes, words, cards
            entry = participants.setdefault(str(uid), {"name": name})
            if origin is None:  # a learner's model and reminder span their chats: not a group's
                entry["learner"] = await self.learner.store.export(uid, self.clock())
                entry["reminder"] = await self.reminders.export(uid)  # None without one
        return {
            "exported_at": utcnow(self.clock()),
            "chat": {"id": chat_id, "kind": row.kind, "title": row.title},
            "summary": row.summary,
            "summarized_messages": row.summarized_count,
            "history": [
                {
                    "seq": m.seq,
                    "role": m.role,
                    "content": m.content,
                    "user_id": m.user_id,
                    "user_name": m.user_name,
                    "at": m.created_at,
                }
                for m in await self.db.messages(chat_id)
            ],
            "last_context": [m.as_dict() for m in row.last_context],
            "usage": {
                "turns": await self.db.turn_rows(chat_id),
                "total_tokens": (await self.db.total_usage(chat_id)).total,
            },
            "participants": participants,
        }

    # -- the turn -------------------------------------------------------------------------------
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
        a new turn."""
        text = text.strip()
        if not text:
            return Reply(EMPTY, ok=False)
        if len(text) > self.config.max_message_chars:
            return Reply(
                TOO_LONG_CHARS.format(n=len(text), limit=self.config.max_message_chars), ok=False
            )
        if forwarded:
            text, extract = FORWARDED + text, False
        async with self.lock(chat.id):
            answered = None if update_id is None else await self.db.answer_to(update_id)
            if answered is not None:  # delivered again after a crash: answered once, ever
                return Reply(answered, stored=True, markdown=True)
            await self.settle(chat.id)
            # Replicas on one PostgreSQL: the chat is theirs too, so hold it in the database
            # for the turn and its after-reply work (handed to that work's task, see _schedule).
            self._held[chat.id] = await self.db.lock_chat(chat.id)
            try:
                turn = _Turn(chat, user, text, message_id, extract, transcript, update_id)
                return await self._turn(turn, on_delta)
            finally:
                unclaimed = self._held.pop(chat.id, None)  # no after-reply work was scheduled
                if unclaimed is not None:
                    await unclaimed.release()

    async def _turn(self, turn: _Turn, on_delta: OnDelta | None) -> Reply:
        """Context → reply → store; each step answers the learner itself when it fails."""
        epoch = self._epoch(turn.user.id)
        prepared = await self._prepare(turn)
        if isinstance(prepared, Reply):
            return prepared
        answer = await self._answer(turn.chat, prepared.built, on_delta)
        if isinstance(answer, Reply):
            return answer
        if self._epoch(turn.user.id) != epoch:  # the user asked to be forgotten meanwhile
            return Reply(answer.text, markdown=True)
        return await self._store(turn, prepared, answer)

    async def _prepare(self, turn: _Turn) -> _Prepared | Reply:
        """Retrieve memories and build the context inside the budget (folding if needed)."""
        chat, user = turn.chat, turn.user
        await self.db.ensure_chat(chat.id, chat.kind, chat.title)
        row = await self.db.chat(chat.id)
        pending = await self.db.messages(chat.id, from_seq=row.summarized_count)
        window = Window(row.summary, row.summarized_count, pending)
        memory_lines, embed_tokens = await self._retrieve(chat, user, turn.text, pending)
        # In a group under the default scope only what pitches the English: the rest of the
        # profile spans the member's private chats, like their memories.
        teaching_only = self.memory_origin(chat) is not None
        profile_lines = await self._profile_lines(user, teaching_only=teaching_only)
        shown = f"[{user.name}] {turn.text}" if chat.is_group and user.name else turn.text
        try:
            built = await build_context(
                window=window,
                current=ChatMessage("user", shown),
                memory_lines=memory_lines,
                instructions=self.config.instructions,
                counter=self.counter,
                budget=self.config.max_input_tokens,
                max_recent_turns=self.config.max_recent_turns,
                llm=self.summary_llm,
                group=chat.is_group,
                profile_lines=profile_lines,
            )
        except OverBudget as exc:
            return Reply(OVER_BUDGET.format(counted=exc.counted, budget=exc.budget), ok=False)
        except LLMError as exc:
            return Reply(LLM_FAILED.format(why=exc), ok=False)
        summary_tokens = await self._save_folds(chat.id, window, built)
        return _Prepared(
            window=window,
            built=built,
            memories_used=len(memory_lines) - built.memories_dropped,
            embedding_tokens=embed_tokens,
            summary_tokens=summary_tokens,
        )

    async def _answer(
        self, chat: ChatRef, built: BuiltContext, on_delta: OnDelta | None
    ) -> Completion | Reply:
        """The one LLM call of the reply path (streamed when the adapter asked)."""
        try:
            if on_delta is None:
                return await self.llm.complete(self.config.instructions, built.messages)
            return await self.llm.complete(
                self.config.instructions, built.messages, on_delta=_shielded(on_delta)
            )
        except LLMError as exc:
            log.warning("reply failed for chat %s: %s", chat.id, exc)
            return Reply(LLM_FAILED.format(why=exc), ok=False)

    async def _store(self, turn: _Turn, prepared: _Prepared, answer: Completion) -> Reply:
        """Write the whole turn in one transaction, then schedule the after-reply work."""
        chat, transcript = turn.chat, turn.transcript
        built = prepared.built
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
        )
        # The model saw any secret once, in this request; nothing stored (and so nothing sent
        # later: history, summaries, extraction) keeps it. The context's other messages were
        # masked when they were stored (history, summary) or never take a secret (memories and
        # profile values are screened): only its last, the message itself, is new.
        kept_text, kept_reply = mask_secrets(turn.text), mask_secrets(answer.text)
        *earlier, current = built.messages
        context = [*earlier, ChatMessage(current.role, mask_secrets(current.content))]
        turn_id = await self.db.record_turn(
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
            )
        )
        was = prepared.window.summarized_count
        stats = TurnStats(
            usage=usage,
            newly_summarized=built.folds[-1].summarized_count - was if built.folds else 0,
            context_messages=len(built.messages),
            session_total=(await self.db.total_usage(chat.id)).total,
        )
        done = Answered(chat, turn.user, kept_text, kept_reply, turn_id, turn.message_id)
        self._schedule(chat.id, self._after_reply(done))  # the next turn waits for it
        if turn.extract and self.store is not None and self.config.extraction_enabled:
            self._extract_later(turn.user.id, self._extract(done))
        return Reply(answer.text, stats=stats, stored=True, markdown=True)

    async def import_exchange(
        self, chat: ChatRef, user: UserRef, text: str, reply: str, *, at: datetime | None = None
    ) -> None:
        """Take in an exchange that happened elsewhere (an imported history, the LoCoMo harness
        in benchmarks/memory_eval.py): store it as a turn, then extract memories from it with the
        same code as after a live reply, `at` standing for the time it was said (relative dates
        in it resolve against that). No reply is generated and nothing is folded into the running
        summary here: the chat's next live turn folds whatever is due."""
        async with self.exclusive(chat.id):
            await self.db.ensure_chat(chat.id, chat.kind, chat.title)
            turn_id = await self.db.record_turn(
                NewTurn(chat.id, user.id, user.name, text, reply, [], TurnUsage())
            )
            if self.store is not None and self.config.extraction_enabled:
                await self._extract(Answered(chat, user, text, reply, turn_id, None), now=at)

    def memory_origin(self, chat: ChatRef) -> int | None:
        """Which chat's memories a turn or command in this chat may use: in a group, by default
        only what the member said in that group (their private facts stay private); None means
        all of the user's memories ([retrieval] group_memories = "all", and private chats)."""
        if chat.is_group and self.config.group_memories == "group":
            return chat.id
        return None

    async def _retrieve(
        self, chat: ChatRef, user: UserRef, text: str, pending: list[StoredMessage]
    ) -> tuple[list[str], int]:
        if self.store is None or self.config.top_k == 0:
            return [], 0
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
            return [], 0
        hits = found.hits
        return [f"- {h.memory.text}" for h in hits], found.embedding_tokens

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

    async def _save_folds(self, chat_id: int, window: Window, built: BuiltContext) -> int:
        tokens = sum(f.tokens for f in built.folds)
        if built.folds:
            last = built.folds[-1]
            await self.db.save_summary(
                chat_id, last.summary, last.summarized_count, expected_from=window.summarized_count
            )
        return tokens

    # -- after the reply ------------------------------------------------------------------------
    async def _after_reply(self, done: Answered) -> None:
        """The chat's ordered work after a reply (the next turn waits for it)."""
        if self.config.learner_enabled:  # a study day for /progress and the streak
            await self.learner.note_message(done.user.id, self.clock())
        await self._fold_backlog(done.chat, done.turn_id)

    async def _fold_backlog(self, chat: ChatRef, turn_id: int) -> None:
        row = await self.db.chat(chat.id)
        pending = await self.db.messages(chat.id, from_seq=row.summarized_count)
        backlog = Window(row.summary, row.summarized_count, pending).backlog(
            self.config.max_recent_turns
        )
        if not backlog:
            return
        try:
            fold = await summarize(self.summary_llm, row.summary, backlog, backlog[-1].seq + 1)
        except LLMError as exc:
            log.warning("summary update failed for chat %s: %s", chat.id, exc)
            await self.db.note_summary_error(chat.id, f"{utcnow()}: {exc}")
            return
        await self.db.save_summary(
            chat.id, fold.summary, fold.summarized_count, expected_from=row.summarized_count
        )
        await self.db.add_turn_usage(turn_id, TurnUsage(summary_tokens=fold.tokens))

    async def _extract(self, done: Answered, now: datetime | None = None) -> None:
        chat, user, text, turn_id = done.chat, done.user, done.text, done.turn_id
        from memora.longterm import extraction

        assert self.store is not None
        now = now or self.clock()
        try:
            existing = await self.store.similar(user.id, text, k=5)
            # This user's memories without search terms (a /remember fact, an older memory):
            # the same call writes theirs. Only this user's: the call never sees another's. In a
            # group, only those said in that group: /extraction there shows what was written.
            origin = chat.id if chat.is_group else None
            mine = await self.store.memories(user.id, origin_chat=origin)
            unanswered = self._terms_unanswered.setdefault(user.id, {})
            needs = extraction.needing_terms(mine, unanswered=unanswered)
        except Exception as exc:
            log.exception("memory lookup before extraction failed")
            await self._log_extraction(user, chat, "failed", "", f"store: {exc}", 0)
            return
        outcome = await extraction.extract(
            self.extraction_llm,
            user_message=text,
            assistant_reply=done.reply,
            existing=existing,
            now=now,
            profile_lines=await self._profile_lines(user) if self.config.learner_enabled else None,
            needs_terms=needs,
            form=self.extraction_form,
        )
        self.extraction_form = outcome.form
        tokens = outcome.usage.total_tokens
        raw = outcome.raw  # extraction has masked every rejected secret in it already
        if outcome.error:
            spent = (turn_id, TurnUsage(extraction_tokens=tokens))
            await self._log_extraction(user, chat, "failed", raw, outcome.error, tokens, spent)
            return
        learned, held = await self._apply_learner(done, outcome, now)
        kept, moved = extraction.profile_first(outcome.memories, held)
        outcome = replace(outcome, memories=kept, rejected=[*outcome.rejected, *moved])
        forgotten = await self._forget_asked(done, outcome, existing)
        try:
            results = await extraction.apply(
                self.store,
                user.id,
                outcome,
                existing,
                chat_id=chat.id,
                message_id=done.message_id,  # the platform's id of the learner's message
                now=now,
            )
            filled, filled_tokens = await extraction.apply_terms(
                self.store, user.id, outcome, needs
            )
        except Exception as exc:  # the embedder or the store failed; the reply already went out
            log.exception("storing extracted memories failed for user %s", user.id)
            spent = (turn_id, TurnUsage(extraction_tokens=tokens))
            await self._log_extraction(user, chat, "failed", raw, f"store: {exc}", tokens, spent)
            return
        got = {m.id for m in filled}
        for memory in needs[: outcome.terms_listed]:  # listed in a call that was answered
            if memory.id in got:
                unanswered.pop(memory.id, None)
            else:
                unanswered[memory.id] = unanswered.get(memory.id, 0) + 1
        embed = sum(r.embedding_tokens for r in results) + filled_tokens
        spent = (turn_id, TurnUsage(extraction_tokens=tokens, embedding_tokens=embed))
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
        detail += "".join(f"\nforgotten, as the learner asked: {m.text}" for m in forgotten)
        if outcome.asks_to_forget and not forgotten:
            detail += "\nthe learner asked to forget, but no listed memory was named"
        status = f"ok, {len(results)} memories" if results else "ok, nothing worth keeping"
        await self._log_extraction(user, chat, status, raw, detail.strip(), tokens, spent)

    async def _forget_asked(
        self, done: Answered, outcome: ExtractionOutcome, existing: list[Memory]
    ) -> list[Memory]:
        """Delete the memories the learner asked in words to forget (as /forget does: gone, no
        undo copy) and tell them in a short notice; the memories deleted."""
        if not outcome.asks_to_forget:
            return []
        forgotten: list[Memory] = []
        for n in outcome.forget:
            memory = existing[n - 1]
            if await self.forget_memory(done.user.id, memory):
                forgotten.append(memory)
        await self._notify(done, forgotten_notice(forgotten, group=done.chat.is_group))
        return forgotten

    async def _notify(self, done: Answered, text: str) -> None:
        """Tell the learner something after the reply, through the adapter (if it listens)."""
        if self.notify is None:
            return
        try:
            await self.notify(done.chat, done.user, text)
        except Exception:
            log.exception("the notice to chat %s could not be delivered", done.chat.id)

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
        await self.db.log_extraction(
            ExtractionLog(user.id, chat.id, utcnow(), status, raw, detail, tokens), spent=spent
        )


def _exported(m: Memory) -> dict[str, Any]:
    """One memory as /export writes it, with its history of replaced texts."""
    return {
        "id": m.id,
        "text": m.text,
        "source": m.source,
        "category": m.category,
        "created_at": m.created_at,
        "updated_at": m.updated_at,
        "chat_id": m.chat_id,
        "message_id": m.message_id,
        "terms": list(m.terms),  # the search terms indexed with the text (not shown by /memories)
        "situations": list(m.situations),  # indexed with them too
        "history": [
            {"text": r.text, "replaced_at": r.replaced_at, "reason": r.reason} for r in m.history
        ],
    }
