"""What one learner turn costs: tokens and estimated dollars per turn, by call, with the cached
share, before (main at e52e30d: no reasoning effort sent, no cached input counted) and after.

Run from the repository root::

    .venv/bin/python -m benchmarks.turn_cost [--turns 30]

One learner talks to the real engine (built by memora.app.open_engine from settings, as `memora
run` builds it: real SQLite, Chroma, the local embedder, the openai SDK) over loopback HTTP to
the fake OpenAI server (tests/support/fake_openai.py) answering as OpenAI does: tokens counted with
the o200k tokenizer (per message, plus OpenAI's 3 tokens of framing), the strict schema billed with
the prompt, a prompt cache for repeated prefixes (1,024 tokens, blocks of 128), and a reasoning
model's reasoning tokens by effort (the fake's assumed figures, tests/support/provider_rules.py).
The model's answers are scripted to a capable tutor's lengths: replies of 60-110 words, summaries of
about 100 words, extraction answers with a memory or a mistake where the learner gives one.

The figures are read back from the usage ledger (memora/usage.py), per call kind, and priced at
gpt-5-mini's public prices: $0.25 per 1M input tokens, $0.025 per 1M cached input tokens, $2.00
per 1M output tokens (reasoning tokens are output). Prints, per turn: input, cached input,
output and reasoning tokens and dollars for the reply, the extraction and the summary, the
cached share of the input, and what 1,000 learner turns cost.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from memora.app import open_engine
from memora.config import LLMConfig, ModelPrice, PricingConfig, Settings, StorageConfig
from memora.shortterm.tokens import TOKENS_PER_MESSAGE, o200k
from memora.types import ChatRef, UserRef
from memora.usage import Call, UsageLedger, cost
from tests.support.fake_openai import Answer, FakeOpenAI, FakeRequest, minimal_instance
from tests.support.provider_rules import Reasoning

MODEL = "gpt-5-mini"
PRICES = ModelPrice(input=0.25, cached_input=0.025, output=2.0)
PRICING = PricingConfig(models={MODEL: PRICES})
NO_CACHED_PRICE = PricingConfig(models={MODEL: ModelPrice(input=0.25, output=2.0)})
KINDS = ("reply", "extraction", "summary")

LEARNER = [
    "Hi! I'm Mei, I work as a nurse in Taipei.",
    "My English level is around B1, I think.",
    "I want to pass TOEIC 850 before next summer.",
    "Yesterday I goed to the hospital early for the night shift.",
    "What does 'triage' mean?",
    "我常常搞不清楚 since 跟 for 的用法",
    "I have been work here since three years.",
    "Can you give me a sentence with 'since'?",
    "I only have time to study after midnight, when my shift ends.",
    "How do I say 塞車 in English?",
    "The traffic was very heavy this morning, I was late.",
    "Please explain in Chinese when it is difficult.",
    "What is the difference between 'patient' and 'patience'?",
    "My patient was very patience today.",
    "Oh I see, my patient was very patient.",
    "I like watching medical dramas to practice listening.",
    "Is 'Grey's Anatomy' good for learning English?",
    "What words do nurses use for pain?",
    "The patient say his pain is sharp.",
    "The patient says his pain is sharp.",
    "How should I prepare for the TOEIC listening part?",
    "I always miss the numbers in part 2.",
    "Can you give me three practice questions?",
    "1. B 2. A 3. C",
    "Why is number 2 wrong?",
    "I will try again tomorrow after my shift.",
    "By the way, my sister lives in Vancouver.",
    "I want to visit her next year and talk with her friends.",
    "What should I say at a dinner party in Canada?",
    "Thank you, that was very helpful!",
]

_SAID = re.compile(r"<user_message>\n(.*?)\n</user_message>", re.DOTALL)
FACTS = {  # what a capable extractor keeps from these messages
    "nurse": ("The user works as a nurse in Taipei.", "personal"),
    "B1": ("The user's English level is B1.", "level"),
    "TOEIC 850": ("The user's goal is TOEIC 850 before summer 2027.", "goal"),
    "midnight": ("The user can only study after midnight, after night shifts.", "constraint"),
    "Chinese when": (
        "The user wants explanations in Chinese when a point is difficult.",
        "preference",
    ),
    "medical dramas": ("The user likes medical dramas for listening practice.", "preference"),
    "numbers in part 2": ("The user misses numbers in TOEIC listening part 2.", "difficulty"),
    "Vancouver": ("The user's sister lives in Vancouver.", "personal"),
}
SLIPS = {"goed": ("I went", "tense"), "since three": ("for three years", "preposition")}


def tutor_reply(learner: str) -> str:
    """A capable tutor's answer to `learner`, at a real model's length (60-110 words)."""
    return (
        f'Good question! You wrote: "{learner[:80]}". Here is how a native speaker would say '
        "it, with a short note on why. When you talk about something that started in the past "
        'and is still true, English uses the present perfect: "I have worked here for three '
        'years." Use "for" with a length of time and "since" with a starting point, such '
        'as "since 2023". Try it: write one sentence about your job with "for" and one '
        'with "since", and I will check them. 加油！You are doing well.'
    )


def summary_of(req: FakeRequest) -> str:
    """About 100 words, as the summary instructions ask (under 150)."""
    said = req.last_user_message
    facts = [fact for key, (fact, _) in FACTS.items() if key in said]
    return (
        "Mei, a nurse in Taipei (B1), is preparing for TOEIC 850 and studies after night "
        "shifts. The tutor corrected past tense (goed → went), for/since with the present "
        "perfect, patient/patience and subject-verb agreement (says). Vocabulary taught: "
        "triage, traffic jam (塞車), sharp/dull pain. She wants Chinese explanations when a "
        "point is difficult, likes medical dramas for listening, and misses numbers in TOEIC "
        "part 2; practice questions were given. " + " ".join(facts)
    )[:900]


def extraction_answer(req: FakeRequest) -> dict[str, Any]:
    """The strict schema's answer with a memory or a mistake where the message gives one."""
    answer: dict[str, Any] = minimal_instance(req.schema) if req.schema else {}
    found = _SAID.search(req.last_user_message)
    said = found.group(1) if found else ""
    answer["memories"] = [
        {
            "text": text,
            "category": category,
            "replaces": None,
            "terms": ["nurse", "護理師", "Taipei", "台北", "job", "工作"],
            "situations": ["hospital work", "醫院工作", "shift schedule", "排班"],
        }
        for key, (text, category) in FACTS.items()
        if key in said
    ]
    if "mistakes" in answer:
        answer["mistakes"] = [
            {"original": said, "corrected": right, "category": kind, "reason": "one short line"}
            for slip, (right, kind) in SLIPS.items()
            if slip in said
        ]
    return answer


