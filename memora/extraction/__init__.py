"""Memory extraction: a second LLM call, with structured output, that decides what to remember.

It runs after the reply has been sent, on the user's message only (the reply is context). The
model answers an :class:`ExtractionResult` (wider with the learner model: profile, mistakes,
words; and the memories the learner asks to forget); code then drops what must never be stored
(:mod:`.screening`), and :func:`apply` writes the rest to the user's long-term store in one
batch: an item that names an existing memory in `replaces` supersedes it, the others are added
(the store drops duplicates).

- :mod:`.schema` — what the call answers and what one call produced;
- :mod:`.prompts` — its instructions (full and compact) and its input message;
- :mod:`.call` — the call, asked again once when its answer is unusable;
- :mod:`.reading` — reading near shapes of the answer;
- :mod:`.screening` — what code refuses; :mod:`.apply` — the writes;
- :mod:`.run` — one answered turn's extraction from start to end (:class:`TurnExtraction`):
  the call, the learner model, the lesson's judgement, forgetting in words, the writes, the log.
"""

from memora.extraction.apply import apply, apply_terms
from memora.extraction.call import extract, needing_terms
from memora.extraction.prompts import (
    COMPACT_INSTRUCTIONS,
    COMPACT_LEARNER_INSTRUCTIONS,
    EXTRACTION_INSTRUCTIONS,
    MAX_ASKS,
    MAX_BACKFILL,
    TERMS_FOR_INSTRUCTIONS,
    ExtractionInput,
    build_extraction_input,
    fixed_instructions,
)
from memora.extraction.run import Answered, LearnerSide, LessonSide, TurnExtraction
from memora.extraction.schema import (
    SITUATIONS_DESCRIPTION,
    Category,
    ExtractedMemory,
    ExtractionOutcome,
    ExtractionResult,
    LearnerExtractionResult,
    MemoryTerms,
    ModeAsk,
    Rejection,
)
from memora.extraction.screening import profile_first
from memora.privacy.secretfilter import looks_secret

__all__ = [
    "COMPACT_INSTRUCTIONS",
    "COMPACT_LEARNER_INSTRUCTIONS",
    "EXTRACTION_INSTRUCTIONS",
    "MAX_ASKS",
    "MAX_BACKFILL",
    "SITUATIONS_DESCRIPTION",
    "TERMS_FOR_INSTRUCTIONS",
    "Answered",
    "Category",
    "ExtractedMemory",
    "ExtractionInput",
    "ExtractionOutcome",
    "ExtractionResult",
    "LearnerExtractionResult",
    "LearnerSide",
    "LessonSide",
    "MemoryTerms",
    "ModeAsk",
    "Rejection",
    "TurnExtraction",
    "apply",
    "apply_terms",
    "build_extraction_input",
    "extract",
    "fixed_instructions",
    "looks_secret",
    "needing_terms",
    "profile_first",
]
