"""What commands and adapters read or change, without reaching into the stores: a chat's state
and history, /status, memories, forgetting."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from memora.clock import utcnow
from memora.engine.after_reply import AfterReply
from memora.engine.lanes import Lanes
from memora.engine.state import EngineState
from memora.i18n import _, ngettext
from memora.learner.service import Learner
from memora.longterm import (
    MAX_MEMORY_CHARS,
    AddResult,
    Memory,
    MemoryStore,
    NewMemory,
    SearchResult,
)
from memora.longterm.dedupe import normalise_text
from memora.privacy.secretfilter import looks_secret
from memora.reminders import Reminders, WeeklyReports
from memora.storage import ChatRow, Database, ExtractionLog, StoredMessage
from memora.storage.file_erasure import remove_folder
from memora.types import ChatRef, UserRef
from memora.usage import UsageLedger
from memora.views import Status

log = logging.getLogger(__name__)


def memory_text_refusal(text: str) -> str | None:
    """Why `text` cannot be a memory the learner wrote (/remember, an edit on their page), in
    the current language; None if it can."""
    if not normalise_text(text):
        return _("There is nothing to remember in that: write a few words.")
    if looks_secret(text):
        return _("That looks like a password, key or card number — I never store those.")
    if len(text) > MAX_MEMORY_CHARS:
        n = MAX_MEMORY_CHARS
        return ngettext(
            "A memory must be short ({n} character at most).",
            "A memory must be short ({n} characters at most).",
            n,
        ).format(n=n)
    return None


@dataclass(eq=False, kw_only=True)
class Queries:
    """The engine's reads and the changes a learner asks for."""

    db: Database
    store: MemoryStore | None
    learner: Learner
    reminders: Reminders
    weekly: WeeklyReports
    lanes: Lanes
    after_reply: AfterReply
    state: EngineState

    async def forget_user(self, user_id: int) -> dict[str, int]:
        """Delete everything stored about a user, including what in-flight work would write: a
        turn in flight, in this process or another on the store, finds the deletion noted in
        the store and stores no trace of the user (memora.storage.erasure)."""
        await self.lanes.drain()  # summaries and extractions already under way finish first
        self.after_reply.forget_user(user_id)
        counts = await self.db.erasure.forget_user(user_id)
        self.learner.forget_app_language(user_id)
        counts["reminders"] = await self.reminders.delete_user(user_id)
        counts["weekly_reports"] = await self.weekly.delete_user(user_id)
        counts["memories"] = await self.store.delete_user(user_id) if self.store else 0
        counts["usage"] = await UsageLedger(self.db).delete_user(user_id)
        if (files := self.learner_files(user_id)) is not None:  # the terminal's charts, exports
            counts["files"] = await asyncio.to_thread(remove_folder, files)
        self._forget_recent_vectors()
        return counts

    def learner_files(self, user_id: int) -> Path | None:
        """The folder where adapters keep files made for this learner (None: no such place)."""
        folder = self.state.config.files_dir
        return None if folder is None else folder / f"learner-{user_id}"

    def memory_store(self) -> MemoryStore:
        """The long-term store, for what needs one (the command layer checks first)."""
        if self.store is None:
            raise RuntimeError("long-term memory is off on this engine")
        return self.store

    def _forget_recent_vectors(self) -> None:
        """A local embedder keeps the vectors of the last texts it embedded: deleted words go
        from the process's memory too."""
        forget = getattr(self.store.embedder, "forget_recent", None) if self.store else None
        if forget is not None:
            forget()

    async def chat_state(self, chat_id: int) -> ChatRow:
        """The chat's summary, summary offset and last request context."""
        return await self.db.chats.chat(chat_id)

    async def history(self, chat_id: int) -> list[StoredMessage]:
        return await self.db.chats.messages(chat_id)

    async def message_count(self, chat_id: int) -> int:
        return await self.db.chats.message_count(chat_id)

    async def last_speaker(self, chat_id: int) -> tuple[int, str] | None:
        """Who sent the chat's last user message: whose memories the last context holds."""
        return await self.db.chats.last_speaker(chat_id)

    async def extraction_log(self, user_id: int) -> ExtractionLog | None:
        return await self.db.turns.extraction(user_id)

    async def status(self, chat_id: int, user_id: int) -> Status:
        """The /status figures for this chat and (memories, extraction) this user."""
        row = await self.db.chats.chat(chat_id)
        log = await self.db.turns.extraction(user_id)
        return Status(
            history_messages=await self.db.chats.message_count(chat_id),
            summarized_messages=row.summarized_count,
            # the system prompt too, as /context shows it
            last_context_messages=len(row.last_context) + 1 if row.last_context else 0,
            summary_available=bool(row.summary),
            memory_count=await self.store.count(user_id) if self.store else None,
            last=await self.db.turns.last_usage(chat_id),
            session=await self.db.turns.total_usage(chat_id),
            extraction_status=f"{log.status} at {log.at}" if log else _("none yet"),
            summary_error=row.last_summary_error,
            embedding_model=self.store.embedder.name if self.store else _("off"),
        )

    async def memories(self, user_id: int, *, origin_chat: int | None = None) -> list[Memory]:
        """The user's long-term memories, in the order /memories numbers them; with
        `origin_chat`, only those that came from that chat (see `EngineState.memory_origin`)."""
        return await self.memory_store().memories(user_id, origin_chat=origin_chat)

    async def search_memories(
        self, user_id: int, query: str, top_k: int = 10, *, origin_chat: int | None = None
    ) -> SearchResult:
        """The user's memories ranked for `query`, below the reply's score floor too."""
        return await self.memory_store().searcher.search(
            user_id, query, top_k=top_k, min_score=0.0, origin_chat=origin_chat
        )

    async def remember(
        self, chat: ChatRef, user: UserRef, text: str, *, message_id: int | None = None
    ) -> AddResult:
        """Save a memory the user asked for, and note it in their extraction log."""
        memory = NewMemory(text, "manual", "other", chat.id, message_id)
        result = await self.memory_store().writer.add(
            user.id,
            memory,
            within=self.state.memory_origin(chat),  # a group's /remember never takes a private one
        )
        await self.db.turns.log_extraction_manual(user.id, chat.id, text)
        return result

    async def forget_memory(self, user_id: int, memory: Memory) -> bool:
        """Delete the memory, and its words (and earlier versions) wherever SQLite kept them; a
        turn in flight that retrieved it leaves it out of the context it stores."""
        await self.db.erasure.note_memory_erased(user_id, memory.id)
        deleted = await self.memory_store().delete(user_id, memory.id)
        for text in {memory.text, *(r.text for r in memory.history)}:
            await self.db.erasure.forget_memory_text(user_id, text)
        self._forget_recent_vectors()
        return deleted

    async def undo_memory(self, user_id: int, memory_id: str) -> Memory | None:
        """Restore the memory's previous text; None if it was never updated."""
        return await self.memory_store().writer.revert(user_id, memory_id)

    async def pin_memory(self, user_id: int, memory_id: str, pinned: bool) -> Memory | None:
        """Pin a memory (always in the reply's context) or unpin it; None if it is gone."""
        at = utcnow(self.state.clock()) if pinned else None
        return await self.memory_store().writer.mark(user_id, memory_id, pinned_at=at)

    async def reset_chat(self, chat_id: int) -> int:
        """Forget the chat's short-term memory; return how many messages went."""
        return await self.db.chats.reset_chat(chat_id)

    async def memory(self, user_id: int, memory_id: str) -> Memory | None:
        """One of the user's memories by id; None if the user has no such memory."""
        return await self.memory_store().get(user_id, memory_id)

    async def edit_memory(self, user_id: int, memory_id: str, text: str) -> Memory:
        """The learner's new wording of their memory: stored and re-indexed as a new write is
        (a new vector, no old search terms), the old text kept in its history for an undo.
        Raises MemoryNotFound for a memory the user does not have."""
        return await self.memory_store().writer.supersede(
            user_id, memory_id, text.strip(), reason="edited", now=self.state.clock()
        )

    async def memory_sources(self, user_id: int, memories: list[Memory]) -> dict[str, str]:
        """The learner's message each memory came from (memory id → text), where it is kept."""
        refs = {
            m.id: (m.chat_id, m.message_id)
            for m in memories
            if m.chat_id is not None and m.message_id is not None
        }
        found = await self.db.chats.source_messages(user_id, list(refs.values()))
        return {mid: found[ref] for mid, ref in refs.items() if ref in found}
