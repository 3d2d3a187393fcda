"""Every schema Memora can send for structured output, against the strict subset OpenAI documents
and Azure OpenAI's refusal of `default` (tests/support/provider_rules.py), as the fake server
enforces them: the extraction call in each of its shapes and in each lesson mode, through the real
SDK on both APIs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from memora.extraction import (
    ExtractionInput,
    ExtractionResult,
    LearnerExtractionResult,
    ModeAsk,
    extract,
)
from memora.llm import Api, OpenAILLM
from memora.llm.structured import response_format, text_format
from memora.modes import LESSONS
from memora.modes.roleplay import SCENES
from memora.storage import ModeRow
from tests.support.fake_openai import FakeOpenAI
from tests.support.provider_rules import strict_schema_problems

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def mode_at(kind: str, step: int, state: dict[str, Any]) -> ModeRow:
    return ModeRow(1, 1, kind, step, state, NOW.isoformat())


# A turn inside each lesson mode whose extraction asks the mode's own question.
LESSON_TURNS = {
    "placement": mode_at("placement", 2, {"level": "B1"}),
    "roleplay": mode_at("roleplay", 2, {"scene": SCENES[0].key}),
    "practice": mode_at("practice", 1, {"items": [{"prompt": "Fix: I goed", "expected": "went"}]}),
}


def lesson_asks() -> dict[str, ModeAsk]:
    asks = {kind: LESSONS[kind].ask(row) for kind, row in LESSON_TURNS.items()}
    return {kind: ask for kind, ask in asks.items() if ask is not None}


@pytest.fixture
def azure_rules() -> Iterator[FakeOpenAI]:
    """OpenAI's strict subset with Azure's refusal of `default`, on the plain /v1 paths (the
    Azure client itself is driven in tests/llm/test_provider_profiles.py)."""
    with FakeOpenAI() as server:
        server.like_openai()
        server.schema_refuses_default = True
        yield server


def test_every_lesson_mode_asks_its_own_schema() -> None:
    assert set(LESSON_TURNS) == set(LESSONS)  # a new mode needs a turn here
    assert {kind: ask.schema for kind, ask in lesson_asks().items()}.keys() == set(LESSONS)


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
async def test_every_schema_the_product_sends_is_in_the_strict_subset(
    azure_rules: FakeOpenAI, api: Api
) -> None:
    llm = OpenAILLM.for_api(api, model="gpt-4.1-mini", api_key="k", base_url=azure_rules.base_url)
    shapes: list[tuple[list[str] | None, ModeAsk | None]] = [(None, None), ([], None)]
    shapes += [([], ask) for ask in lesson_asks().values()]
    try:
        for profile, ask in shapes:
            outcome = await extract(
                llm,
                ExtractionInput(
                    "I goed to the market yesterday.",
                    "You went to the market!",
                    [],
                    NOW,
                    profile_lines=profile,
                ),
                mode=ask,
            )
            assert outcome.error is None
    finally:
        await llm.aclose()
    sent = azure_rules.requests_of("structured")
    names = {r.schema_name for r in sent}
    wanted = {ExtractionResult.__name__, LearnerExtractionResult.__name__}
    assert names == wanted | {ask.schema.__name__ for ask in lesson_asks().values()}
    for req in sent:
        assert req.schema is not None
        assert strict_schema_problems(req.schema, refuses_default=True) == [], req.schema_name
    # none refused, none moved down to JSON mode
    assert [r.response_format for r in sent] == ["json_schema"] * len(shapes)


def test_the_wire_forms_of_every_schema_are_strict() -> None:
    schemas = [ExtractionResult, LearnerExtractionResult]
    schemas += [ask.schema for ask in lesson_asks().values()]
    for schema in schemas:
        for wire in (text_format(schema), response_format(schema)["json_schema"]):
            assert wire["strict"] is True
            assert strict_schema_problems(wire["schema"], refuses_default=True) == []


class Loose(BaseModel):
    note: str = ""
    tags: list[str] = []


@pytest.mark.parametrize(
    ("schema", "azure", "said"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "string"}}},
            False,
            "additionalProperties",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "required": [],
                "additionalProperties": False,
            },
            False,
            "Missing 'a'",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "minLength": 2}},
                "required": ["a"],
                "additionalProperties": False,
            },
            False,
            "'minLength' is not permitted",
        ),
        ({"anyOf": [{"type": "object"}]}, False, "root schema must be an object"),
        (text_format(Loose)["schema"], True, "'default' is not permitted"),
    ],
)
def test_the_fake_refuses_what_the_providers_document(
    schema: dict[str, Any], azure: bool, said: str
) -> None:
    problems = strict_schema_problems(schema, refuses_default=azure)
    assert any(said in p for p in problems), problems


def test_openai_takes_a_default_that_azure_refuses() -> None:
    schema = text_format(Loose)["schema"]
    assert strict_schema_problems(schema) == []
    assert strict_schema_problems(schema, refuses_default=True) != []
