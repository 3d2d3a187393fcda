"""Two weeks of a Taipei learner's rows (profile, study days, mistakes, words), for the weekly
report and what shows it."""

from __future__ import annotations

from datetime import UTC, datetime

from memora.engine import Engine
from memora.learner.model import ExtractedMistake, ExtractedWord

ALICE, BOB = 1001, 1002
# Monday 7 December 2026, 12:05 UTC = 20:05 in Taipei. "This week" is 30 Nov – 6 Dec.
MONDAY = datetime(2026, 12, 7, 12, 5, tzinfo=UTC)


def at(day: str, hour: int = 3) -> datetime:
    """A UTC time on that date (03:00 UTC is 11:00 the same day in Taipei)."""
    return datetime.fromisoformat(day).replace(hour=hour, tzinfo=UTC)


def mistake(original: str, category: str) -> ExtractedMistake:
    return ExtractedMistake.model_validate(
        {"original": original, "corrected": original + "!", "category": category, "reason": "r"}
    )


def word(term: str) -> ExtractedWord:
    return ExtractedWord(term=term, meaning="意思", example=f"I {term} today.")


async def a_fortnight(engine: Engine, user: int = ALICE) -> None:
    """Two weeks of a Taipei learner: more messages and study days this week, the same number
    of mistakes (tense falling, article new), more words, a level change and a goal."""
    s = engine.learner
    for field, value, when in (
        ("timezone", "Asia/Taipei", at("2026-11-01")),
        ("level", "B1", at("2026-11-01")),
        ("level", "B2", at("2026-12-03")),
        ("goal", "TOEIC 900", at("2026-11-01")),
        ("goal_date", "2027-01-10", at("2026-11-01")),
    ):
        await s.profiles.set_field(user, field, value, source="you", now=when)
    for day, messages, reviews in (
        ("2026-11-25", 4, 0),  # last week
        ("2026-12-01", 3, 0),  # this week
        ("2026-12-02", 2, 0),
        ("2026-12-05", 0, 1),  # a review-only day is a study day
        ("2026-12-07", 1, 0),  # today: next week's
    ):
        await s.entries.note_day(user, day, messages=messages, reviews=reviews)
    await s.add_mistakes(
        user, [mistake(f"I go {i}", "tense") for i in range(3)], now=at("2026-11-24")
    )
    await s.add_mistakes(
        user, [mistake(f"I goed {i}", "tense") for i in range(2)], now=at("2026-12-02")
    )
    await s.add_mistakes(user, [mistake("a apple", "article")], now=at("2026-12-06"))
    await s.add_words(user, [word("ubiquitous")], now=at("2026-11-26"))
    await s.add_words(user, [word("commute"), word("deadline")], now=at("2026-12-03"))
