"""The learner model's vocabulary of fields and categories, and what the extraction call returns.

The extraction call that already runs after each reply (memory extraction) answers these three
lists next to its memories: profile updates, mistakes and vocabulary. They are pydantic models so
the structured output is validated, never parsed from lines; code (not the prompt) then decides
what is kept (:mod:`memora.learner.screen`).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field

from memora.i18n import N_

MistakeCategory = Literal[
    "tense",
    "article",
    "preposition",
    "word choice",
    "word order",
    "spelling",
    "agreement",
    "punctuation",
    "other",
]
MISTAKE_CATEGORIES: tuple[str, ...] = get_args(MistakeCategory)

ProfileField = Literal[
    "level",
    "scores",
    "goal",
    "goal_date",
    "explanation_language",
    "interests",
    "study_time",
    "timezone",
]
PROFILE_FIELDS: tuple[str, ...] = get_args(ProfileField)

CEFR_LEVELS = ("A1", "A2", "B1", "B2", "C1", "C2")

FIELD_HELP: dict[str, str] = {
    "level": N_("CEFR level: A1, A2, B1, B2, C1 or C2"),
    "scores": N_("exam scores, e.g. TOEIC 850, IELTS 6.5"),
    "goal": N_("what you are working towards, e.g. TOEIC 900"),
    "goal_date": N_("the goal's date, YYYY-MM-DD"),
    "explanation_language": N_("the language explanations should be in, e.g. 繁體中文"),
    "interests": N_("topics you like, e.g. travel, football"),
    "study_time": N_("when you study, e.g. weekdays 20:00"),
    "timezone": N_("an IANA time zone, e.g. Asia/Taipei"),
}


class ProfileUpdate(BaseModel):
    """One profile field the learner stated in this message (a new value replaces the old)."""

    field: ProfileField = Field(description="Which profile field the learner stated.")
    value: str = Field(
        description=(
            "The value as stated: a CEFR level for level, YYYY-MM-DD for goal_date, an IANA "
            "time zone for timezone, a short phrase otherwise."
        )
    )


class ExtractedMistake(BaseModel):
    """One error in the learner's own English in this message."""

    original: str = Field(description="The learner's words with the error, copied exactly.")
    corrected: str = Field(description="The same words, corrected.")
    category: MistakeCategory = Field(description="The kind of error.")
    reason: str = Field(description="One short line explaining the correction.")


class ExtractedWord(BaseModel):
    """A word or phrase the learner asked about or was taught in this turn."""

    term: str = Field(description="The English word or phrase, in its base form.")
    meaning: str = Field(description="A short meaning in the learner's explanation language.")
    example: str = Field(description="The example sentence from the conversation.")


LEARNER_INSTRUCTIONS = """\

You also keep the learner's profile, mistake log and vocabulary list (return empty lists when \
there is nothing):
- profile: fields the learner states about themselves in this message: level (CEFR A1-C2 only), \
scores (exam scores such as "TOEIC 850"), goal (what they are working towards), goal_date \
(YYYY-MM-DD, absolute), explanation_language (the language they want explanations in), \
interests, study_time, timezone (IANA name such as Asia/Taipei). Never guess a level. A fact \
that fits a profile field goes ONLY in profile, never also in memories.
- mistakes: real errors in the learner's own English sentences in this message: original (their \
words, copied exactly), corrected, category (tense, article, preposition, word choice, word \
order, spelling, agreement, punctuation, other), reason (one short line). Not a mistake: a \
message in Chinese, a one-word reply, text the learner quotes from someone else, informal \
chat style.
- vocabulary: English words or phrases the learner asked about or the assistant taught in this \
turn: term (base form), meaning (short, in the learner's explanation language), example (the \
sentence from the conversation)."""
