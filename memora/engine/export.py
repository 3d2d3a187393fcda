"""/export: a chat's data (history, summary, usage, participants' memories and learner data) as
JSON-able data; and one learner's own export of everything kept about them (their page)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from memora.clock import utcnow
from memora.engine.state import EngineState
from memora.learner.service import Learner
from memora.longterm import Memory, MemoryStore
from memora.reminders import Reminders, WeeklyReports
from memora.storage import Database, StoredMessage
from memora.usage import UsageLedger


@dataclass(eq=False, kw_only=True)
class Export:
    """A chat's data, as /export and `memora export` write it, and a learner's own."""

    db: Database
    store: MemoryStore | None
    learner: Learner
    reminders: Reminders
    weekly: WeeklyReports
    state: EngineState

    async def export_chat(self, chat_id: int) -> dict[str, Any] | None:
        """The chat's data (history, summary, usage, participants' memories and learner data) as
        a JSON-able dict; None for a chat this bot has never seen."""
        if chat_id not in await self.db.chats.chat_ids():
            return None
        row = await self.db.chats.chat(chat_id)
        # A group's export holds that group's data: the memories its members shared there.
        origin = None if row.kind == "private" else chat_id
        participants: dict[str, Any] = {}
        if self.store is not None:
            for uid, name in await self.db.chats.participants(chat_id):
                mems = await self.store.memories(uid, origin_chat=origin)
                participants[str(uid)] = {"name": name, "memories": [_exported(m) for m in mems]}
        for uid, name in await self.db.chats.participants(
            chat_id
        ):  # profile, mistakes, words, cards
            entry = participants.setdefault(str(uid), {"name": name})
            if origin is None:  # a learner's model and reminder span their chats: not a group's
                entry.update(await self._learner_data(uid))
        return {
            "exported_at": utcnow(self.state.clock()),
            "chat": {"id": chat_id, "kind": row.kind, "title": row.title},
            "summary": row.summary,
            "summarized_messages": row.summarized_count,
            "history": [_message(m) for m in await self.db.chats.messages(chat_id)],
            "last_context": [m.as_dict() for m in row.last_context],
            "usage": {
                "turns": await self.db.turns.turn_rows(chat_id),
                "total_tokens": (await self.db.turns.total_usage(chat_id)).total,
            },
            "participants": participants,
        }

    async def _learner_data(self, user_id: int) -> dict[str, Any]:
        """What is kept about a learner across their chats: the learner model, reminder, usage,
        weekly report setting and lesson modes."""
        return {
            "learner": await self.learner.export(user_id, self.state.clock()),
            "reminder": await self.reminders.export(user_id),  # None without one
            "usage": await UsageLedger(self.db).export(user_id),  # counts, no words
            "weekly_report": await self.weekly.export(user_id),  # setting, weeks sent
            "lesson_modes": [  # placement, a scene, practice: where each stands
                {
                    "chat_id": m.chat_id,
                    "kind": m.kind,
                    "step": m.step,
                    "state": m.state,
                    "started_at": m.started_at,
                }
                for m in await self.db.modes.user_modes(user_id)
            ],
        }

    async def export_learner(self, user_id: int) -> dict[str, Any]:
        """Everything kept about one learner, whatever the chat (their "download my data"):
        their long-term memories, learner model, reminder, usage, lesson modes, extraction log,
        their private chats whole and their own messages in groups."""
        memories = await self.store.memories(user_id) if self.store is not None else []
        log = await self.db.turns.extraction(user_id)
        private = []
        for chat_id in await self.db.chats.private_chats_of(user_id):
            row = await self.db.chats.chat(chat_id)
            private.append(
                {
                    "chat_id": chat_id,
                    "summary": row.summary,
                    "history": [_message(m) for m in await self.db.chats.messages(chat_id)],
                }
            )
        return {
            "exported_at": utcnow(self.state.clock()),
            "user_id": user_id,
            "memories": [_exported(m) for m in memories],
            **await self._learner_data(user_id),
            "extraction_log": None if log is None else asdict(log),
            "private_chats": private,
            "group_messages": [
                {"chat_id": chat_id, **_message(m)}
                for chat_id, m in await self.db.chats.group_messages_of(user_id)
            ],
        }


def _message(m: StoredMessage) -> dict[str, Any]:
    """One stored message as an export writes it."""
    return {
        "seq": m.seq,
        "role": m.role,
        "content": m.content,
        "user_id": m.user_id,
        "user_name": m.user_name,
        "at": m.created_at,
    }


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
        "learned": m.created_at[:10],  # the dates as /memories shows them (YYYY-MM-DD)
        "since": m.since,  # when it became true, as the learner said; None: not said
        "until": m.until,  # its last day, for a fact that ends; None: lasting
        "pinned_at": m.pinned_at,  # None: not pinned
        "asked_at": m.asked_at,  # when the tutor asked how it went, once it was over
        "history": [
            {"text": r.text, "replaced_at": r.replaced_at, "reason": r.reason} for r in m.history
        ],
    }
