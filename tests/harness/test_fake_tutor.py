"""The tutor-playing fake model answers each lesson mode's extraction fields sensibly."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from memora.extraction import LearnerExtractionResult
from memora.modes.placement import PlacementResult
from memora.modes.practice import PracticeResult
from memora.shortterm.instructions import MODE_BLOCK
from tests.support.fake_openai import FakeRequest
from tests.support.fake_tutor import ESTIMATE, tutor_responder


class Scene(BaseModel):
    scene_over: bool = False


class Exercise(BaseModel):
    grade: int = Field(default=1, ge=1, le=4)
    verdict: Literal["wrong", "right"] = "wrong"


class Practice(BaseModel):
    scene: Scene | None = None
    exercise: Exercise | None = None


def structured(schema: dict[str, object], message: str, extra: str = "") -> object:
    text = f"<user_message>\n{message}\n</user_message>{extra}"
    req = FakeRequest("POST", "/v1/responses", {}, "structured", schema=schema)
    req.messages = [{"role": "user", "content": text}]
    return tutor_responder(req)


def test_placement_judgement_and_the_estimate_after_the_last_question() -> None:
    schema = PlacementResult.model_json_schema()
    right = PlacementResult.model_validate(structured(schema, "it is right"))
    assert right.placement and right.placement.answer_correct is True
    assert right.placement.estimate is None
    wrong = PlacementResult.model_validate(structured(schema, "no idea"))
    assert wrong.placement and wrong.placement.answer_correct is False
    last = structured(schema, "right", "\n<placement>it was the last question</placement>")
    done = PlacementResult.model_validate(last)
    assert done.placement and done.placement.estimate == ESTIMATE and done.placement.reason


def test_scene_over_and_grade_fields_get_answers_of_their_type() -> None:
    schema = Practice.model_json_schema()
    over = Practice.model_validate(structured(schema, "Thank you, bye!"))
    assert over.scene and over.scene.scene_over is True
    assert over.exercise and over.exercise.grade == 1
    good = Practice.model_validate(structured(schema, "the right answer"))
    assert good.scene and good.scene.scene_over is False
    assert good.exercise and good.exercise.grade == 4


def test_a_reply_follows_the_lesson_block() -> None:
    req = FakeRequest("POST", "/v1/responses", {}, "reply")
    block = MODE_BLOCK + "Ask question 1 of 8: a grammar question at B1."
    req.messages = [{"role": "developer", "content": block}, {"role": "user", "content": "go"}]
    assert str(tutor_responder(req)).startswith("Question 1: (grammar, B1)")
    req.messages = [{"role": "user", "content": "hello"}]
    assert tutor_responder(req) == "Echo: hello"


def test_outside_lessons_it_logs_its_known_slip_and_the_word_asked_about() -> None:
    schema = LearnerExtractionResult.model_json_schema()
    slip = LearnerExtractionResult.model_validate(
        structured(schema, "Yesterday I goed to the park.")
    )
    assert [(m.original, m.corrected) for m in slip.mistakes] == [
        ("I goed to the park", "I went to the park")
    ]
    word = LearnerExtractionResult.model_validate(structured(schema, "What does 'itinerary' mean?"))
    assert [w.term for w in word.vocabulary] == ["itinerary"] and not word.mistakes


def test_a_practice_answer_is_graded_against_the_expected_answer() -> None:
    schema = PracticeResult.model_json_schema()
    exercise = "\n<practice>\nExercise: Fill the gap\nExpected answer: itinerary\n</practice>"
    good = PracticeResult.model_validate(structured(schema, "Itinerary!", exercise))
    assert good.grade == "good" and not good.mistakes
    bad = PracticeResult.model_validate(structured(schema, "schedule", exercise))
    assert bad.grade == "again"
