"""The learner model as the engine and the commands use it (no LLM call anywhere in here).

- :meth:`Learner.context_lines` — the profile block of every reply's context;
- :meth:`Learner.apply` — what the after-reply extraction call found (profile fields, mistakes,
  vocabulary), screened by code, then stored;
- :meth:`Learner.note_message` — one message on the learner's calendar (days, streak, weeks);
- :meth:`Learner.reminder_facts` — the few figures a practice reminder is written from;
- :meth:`Learner.language` — the language the bot speaks to the learner (reminders and the
  weekly report, which run without a message, ask it here);
- :meth:`Learner.export` — everything the learner model holds about one user.

Its named parts are the stored profile (`profiles`), the logs of mistakes, words and days
(`entries`), and the review cards (`cards`); their SQL is in memora/storage/learner_*.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from memora.i18n import resolve
from memora.learner import progress, review
from memora.learner.cards import Cards
from memora.learner.model import ExtractedMistake, ExtractedWord, ProfileUpdate
from memora.learner.profile import (
    RECURRING_DAYS,
    RECURRING_MIN,
    Difficulty,
    FieldValue,
    Profile,
    ProfileError,
    clean_value,
    context_lines,
    goal_countdown,
    goal_over,
)
from memora.learner.screen import screen, vocab_key
from memora.storage import Database
from memora.storage.learner_cards import CardQueries
from memora.storage.learner_entries import EntryQueries
from memora.storage.learner_profile import ProfileQueries
from memora.storage.learner_schema import iso

LANGUAGE_FIELD = "bot_language"
"""The learner_profile row holding a /language choice: exported and forgotten with the profile,
never shown to the model (only PROFILE_FIELDS reach the context)."""


@dataclass(frozen=True)
class Applied:
    """What one extraction's learner part changed, and what code refused."""

    profile: list[str] = field(default_factory=list)  # "level: B2"
    mistakes: int = 0
    words: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)
    # The profile fields that now hold what this answer said (written, or already that value)
    held: frozenset[str] = frozenset()

    def lines(self) -> list[str]:
        out = [f"profile: {p}" for p in self.profile]
        if self.mistakes:
            out.append(f"mistakes logged: {self.mistakes}")
        if self.words:
            out.append(f"words added: {self.words}")
        out += [f"rejected ({why}): {what}" for what, why in self.rejected]
        return out


@dataclass(frozen=True)
class ReminderFacts:
    """What a practice reminder can say about the learner, in their time zone."""

    timezone: str
    due_cards: int
    next_due: datetime | None
    goal_countdown: str | None
    difficulty: str | None  # the most frequent recurring mistake category, if any
    streak: int


