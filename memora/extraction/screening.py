"""What code, not the model, refuses before anything is stored: secrets, over-long and repeated
items, a memory the profile already holds, terms for memories the call was not shown."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence, Set
from typing import Any

from pydantic import BaseModel

from memora.extraction.schema import (
    NEEDS_TERMS_ID,
    ExtractedMemory,
    ExtractionResult,
    LearnerExtractionResult,
    Rejection,
    listed_number,
)
from memora.longterm.dedupe import normalise_text
from memora.longterm.memories import (
    MAX_MEMORY_CHARS,
    MAX_SITUATIONS,
    SearchWords,
    clean_terms,
)
from memora.privacy.secretfilter import looks_secret

log = logging.getLogger(__name__)


def redact(raw: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if not secret:
            continue
        escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
        raw = raw.replace(secret, "[redacted]").replace(escaped, "[redacted]")
    return raw


def screen_memories(
    result: ExtractionResult,
) -> tuple[list[ExtractedMemory], list[tuple[str, Rejection]]]:
    accepted: list[ExtractedMemory] = []
    rejected: list[tuple[str, Rejection]] = []
    seen: set[str] = set()
    for item in result.memories:
        text = " ".join(item.text.split())
        key = normalise_text(text)
        if not key:
            continue  # nothing to keep and nothing worth reporting
        if looks_secret(item.text):
            rejected.append((item.text, Rejection.SECRET))
        elif len(text) > MAX_MEMORY_CHARS:
            rejected.append((item.text, Rejection.TOO_LONG))
        elif key in seen:
            rejected.append((item.text, Rejection.REPEATED))
        else:
            seen.add(key)
            words, secrets = screened_words(item.terms, item.situations)
            rejected += secrets
            item = item.model_copy(
                update={"terms": list(words.terms), "situations": list(words.situations)}
            )
            accepted.append(item.model_copy(update={"text": text}))
    return accepted, rejected


def screened_words(
    terms: Sequence[str], situations: Sequence[str]
) -> tuple[SearchWords, list[tuple[str, Rejection]]]:
    """Terms and situations cleaned (clean_terms), secret-looking ones dropped and reported."""
    words = (clean_terms(terms), clean_terms(situations, MAX_SITUATIONS))
    secrets = [(t, Rejection.SECRET) for ws in words for t in ws if looks_secret(t)]
    terms, situations = (tuple(t for t in ws if not looks_secret(t)) for ws in words)
    return SearchWords(terms, situations), secrets


def screen_terms_for(
    result: ExtractionResult, listed: int
) -> tuple[dict[int, SearchWords], list[str], list[tuple[str, Rejection]]]:
    """The backfill's terms by listed number (its id t2 → 2), cleaned like a new memory's
    (secret-looking ones dropped and redacted); an id that names no listed memory (another
    list's, a bare number) is ignored and reported, a repeated one keeps its first answer."""
    found: dict[int, SearchWords] = {}
    unlisted: list[str] = []
    rejected: list[tuple[str, Rejection]] = []
    for item in result.terms_for:
        n = listed_number(item.id, NEEDS_TERMS_ID, listed)
        if n is None:
            log.info("ignored search terms for %r: the call listed t1-t%d", item.id, listed)
            unlisted.append(item.id)
            continue
        words, secrets = screened_words(item.terms, item.situations)
        rejected += secrets
        if words and n not in found:
            found[n] = words
    return found, unlisted, rejected


def masked_unusable(raw: str) -> str:
    """An unusable answer as the log may keep it: nothing was screened, so no possible secret."""
    if looks_secret(raw):
        return "[redacted: the unusable answer looked like it held a secret]"
    return raw


def screen_learner(
    found: LearnerExtractionResult,
) -> tuple[LearnerExtractionResult, list[tuple[str, Rejection]]]:
    """Secrets never reach the learner tables (nor the log: they are redacted like memories)."""
    rejected: list[tuple[str, Rejection]] = []

    def clean(items: Sequence[BaseModel], *fields: str) -> list[Any]:
        kept = []
        for item in items:
            texts = [str(getattr(item, f)) for f in fields]
            if looks_secret(" ".join(texts)):
                rejected.extend((t, Rejection.SECRET) for t in texts if t)
            else:
                kept.append(item)
        return kept

    screened = found.model_copy(
        update={
            "profile": clean(found.profile, "value"),
            "mistakes": clean(found.mistakes, "original", "corrected", "reason"),
            "vocabulary": clean(found.vocabulary, "term", "meaning", "example"),
        }
    )
    return screened, rejected


# Memory categories a profile field already holds: with a profile update of that field in the
# same answer, the memory would be the same fact stored twice (docs/learner-model.md, "Profile
# or memory?").
_PROFILE_HOLDS = {"level": {"level", "scores"}, "goal": {"goal", "goal_date"}}


def profile_first(
    memories: Sequence[ExtractedMemory], held: Set[str]
) -> tuple[list[ExtractedMemory], list[tuple[str, Rejection]]]:
    """The memories to store once the profile has taken this answer's updates: a level or goal
    memory is dropped only when the profile now holds a field of its kind from the same answer
    (`held`: the fields the learner part wrote, or found already holding that value). A profile
    update that code refused (not a CEFR level, a date in the past) drops nothing: the fact is
    then kept as a memory, never lost."""
    kept, moved = [], []
    for m in memories:
        if held & _PROFILE_HOLDS.get(m.category, set()):
            moved.append((m.text, Rejection.IN_PROFILE))
        else:
            kept.append(m)
    return kept, moved
