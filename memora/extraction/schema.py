"""What the extraction call answers (its structured-output models) and what one call
produced (:class:`ExtractionOutcome`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from memora.learner.model import (
    ExtractedMistake,
    ExtractedWord,
    ProfileUpdate,
)
from memora.llm import (
    Usage,
)
from memora.longterm.memories import (
    MAX_MEMORY_CHARS,
    SearchWords,
)

Category = Literal["level", "goal", "preference", "difficulty", "constraint", "personal", "other"]

# Each list of the call's input has ids of its own, so an id names one memory of one list only
# (a model that read the other list's number once deleted the wrong memory): m1, m2, … for
# <existing_memories> (what `replaces` and `forget` name), t1, t2, … for <needs_terms>.
EXISTING_ID, NEEDS_TERMS_ID = "m", "t"

MAX_REPLY_CHARS = 1500  # the assistant's reply is only context: keep the call cheap
MAX_MESSAGE_CHARS = 6000  # a pasted essay: its first part carries any fact about the learner


class Rejection(StrEnum):
    """Why an extracted item was not stored (shown in /extraction; only secrets are masked)."""

    SECRET = "looks like a secret"
    TOO_LONG = f"longer than {MAX_MEMORY_CHARS} characters"
    REPEATED = "repeated in the same answer"
    IN_PROFILE = "kept in the learner profile instead"
    FORGET_REQUEST = "the message asks to forget, so nothing from it is kept"


# One step past a memory's own words: the requests where the fact should shape the answer
# though they never name it ("plan my Saturday" and a toddler). Stored beside the memory's
# search terms and indexed with them (lexically and embedded with its text).
SITUATIONS_DESCRIPTION = (
    "2-4 everyday requests or topics, each in English AND in the learner's language, where "
    "this fact should shape the tutor's answer although the request never names it, one step "
    "away from the fact: peanut allergy -> ordering food, 點餐, restaurant, 餐廳. 1-4 words "
    "each; not the fact's own key words (terms hold them)."
)


class ExtractedMemory(BaseModel):
    """One fact worth keeping, as the model states it."""

    text: str = Field(
        description="One short, self-contained statement about the user, in the user's language."
    )
    category: Category = Field(description="What kind of fact this is.")
    replaces: str | None = Field(
        default=None,
        description=(
            "The id (m1, m2, ...) in <existing_memories> of the memory this fact updates or "
            "contradicts; null if it updates none."
        ),
    )
    terms: list[str] = Field(
        default_factory=list,
        description=(
            "3-8 short search terms for this fact, in English AND in the learner's language "
            "(both when they differ), e.g. family, mother, 家人, 媽媽: the words a later "
            "message about it might use."
        ),
    )
    situations: list[str] = Field(
        default_factory=list,
        description=SITUATIONS_DESCRIPTION,
    )
    since: str | None = Field(
        default=None,
        description="When it became true, if the learner says (YYYY-MM-DD, YYYY-MM or YYYY).",
    )
    until: str | None = Field(
        default=None,
        description=(
            "The last day it is true, for a fact that ends (a trip, a course, a temporary job, "
            "a cold; YYYY-MM-DD); null for a lasting fact."
        ),
    )


class MemoryTerms(BaseModel):
    """Search terms for a stored memory that has none yet (see `build_extraction_input`)."""

    id: str = Field(description="The memory's id in <needs_terms> (t1, t2, ...).")
    terms: list[str] = Field(
        default_factory=list,
        description="3-8 short search terms for it, in English AND in the learner's language.",
    )
    situations: list[str] = Field(
        default_factory=list,
        description="2-4 everyday situations for it, as for a new memory.",
    )


class ExtractionResult(BaseModel):
    """Everything worth keeping from one user message; an empty list when nothing is."""

    memories: list[ExtractedMemory] = Field(default_factory=list)
    forget: list[str] = Field(
        default_factory=list,
        description=(
            "The ids (m1, m2, ...) in <existing_memories> of the memories the learner asks in "
            "this message to forget or delete; empty unless they ask."
        ),
    )
    terms_for: list[MemoryTerms] = Field(
        default_factory=list,
        description="Search terms for the memories listed in <needs_terms>; empty if none.",
    )


class LearnerExtractionResult(ExtractionResult):
    """The same call, wider (issue 9): also the learner's profile fields, mistakes and words."""

    profile: list[ProfileUpdate] = Field(default_factory=list)
    mistakes: list[ExtractedMistake] = Field(default_factory=list)
    vocabulary: list[ExtractedWord] = Field(default_factory=list)


Form = Literal["full", "compact"]


@dataclass(frozen=True)
class ExtractionOutcome:
    """What one extraction call produced.

    `raw` is the model's text with any rejected secret replaced by "[redacted]" (and nothing
    else: it is safe to log as it is); `memories` the accepted items; `rejected` (text, reason)
    pairs; `error` is set, and `memories` empty, when the call or its structured answer failed.
    """

    raw: str = ""
    memories: list[ExtractedMemory] = field(default_factory=list)
    rejected: list[tuple[str, Rejection]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    learner: LearnerExtractionResult | None = None  # the learner part, when it was asked for
    # Backfill: screened terms per number listed in <needs_terms> (t1 → 1), and ids answered that
    # were not listed (ignored: terms only ever go to a memory the call was shown).
    terms_for: dict[int, SearchWords] = field(default_factory=dict)
    unlisted: list[str] = field(default_factory=list)
    form: Form = "full"  # the form of the call that produced this outcome (see `extract`)
    listed: int | None = None  # how many existing memories it showed (`replaces` numbers)
    terms_listed: int = 0  # how many term-less memories it showed (the first of `needs_terms`)
    code: str | None = None  # the error code the server named, if the call failed
    # The learner asked to forget: the numbers of the listed memories they meant (m2 → 2), the
    # ids answered that name no listed memory (ignored, logged), and whether they asked at all
    # (an unknown id still says so: nothing from the message is kept).
    forget: list[int] = field(default_factory=list)
    unknown_forget: list[str] = field(default_factory=list)
    asks_to_forget: bool = False


@dataclass(frozen=True)
class ModeAsk:
    """What a lesson mode (memora.modes) adds to the extraction call about the turn it just
    had: a wider answer (a subclass of LearnerExtractionResult whose new fields have defaults,
    so an answer without them still reads), the instructions for those fields, and the input
    lines that say what the turn was (the question asked, the exercise and its answer)."""

    schema: type[LearnerExtractionResult]
    instructions: str
    input: str


def listed_number(answer: str | None, prefix: str, listed: int) -> int | None:
    """The number of the listed item an id names ("m2" → 2 with prefix "m"), or None when it
    names none of the `listed` (another list's id, a bare number, out of range)."""
    text = "".join((answer or "").split()).lower()
    digits = text.removeprefix(prefix)
    if text == digits or not digits.isdigit():
        return None
    n = int(digits)
    return n if 1 <= n <= listed else None
