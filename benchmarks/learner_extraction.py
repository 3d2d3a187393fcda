"""What the learner model adds to the one after-reply extraction call, per turn, before vs after.

The same scripted turns go through the real `memora.longterm.extraction.extract` twice:
narrow (memories only, the call as it was) and wide (memories + profile + mistakes + vocabulary,
the learner model on). Without an endpoint the "model" answers each turn with the answer written
below for it (what a correct model returns, serialised by the real pydantic schema), and tokens
are counted with the o200k tokenizer; with --base-url/--model the same turns go to a real
OpenAI-compatible endpoint and the provider's usage is reported instead. The reply path is not
involved: it stays one call either way, and the extraction stays one call (counted below).

    .venv/bin/python benchmarks/learner_extraction.py
    .venv/bin/python benchmarks/learner_extraction.py --base-url URL --model NAME [--api-key K]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from memora.llm import LLM, ChatMessage, Completion, OnDelta, Parsed, Usage
from memora.longterm.extraction import extract
from memora.tokens import LocalTokenCounter

T = TypeVar("T", bound=BaseModel)
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

M = dict[str, Any]


def mem(text: str, category: str) -> M:
    return {"text": text, "category": category, "replaces": None}


def mis(original: str, corrected: str, category: str, reason: str) -> M:
    return {"original": original, "corrected": corrected, "category": category, "reason": reason}


def word(term: str, meaning: str, example: str) -> M:
    return {"term": term, "meaning": meaning, "example": example}


# (learner message, tutor reply, narrow answer's memories, wide answer: memories, profile,
#  mistakes, vocabulary). In the wide answer a level or goal is a profile field, not a memory.
TURNS: list[tuple[str, str, list[M], list[M], list[M], list[M], list[M]]] = [
    (
        "我的英文程度大概是 B1，想在明年三月前考到多益 850。",
        "好的！我們可以從多益的聽力和閱讀題型開始練習。",
        [mem("使用者的英文程度是 B1。", "level"), mem("目標：2027-03 前多益 850 分。", "goal")],
        [],
        [
            {"field": "level", "value": "B1"},
            {"field": "goal", "value": "TOEIC 850"},
            {"field": "goal_date", "value": "2027-03-31"},
        ],
        [],
        [],
    ),
    ("Hi! How are you today?", "I'm great, thanks! Ready to practise?", [], [], [], [], []),
    (
        "Yesterday I go to the airport and I forget my passport.",
        "Oh no! Small fix: 'Yesterday I went to the airport and I forgot my passport.'",
        [],
        [],
        [],
        [
            mis("I go to the airport", "I went to the airport", "tense", "yesterday → past"),
            mis("I forget my passport", "I forgot my passport", "tense", "past event → past"),
        ],
        [],
    ),
    (
        "What does 'commute' mean?",
        "'Commute' means 通勤: travelling to work. Example: My commute takes 40 minutes.",
        [],
        [],
        [],
        [],
        [word("commute", "通勤", "My commute takes 40 minutes.")],
    ),
    (
        "請用中文解釋，謝謝。我比較喜歡簡短的例句。",
        "沒問題，之後我會用中文解釋並給簡短例句。",
        [mem("使用者偏好中文解釋與簡短例句。", "preference")],
        [mem("使用者偏好簡短例句。", "preference")],
        [{"field": "explanation_language", "value": "中文"}],
        [],
        [],
    ),
    (
        "I am working in a hospital as nurse since 2019.",
        "Nice! Better: 'I have worked in a hospital as a nurse since 2019.'",
        [mem("The user has been a nurse in a hospital since 2019.", "personal")],
        [mem("The user has been a nurse in a hospital since 2019.", "personal")],
        [],
        [
            mis(
                "I am working in a hospital as nurse since 2019",
                "I have worked in a hospital as a nurse since 2019",
                "tense",
                "since + a point in time → present perfect",
            )
        ],
        [],
    ),
    ("ok", "Great — shall we try another sentence?", [], [], [], [], []),
    (
        "How do I say 訂位 in English?",
        "You can say 'book a table' (restaurant) or 'make a reservation'.",
        [],
        [],
        [],
        [],
        [
            word("book a table", "訂位（餐廳）", "I'd like to book a table for two."),
            word("make a reservation", "預約", "I made a reservation for 7 pm."),
        ],
    ),
    (
        'My boss wrote "we has a meeting at 3" — is that right?',
        "Not quite: it should be 'we have a meeting at 3'.",
        [],
        [],
        [],
        [],
        [],
    ),
    (
        "I live in Taipei and I study every night at 9.",
        "Great routine! We can practise at 9 pm Taipei time.",
        [
            mem("The user lives in Taipei.", "personal"),
            mem("Studies at 21:00 daily.", "constraint"),
        ],
        [mem("The user lives in Taipei.", "personal")],
        [
            {"field": "timezone", "value": "Asia/Taipei"},
            {"field": "study_time", "value": "every night 21:00"},
        ],
        [],
        [],
    ),
    (
        "Can you explain the difference between 'affect' and 'effect'?",
        "'Affect' is usually a verb (to influence); 'effect' is usually a noun (a result).",
        [],
        [],
        [],
        [],
        [
            word("affect", "影響（動詞）", "The rain affected our plans."),
            word("effect", "效果；影響（名詞）", "The new rule had a big effect."),
        ],
    ),
    (
        "I interesting in football and travel.",
        "Good topics! Say 'I am interested in football and travel.'",
        [mem("The user likes football and travel.", "preference")],
        [],
        [{"field": "interests", "value": "football, travel"}],
        [mis("I interesting in", "I am interested in", "word choice", "interested + in")],
        [],
    ),
]


class Scripted:
    """An LLM whose structured answers are the scripted ones, counted with the o200k tokenizer."""

    def __init__(self) -> None:
        self.answers: list[BaseModel] = []
        self.calls = 0
        self.counter = LocalTokenCounter()

    async def complete(
        self, instructions: str, messages: list[ChatMessage], on_delta: OnDelta | None = None
    ) -> Completion:
        raise AssertionError("the extraction benchmark makes no completion call")

    async def parse(
        self, instructions: str, messages: list[ChatMessage], schema: type[T]
    ) -> Parsed:
        self.calls += 1
        obj = schema.model_validate(self.answers.pop(0).model_dump())
        raw = obj.model_dump_json()
        usage = Usage(
            input_tokens=self.counter.count_sync(instructions, messages),
            output_tokens=self.counter.text_tokens(raw),
        )
        return Parsed(text=raw, usage=usage, parsed=obj)

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int:
        return self.counter.count_sync(instructions, messages)

    async def aclose(self) -> None:
        pass


def _profile_lines(turn: int) -> list[str]:
    """What the profile holds before each turn in the wide run (grows like a real one)."""
    lines = []
    if turn > 0:
        lines += ["- level: B1", "- goal: TOEIC 850", "- goal_date: 2027-03-31"]
    if turn > 4:
        lines.append("- explanation_language: 中文")
    return lines


async def run(llm: LLM, scripted: Scripted | None, wide: bool) -> list[Usage]:
    from memora.longterm.extraction import ExtractionResult, LearnerExtractionResult

    out = []
    for i, (message, reply, narrow, memories, profile, mistakes, words) in enumerate(TURNS):
        if scripted is not None:
            answer: BaseModel = (
                LearnerExtractionResult.model_validate(
                    {
                        "memories": memories,
                        "profile": profile,
                        "mistakes": mistakes,
                        "vocabulary": words,
                    }
                )
                if wide
                else ExtractionResult.model_validate({"memories": narrow})
            )
            scripted.answers.append(answer)
        outcome = await extract(
            llm,
            user_message=message,
            assistant_reply=reply,
            existing=[],
            now=NOW,
            profile_lines=_profile_lines(i) if wide else None,
        )
        if outcome.error:
            print(f"turn {i + 1}: {outcome.error}")
        out.append(outcome.usage)
    return out


def _stats(values: list[int]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    mid, mean = statistics.median(values), statistics.mean(values)
    return f"median {mid:6.1f}  p95 {p95:5d}  mean {mean:6.1f}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="a real OpenAI-compatible endpoint (default: scripted)")
    parser.add_argument("--model", default="gpt-5-mini")
    parser.add_argument("--api-key", default="not-needed")
    parser.add_argument("--api", default="responses", choices=["responses", "chat_completions"])
    args = parser.parse_args()
    scripted: Scripted | None = None
    llm: LLM
    if args.base_url:
        from memora.llm import OpenAILLM

        llm = OpenAILLM.for_api(
            args.api, model=args.model, api_key=args.api_key, base_url=args.base_url
        )
        source = f"{args.model} at {args.base_url} (provider usage)"
    else:
        scripted = Scripted()
        llm = scripted
        source = "scripted answers, o200k token counts"
    before = await run(llm, scripted, wide=False)
    after = await run(llm, scripted, wide=True)
    n = len(TURNS)
    print(f"Extraction call per turn, {n} scripted turns; {source}")
    calls = f"{scripted.calls // 2} per run" if scripted else "one per turn"
    print(f"calls: {calls} (one extraction call per turn, before and after)")
    for label, pick in (
        ("output", lambda u: u.output_tokens),
        ("input", lambda u: u.input_tokens),
    ):
        b = [pick(u) for u in before]
        a = [pick(u) for u in after]
        extra = [y - x for x, y in zip(b, a, strict=True)]
        print(f"{label:>6} before: {_stats(b)}")
        print(f"{label:>6} after:  {_stats(a)}")
        print(f"{label:>6} extra:  {_stats(extra)}   total ratio {sum(a) / max(1, sum(b)):.2f}×")
    print(
        f"profile block in every reply's context (all fields set): {profile_block_tokens()} tokens"
    )
    await llm.aclose()


def profile_block_tokens() -> int:
    """What the profile adds to each reply's input: a full profile, as the engine frames it."""
    from memora.learner.profile import Difficulty, FieldValue, Profile, context_lines
    from memora.prompts import PROFILE_BLOCK

    values = {
        "level": "B1",
        "scores": "TOEIC 700",
        "goal": "TOEIC 850",
        "goal_date": "2027-03-31",
        "explanation_language": "繁體中文",
        "interests": "football, travel",
        "study_time": "every night 21:00",
        "timezone": "Asia/Taipei",
    }
    profile = Profile(
        1,
        {k: FieldValue(v, "conversation", "2026-11-30") for k, v in values.items()},
        (Difficulty("tense", 5), Difficulty("article", 3)),
    )
    block = ChatMessage("developer", PROFILE_BLOCK + "\n".join(context_lines(profile, NOW)))
    counter = LocalTokenCounter()
    return counter.count_sync("", [block]) - counter.count_sync("", [])


if __name__ == "__main__":
    asyncio.run(main())
