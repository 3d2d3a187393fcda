"""The turn_cost benchmark's plumbing: its scripted model answers what the product asks in the
product's own schema, and its report prices what the ledger counted at the stated prices."""

from __future__ import annotations

from benchmarks import turn_cost
from memora.extraction import LearnerExtractionResult
from memora.llm.structured import json_schema
from memora.usage import Call
from tests.support.fake_openai import FakeRequest


def extraction_request(message: str) -> FakeRequest:
    return FakeRequest(
        method="POST",
        path="/v1/responses",
        body={},
        kind="structured",
        schema=json_schema(LearnerExtractionResult),
        messages=[{"role": "user", "content": f"<user_message>\n{message}\n</user_message>"}],
    )


def test_the_scripted_extraction_fits_the_schema_and_keeps_what_was_said() -> None:
    fact = LearnerExtractionResult.model_validate(
        turn_cost.extraction_answer(extraction_request("Hi! I'm Mei, a nurse in Taipei."))
    )
    slip = LearnerExtractionResult.model_validate(
        turn_cost.extraction_answer(extraction_request("Yesterday I goed to work."))
    )
    nothing = LearnerExtractionResult.model_validate(
        turn_cost.extraction_answer(extraction_request("Thank you!"))
    )
    assert [m.text for m in fact.memories] == ["The user works as a nurse in Taipei."]
    assert [m.corrected for m in slip.mistakes] == ["I went"]
    assert nothing.memories == [] and nothing.mistakes == []


def test_the_report_prices_each_call_per_turn() -> None:
    calls = {
        "reply": Call("reply", turn_cost.MODEL, 8_000, 1_000),
        "extraction": Call("extraction", turn_cost.MODEL, 30_000, 500, cached_tokens=25_600),
        "summary": Call("summary", turn_cost.MODEL, 4_000, 1_500, reasoning_tokens=0),
    }
    after = turn_cost.Figures("after", 10, calls)
    before = turn_cost.Figures("before", 10, {**calls, "extraction": Call("extraction", "x")})
    text = turn_cost.report(before, after)
    # extraction per turn: 440 input at 0.25, 2,560 cached at 0.025, 50 output at 2.00 (per 1M)
    expected = (440 * 0.25 + 2_560 * 0.025 + 50 * 2.0) / 1e6
    assert f"{expected:.6f}" in text
    assert "$0.25 / 1M input, $0.025 / 1M cached input, $2.00 / 1M output" in text
    assert "cached share of input" in text
