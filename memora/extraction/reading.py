"""Reading the model's answer leniently where that is safe: near shapes small models write."""

from __future__ import annotations

import re
from typing import Any

from memora.extraction.schema import (
    Category,
    ExtractionResult,
    LearnerExtractionResult,
)
from memora.llm import (
    Parsed,
    loads_lenient,
)

REFUSED = "the model refused"
RETRY_PROMPT = (
    "That answer could not be used: {problem}. Answer again with only the JSON object "
    '{{"memories": [...]}} described in the instructions, and nothing else.'
)


def read_answer(
    answer: Parsed[ExtractionResult], schema: type[ExtractionResult] = ExtractionResult
) -> tuple[ExtractionResult | None, str | None]:
    """The answer as an ExtractionResult, read leniently where that is safe, or why not.

    Beyond what the LLM seam already forgives (code fences, prose around the JSON, trailing
    commas), small models answer the right content in a near shape: a bare list of memories,
    another key than "memories", plain strings instead of objects, a category outside the
    list. Those are read as meant (a string is a memory of category "other", an unknown
    category becomes "other"); anything else is a problem, and the caller asks again.
    """
    if answer.parsed is not None:
        return answer.parsed, None
    if answer.problem == REFUSED or not answer.text.strip():
        return None, answer.problem or "the model returned no structured answer"
    try:
        value = loads_lenient(answer.text)
        return schema.model_validate(_near_shape(value)), None
    except ValueError:  # JSONDecodeError and ValidationError are ValueErrors
        return None, answer.problem or "the answer does not fit the schema"


_CATEGORIES = frozenset(Category.__args__)  # type: ignore[attr-defined]
_RESULT_KEYS = frozenset(LearnerExtractionResult.model_fields)
_TERM_SPLIT = re.compile(r"\s*[,，、;；/]\s*")


def _near_shape(value: Any) -> Any:
    """{"memories": [...]} from the near shapes `read_answer` accepts; anything else unchanged."""
    if isinstance(value, dict) and not value.keys() & _RESULT_KEYS:
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) == 1:
            value = {"memories": lists[0]}
    if isinstance(value, list):
        value = {"memories": value}
    if not isinstance(value, dict):
        return value
    if isinstance(value.get("memories"), list):
        items = []
        for item in value["memories"]:
            if isinstance(item, str):
                item = {"text": item, "category": "other"}
            elif isinstance(item, dict) and item.get("category") not in _CATEGORIES:
                item = {**item, "category": "other"}
            if isinstance(item, dict) and isinstance(item.get("replaces"), int):
                item = {**item, "replaces": _as_id(item["replaces"])}
            items.append(_listed_terms(item))
        value = {**value, "memories": items}
    if isinstance(value.get("forget"), int | str):  # one id where a list was asked for
        value = {**value, "forget": [value["forget"]]}
    if isinstance(value.get("forget"), list):  # a bare number is kept as text: no id, ignored
        value = {**value, "forget": [_as_id(v) for v in value["forget"]]}
    if isinstance(value.get("terms_for"), list):
        value = {
            **value,
            "terms_for": [
                _listed_terms({**t, "id": _as_id(t.get("id"))} if isinstance(t, dict) else t)
                for t in value["terms_for"]
            ],
        }
    return value


def _listed_terms(item: Any) -> Any:
    """An item's terms and situations as lists: "a, b, c" from a small model is split; anything
    else dropped."""
    if not isinstance(item, dict):
        return item
    for key in ("terms", "situations"):
        if not isinstance(item.get(key, []), list):
            words = item[key]
            item = {**item, key: _TERM_SPLIT.split(words) if isinstance(words, str) else []}
    return item


def _as_id(value: Any) -> Any:
    """A bare number where an id was asked for, as text ("2"): it names no listed memory, so it
    is ignored (and logged) rather than making the whole answer unusable."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value