class Learner:
    """Profile, mistakes, vocabulary, review and progress for every user of one database."""

    def __init__(self, db: Database) -> None:
        self.profiles = ProfileQueries(db.connection)
        self.entries = EntryQueries(db.connection)
        self.cards = Cards(CardQueries(db.connection))
        self._app_languages: dict[int, str] = {}  # user → the app language last stored

    async def profile(self, user_id: int, now: datetime) -> Profile:
        """The user's stored fields, and the mistake categories that recur lately."""
        fields = {f: FieldValue(v, s, at) for f, v, s, at in await self.profiles.fields(user_id)}
        since = now - timedelta(days=RECURRING_DAYS)
        recurring = await self.profiles.categories(user_id, since, RECURRING_MIN)
        return Profile(user_id, fields, tuple(Difficulty(c, n) for c, n in recurring))

    async def context_lines(
        self, user_id: int, now: datetime, *, teaching_only: bool = False
    ) -> list[str]:
        profile = await self.profile(user_id, now)
        return context_lines(profile, now, teaching_only=teaching_only)

    async def apply(
        self,
        user_id: int,
        *,
        message: str,
        profile: list[ProfileUpdate],
        mistakes: list[ExtractedMistake],
        words: list[ExtractedWord],
        now: datetime,
        chat_id: int | None = None,
        message_id: int | None = None,
    ) -> Applied:
        """Store what passes the screens; never raises on a bad value from the model."""
        changed: list[str] = []
        rejected: list[tuple[str, str]] = []
        held: set[str] = set()
        for update in profile:
            try:
                value = clean_value(update.field, update.value)
            except ProfileError as exc:
                rejected.append((f"profile {update.field}", str(exc)))
                continue
            if value is not None:
                held.add(update.field)
            if await self.profiles.set_field(
                user_id,
                update.field,
                value,
                source="conversation",
                now=now,
                chat_id=chat_id,
                message_id=message_id,
            ):
                changed.append(f"{update.field}: {value}")
        kept = screen(mistakes, words, message)
        n_mistakes = await self.add_mistakes(
            user_id, kept.mistakes, now=now, chat_id=chat_id, message_id=message_id
        )
        n_words = await self.add_words(
            user_id, kept.words, now=now, chat_id=chat_id, message_id=message_id
        )
        return Applied(changed, n_mistakes, n_words, rejected + kept.rejected, frozenset(held))

    async def add_mistakes(
        self,
        user_id: int,
        mistakes: Sequence[ExtractedMistake],
        *,
        now: datetime,
        chat_id: int | None = None,
        message_id: int | None = None,
    ) -> int:
        """Log mistakes (each with a new review card); the same wrong sentence is logged once."""
        new = review.new_card(now)
        added = 0
        for m in mistakes:
            added += await self.entries.add_mistake(
                user_id,
                (m.original, m.corrected, m.category, m.reason),
                (new.state, new.due),
                now=now,
                chat_id=chat_id,
                message_id=message_id,
            )
        return added

    async def add_words(
        self,
        user_id: int,
        words: Sequence[ExtractedWord],
        *,
        now: datetime,
        chat_id: int | None = None,
        message_id: int | None = None,
    ) -> int:
        """Add words (each with a new review card), keyed by their lemmas: a word already known
        in any inflection is kept as it was."""
        new = review.new_card(now)
        added = 0
        for w in words:
            added += await self.entries.add_word(
                user_id,
                (
                    vocab_key(w.term),
                    " ".join(w.term.split()),
                    " ".join(w.meaning.split()),
                    " ".join(w.example.split()),
                ),
                (new.state, new.due),
                now=now,
                chat_id=chat_id,
                message_id=message_id,
            )
        return added

    async def note_message(self, user_id: int, now: datetime) -> None:
        profile = await self.profile(user_id, now)
        await self.entries.note_day(user_id, profile.today(now).isoformat(), messages=1)

    async def note_review(self, user_id: int, now: datetime) -> None:
        profile = await self.profile(user_id, now)
        await self.entries.note_day(user_id, profile.today(now).isoformat(), reviews=1)

    async def language(self, user_id: int, now: datetime, platform: str | None = None) -> str:
        """The language the bot speaks to this learner (see memora.i18n.resolve): their
        /language choice, else their explanation language, else `platform`'s hint (none for a
        background job such as a reminder: the hint the learner's app gave last is kept for it),
        else English."""
        if platform:
            if self._app_languages.get(user_id) != platform:  # written once per change
                await self.profiles.set_app_language(user_id, platform, now)
                self._app_languages[user_id] = platform
        else:
            platform = await self.profiles.app_language(user_id)
        profile = await self.profile(user_id, now)
        return resolve(profile.get(LANGUAGE_FIELD), profile.get("explanation_language"), platform)

    def forget_app_language(self, user_id: int) -> None:
        """Drop this process's note of the user's app language (after /forgetme)."""
        self._app_languages.pop(user_id, None)

    async def timezone(self, user_id: int, now: datetime) -> str:
        return (await self.profile(user_id, now)).get("timezone") or "UTC"

    async def reminder_facts(self, user_id: int, now: datetime) -> ReminderFacts:
        profile = await self.profile(user_id, now)
        days = [d for d, m, r in await self.entries.days(user_id) if m or r]
        return ReminderFacts(
            timezone=profile.get("timezone") or "UTC",
            due_cards=await self.cards.due_count(user_id, now),
            next_due=await self.cards.next_due(user_id),
            # a goal that is over is not a reason to practise today: no line for it
            goal_countdown=None if goal_over(profile, now) else goal_countdown(profile, now),
            difficulty=profile.difficulties[0].category if profile.difficulties else None,
            streak=progress.streak(days, profile.today(now)),
        )

    async def progress(self, user_id: int, now: datetime) -> progress.Progress:
        profile = await self.profile(user_id, now)
        levels = [
            (c.at, c.new_value)
            for c in await self.profiles.history(user_id, "level")
            if c.undone_at is None and c.new_value
        ]
        cards = await self.cards.cards(user_id)
        return progress.compute(
            profile=profile,
            now=now,
            level_changes=[(at, v) for at, v in levels if v],
            days=await self.entries.days(user_id),
            mistakes=await self.entries.mistake_dates(user_id),
            word_states=[c.state for c in cards if c.kind == "word"],
            cards=len(cards),
            due_now=await self.cards.due_count(user_id, now),
            next_due=await self.cards.next_due(user_id),
        )

    async def export(self, user_id: int, now: datetime) -> dict[str, Any]:
        """Everything the learner model holds about one user, as JSON-able data."""
        profile = await self.profile(user_id, now)
        cards = await self.cards.cards(user_id)
        return {
            "profile": {k: v.__dict__ for k, v in profile.fields.items()},
            "recurring_difficulties": [d.__dict__ for d in profile.difficulties],
            "profile_history": [c.__dict__ for c in await self.profiles.history(user_id)],
            "mistakes": await self.entries.mistakes(user_id, limit=1_000_000),
            "vocabulary": await self.entries.words(user_id, limit=1_000_000),
            "review_cards": [
                {
                    "id": c.id,
                    "kind": c.kind,
                    "front": c.front,
                    "due": iso(c.due),
                    "reps": c.reps,
                    "fsrs": json.loads(c.state),
                }
                for c in cards
            ],
            "reviews": await self.cards.rows.reviews(user_id),
            "days": [
                {"day": d, "messages": m, "reviews": r}
                for d, m, r in await self.entries.days(user_id)
            ],
            "app_language": await self.profiles.app_language(user_id),
        }
