"""/placement: a short adaptive level test. Each question is an ordinary reply, pitched one CEFR
level up after a right answer and one down after a wrong one; the after-reply extraction call
judges each answer and, after the last, gives the estimate and its reason, which go to the
profile's level with the source "placement" (dated, undoable like any profile change).

The model's judgement is used when it reads; when it does not (no answer, broken JSON, a level
that is not A1–C2), the test still goes on and ends: the ladder of judged answers gives the
estimate, and with no judged answer at all the profile is left as it was."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from memora.extraction import LearnerExtractionResult, ModeAsk
from memora.i18n import N_, _, ngettext
from memora.learner.model import CEFR_LEVELS
from memora.modes.lesson import Lesson, Settled, Settling
from memora.storage import ModeRow

QUESTIONS = 8
OFFER = N_("👋 New here? /placement finds your English level in 8 short questions.")
"""Offered to a learner with no level yet: in /start, and as the terminal chat opens."""
START_LEVEL = "B1"
# The kinds of question, in turn: each skill comes up twice in eight questions.
KINDS = ("grammar", "vocabulary", "reading", "short writing")


class PlacementCheck(BaseModel):
    """The extraction call's judgement of one placement answer."""

    answer_correct: bool | None = Field(
        default=None,
        description="Whether the learner's message answers the placement question correctly.",
    )
    next_level: str | None = Field(
        default=None,
        description="The CEFR level (A1-C2) of the new question the assistant's reply asks.",
    )
    estimate: str | None = Field(
        default=None,
        description="Only after the last question: the learner's CEFR level, A1-C2.",
    )
    # None, not "": a strict schema carries no `default` but null (Azure refuses `default`)
    reason: str | None = Field(
        default=None,
        description="Only after the last question: one paragraph on why, from their answers.",
    )


class PlacementResult(LearnerExtractionResult):
    placement: PlacementCheck | None = None


INSTRUCTIONS = """
This turn is part of a placement test (see <placement>). Also return placement: \
answer_correct (true/false: does the learner's message answer the question correctly?), \
next_level (the CEFR level of the question the assistant's reply asks, if it asks one) and, \
only after the last question, estimate (the learner's CEFR level, A1-C2) with reason (one \
paragraph). Do not log the test answers as mistakes or memories."""


def kind_of(n: int) -> str:
    """The kind of question number `n` (1-based)."""
    return KINDS[(n - 1) % len(KINDS)]


def shifted(level: str, by: int) -> str:
    """The CEFR level `by` steps from `level`, kept within A1–C2."""
    i = CEFR_LEVELS.index(level) + by
    return CEFR_LEVELS[max(0, min(len(CEFR_LEVELS) - 1, i))]


def valid_level(value: Any) -> str | None:
    """`value` as a CEFR level ("b1+" → "B1"), or None when it is not one."""
    text = str(value or "").strip().upper()[:2]
    return text if text in CEFR_LEVELS else None


def ladder_estimate(answers: list[dict[str, Any]]) -> str | None:
    """The level the judged answers show: the highest level answered right, or one below the
    lowest level asked when none was; None when no answer was judged."""
    judged = [a for a in answers if a.get("correct") is not None]
    if not judged:
        return None
    right = [CEFR_LEVELS.index(a["level"]) for a in judged if a["correct"]]
    if right:
        return CEFR_LEVELS[max(right)]
    return shifted(min((a["level"] for a in judged), key=CEFR_LEVELS.index), -1)


def ladder_reason(answers: list[dict[str, Any]]) -> str:
    """A reason written by code from the judged answers, when the model gave none."""
    right = [a["level"] for a in answers if a.get("correct") is True]
    wrong = [a["level"] for a in answers if a.get("correct") is False]
    n = len(right) + len(wrong)
    return ngettext(
        "From {n} judged answer: right at {right}; wrong at {wrong}.",
        "From {n} judged answers: right at {right}; wrong at {wrong}.",
        n,
    ).format(n=n, right=", ".join(right) or "—", wrong=", ".join(wrong) or "—")


