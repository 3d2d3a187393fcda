"""The learner model in SQLite, as one object: profile (with history), mistakes, vocabulary, review
cards, days, and the export of all of it. Every method names its user, and every query filters
on it. The tables live in the same database as the conversations (same migrations, same WAL,
same /forgetme transaction).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memora.errors import AlreadyGraded as AlreadyGraded  # re-exported, like the two below
from memora.errors import CardGone as CardGone
from memora.errors import NotYourCard as NotYourCard
from memora.learner import review
from memora.learner.cards import CardStore, Graded, ReviewCard
from memora.learner.entries import EntryStore
from memora.learner.profile_store import Change, ProfileStore

__all__ = [
    "AlreadyGraded",
    "CardGone",
    "Change",
    "Graded",
    "LearnerStore",
    "NotYourCard",
    "ReviewCard",
]


class LearnerStore(ProfileStore, EntryStore, CardStore):
    """Everything the learner model keeps about its users."""

    async def export(self, user_id: int, now: datetime) -> dict[str, Any]:
        """Everything the learner model holds about one user, as JSON-able data."""
        profile = await self.profile(user_id, now)
        cards = await self.cards(user_id)
        reviews = await self._rows(
            "SELECT card_id, rating, at FROM learner_reviews WHERE user_id=? ORDER BY id",
            (user_id,),
        )
        return {
            "profile": {k: v.__dict__ for k, v in profile.fields.items()},
            "recurring_difficulties": [d.__dict__ for d in profile.difficulties],
            "profile_history": [c.__dict__ for c in await self.history(user_id)],
            "mistakes": await self.mistakes(user_id, limit=1_000_000),
            "vocabulary": await self.words(user_id, limit=1_000_000),
            "review_cards": [
                {
                    "id": c.id,
                    "kind": c.kind,
                    "front": c.front,
                    "due": review.iso(c.due),
                    "reps": c.reps,
                    "fsrs": json.loads(c.state),
                }
                for c in cards
            ],
            "reviews": [dict(r) for r in reviews],
            "days": [
                {"day": d, "messages": m, "reviews": r} for d, m, r in await self.days(user_id)
            ],
            "app_language": await self.app_language(user_id),
        }

    async def app_language(self, user_id: int) -> str | None:
        """The language the learner's app last named (Telegram's language_code), if any."""
        row = await self._one("SELECT lang FROM learner_app_language WHERE user_id=?", (user_id,))
        return None if row is None else str(row[0])

    async def set_app_language(self, user_id: int, lang: str, now: datetime) -> None:
        """Keep the app's language for the messages no message prompts (reminders, reports)."""
        await self._tx(
            [
                (
                    "INSERT INTO learner_app_language(user_id, lang, updated_at) VALUES (?,?,?) "
                    "ON CONFLICT(user_id) DO UPDATE SET lang=excluded.lang, "
                    "updated_at=excluded.updated_at",
                    (user_id, lang, review.iso(now)),
                )
            ]
        )