def responder(req: FakeRequest) -> Answer:
    if req.kind == "structured":
        return extraction_answer(req)
    if "running summary" in (req.instructions or ""):
        return summary_of(req)
    return tutor_reply(req.last_user_message)


def o200k_tokens(text: str) -> int:
    """A message's input tokens as OpenAI counts them: o200k, plus its framing."""
    return len(o200k().encode(text)) + TOKENS_PER_MESSAGE


@dataclass(frozen=True)
class Figures:
    """One run's usage per learner turn, by call kind."""

    label: str
    turns: int
    calls: dict[str, Call]  # summed over the run

    def per_turn(self, kind: str, field: str) -> float:
        call = self.calls.get(kind)
        return getattr(call, field) / self.turns if call else 0.0

    def dollars(self, kind: str, pricing: PricingConfig) -> float:
        call = self.calls.get(kind)
        return (cost(pricing, [call]) or 0.0) / self.turns if call else 0.0


async def converse(settings: Settings, turns: int) -> dict[str, Call]:
    """One learner's conversation of `turns` turns; the ledger's calls by kind."""
    async with open_engine(settings) as engine:
        learner = UserRef(7, "Mei")
        for n in range(turns):
            reply = await engine.handle_turn(ChatRef(7), learner, LEARNER[n % len(LEARNER)])
            assert reply.ok, reply.text
            await engine.drain()
        (spent,) = await UsageLedger(engine.db).report(engine.state.now() - timedelta(days=1))
    return {c.kind: c for c in spent.calls if c.kind in KINDS}


def run(label: str, turns: int, *, cache: bool, llm: dict[str, Any]) -> Figures:
    with FakeOpenAI() as server, tempfile.TemporaryDirectory() as tmp:
        server.like_openai(Reasoning())
        server.responder = responder
        server.count_tokens = o200k_tokens
        server.bill_schema = True
        if not cache:
            server.prefix_cache = None
        settings = Settings(
            llm=LLMConfig(base_url=server.base_url, api_key="sk-fake", model=MODEL, **llm),
            pricing=PRICING,
            storage=StorageConfig(data_dir=Path(tmp)),
        )
        calls = asyncio.run(converse(settings, turns))
    return Figures(label, turns, calls)


def report(before: Figures, after: Figures) -> str:
    lines = [
        f"Per learner turn over a {after.turns}-turn conversation, {MODEL} at its public prices "
        "($0.25 / 1M input, $0.025 / 1M cached input, $2.00 / 1M output; reasoning is output):",
        "",
    ]
    for figures, pricing in ((before, NO_CACHED_PRICE), (after, PRICING)):
        lines.append(figures.label)
        lines.append(
            f"  {'call':<11}{'input':>8}{'cached':>8}{'output':>8}{'reasoning':>10}{'$ / turn':>11}"
        )
        total_in = total_cached = 0.0
        total_cost = 0.0
        for kind in KINDS:
            inp = figures.per_turn(kind, "input_tokens")
            cached = figures.per_turn(kind, "cached_tokens")
            out = figures.per_turn(kind, "output_tokens")
            reasoning = figures.per_turn(kind, "reasoning_tokens")
            dollars = figures.dollars(kind, pricing)
            total_in, total_cached, total_cost = (
                total_in + inp,
                total_cached + cached,
                total_cost + dollars,
            )
            lines.append(
                f"  {kind:<11}{inp:>8.0f}{cached:>8.0f}{out:>8.0f}{reasoning:>10.0f}"
                f"{dollars:>11.6f}"
            )
        share = total_cached / total_in if total_in else 0.0
        lines.append(
            f"  {'turn':<11}{total_in:>8.0f}{total_cached:>8.0f}{'':>18}{total_cost:>11.6f}"
            f"   cached share of input {share:.0%}; 1,000 turns ≈ ${total_cost * 1000:.2f}"
        )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    # e52e30d: no effort sent on any call (the model's default: medium), no cached input counted
    none = {f"{kind}reasoning_effort": "" for kind in ("", "extraction_", "summary_")}
    before = run(
        "before (e52e30d: no effort sent, cached input not counted)",
        args.turns,
        cache=False,
        llm=none,
    )
    after = run(
        "after (the default effort per call kind, cached input counted)",
        args.turns,
        cache=True,
        llm={},
    )
    print(report(before, after))


if __name__ == "__main__":
    main()