class Placement(Lesson):
    kind: ClassVar[str] = "placement"

    def lines(self, mode: ModeRow) -> list[str]:
        level, n = mode.state["level"], mode.step
        head = (
            f"Placement test: at most {QUESTIONS} short questions that find the learner's CEFR "
            "level. Ask exactly one question per reply, in English, with no hints, and do not "
            "give the answer. Keep any other words short."
        )
        if n == 0:
            return [head, f"Ask question 1 of {QUESTIONS}: a {kind_of(1)} question at {level}."]
        if n < QUESTIONS:
            return [
                head,
                f"The learner's message answers question {n} ({kind_of(n)}, {level}). Say in "
                "one short line whether it is right. Then ask question "
                f"{n + 1} of {QUESTIONS}: a {kind_of(n + 1)} question at {shifted(level, 1)} if "
                f"the answer was right, at {shifted(level, -1)} if it was wrong.",
            ]
        return [
            head,
            f"The learner's message answers question {n}, the last ({kind_of(n)}, {level}). "
            "Ask no more questions. Tell them their estimated CEFR level (A1-C2) and, in one "
            "paragraph, why, from their answers in this test.",
        ]

    def ask(self, mode: ModeRow) -> ModeAsk | None:
        answered = mode.step - 1  # the turn that left `mode` answered this question
        if answered < 1:
            return None  # the test's first question: nothing was answered yet
        last = answered >= QUESTIONS
        return ModeAsk(
            PlacementResult,
            INSTRUCTIONS,
            f"<placement>\nThe learner's message answers question {answered} of {QUESTIONS} "
            f"({kind_of(answered)}, {mode.state['level']})"
            f"{'; it was the last question' if last else ''}.\n</placement>",
        )

    async def settle(
        self, mode: ModeRow, found: LearnerExtractionResult | None, ctx: Settling
    ) -> Settled:
        answered = mode.step - 1
        if answered < 1:
            return Settled(mode)
        check = found.placement if isinstance(found, PlacementResult) else None
        check = check or PlacementCheck()
        level = mode.state["level"]
        answers = [
            *mode.state.get("answers", []),
            {"n": answered, "level": level, "correct": check.answer_correct},
        ]
        if answered < QUESTIONS:
            step = 1 if check.answer_correct else -1 if check.answer_correct is False else 0
            following = valid_level(check.next_level) or shifted(level, step)
            state = {**mode.state, "level": following, "answers": answers}
            line = f"placement: answer {answered} {_judged(check.answer_correct)}"
            return Settled(replace(mode, state=state), log=(f"{line}, next at {following}",))
        return await self._finish(answers, check, ctx)

    async def _finish(
        self, answers: list[dict[str, Any]], check: PlacementCheck, ctx: Settling
    ) -> Settled:
        """The estimate to the profile (source "placement") and the learner told."""
        estimate = valid_level(check.estimate)
        reason = " ".join((check.reason or "").split())
        if estimate is None or not reason:
            reason = ladder_reason(answers)
        estimate = estimate or ladder_estimate(answers)
        if estimate is None:
            return Settled(
                None,
                _(
                    "I couldn't judge your answers this time, so I can't estimate your level: "
                    "your profile is unchanged. /placement to try again."
                ),
                ("placement: ended with no estimate (no answer could be judged)",),
            )
        await ctx.learner.profiles.set_field(
            ctx.user_id,
            "level",
            estimate,
            source="placement",
            now=ctx.now,
            chat_id=ctx.chat_id,
            message_id=ctx.message_id,
        )
        notice = _(
            "📋 Placement result: {level}, saved to your profile (source: placement).\n"
            "Why: {reason}\n/profile shows it; /profile undo takes it back."
        ).format(level=estimate, reason=reason)
        return Settled(None, notice, (f"placement: estimate {estimate} ({reason})",))

    def describe(self, mode: ModeRow) -> str:
        if mode.step > QUESTIONS:
            return _("Placement test: finished, the result is on its way")
        return _("Placement test: question {n} of {total}").format(
            n=max(mode.step, 1), total=QUESTIONS
        )


def _judged(correct: bool | None) -> str:
    return "not judged" if correct is None else "right" if correct else "wrong"
