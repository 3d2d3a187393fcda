"""The learner's wait for the first word, and the tokens a turn costs, with a reasoning model:
before (no effort sent: the provider's default, medium, on every call) and after (the reasoning
effort per call kind of `[llm]`: minimal for the reply and the summary, low for extraction).

Run from the repository root::

    .venv/bin/python -m benchmarks.first_text [--turns 12] [--time-scale 0.1]

The real engine (`open_engine`, real SQLite, Chroma and embeddings) talks through the real SDK
to the fake server as OpenAI (`FakeOpenAI.like_openai`, model gpt-5-mini), whose reasoning model
spends the reasoning tokens of tests/support/provider_rules.py (ASSUMED figures: minimal 0, low 200,
medium 700 a call) at 80 tokens a second before its first visible word. `--time-scale` shrinks
that wait (0.1: a tenth; 1: as the figures say). One learner talks `--turns` turns; each reply is
streamed, and the extraction and summary run after it, as in production.

Prints, per way: seconds from the learner's message to the first visible text (median and p95,
at the time scale and as the figures say in real time), and the tokens a turn costs over all its
calls (input + output, of which reasoning), with the ratio after / before.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memora.app import model_client, open_engine
from memora.config import LLMConfig, Settings, StorageConfig
from memora.engine import ChatRef, UserRef
from memora.llm import REPLY, CallInfo, ChatMessage, Completion, OnDelta, Parsed, Usage
from memora.llm.protocol import T
from tests.support.fake_openai import FakeOpenAI
from tests.support.provider_rules import Reasoning

MESSAGES = [
    "Hi! I want to practise my English for a job interview next month.",
    "I am work as a nurse in Taichung since five years.",
    "Yesterday I goed to the hospital early because we had many patients.",
    "Can you explain when I use 'since' and when 'for'?",
    "My daughter is three years old and she likes dinosaurs very much.",
    "What does 'bedside manner' mean?",
    "I am nervous about speak in front of the interviewers.",
    "Could you ask me a typical interview question?",
    "I think my biggest strength is I am very patient with peoples.",
    "Thanks! Is 'patient with people' correct now?",
    "I will have the interview on Friday at 10 am.",
    "Please remind me the words we learned today.",
]
LEARNER = UserRef(7001, "Mei")


@dataclass
class Way:
    name: str
    first_text: list[float]
    tokens: list[int]  # per turn, every call of it
    reasoning: list[int]


class Metered:
    """The engine's model client, adding up what each call reported, per turn."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.spent: dict[str, Usage] = defaultdict(Usage)

    async def complete(
        self,
        instructions: str,
        messages: list[ChatMessage],
        on_delta: OnDelta | None = None,
        *,
        call: CallInfo = REPLY,
    ) -> Completion:
        done: Completion = await self.inner.complete(instructions, messages, on_delta, call=call)
        self.spent[call.kind] += done.usage
        return done

    async def parse(
        self,
        instructions: str,
        messages: list[ChatMessage],
        schema: type[T],
        *,
        call: CallInfo = REPLY,
    ) -> Parsed[T]:
        done: Parsed[T] = await self.inner.parse(instructions, messages, schema, call=call)
        self.spent[call.kind] += done.usage
        return done

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int:
        return int(await self.inner.count_input_tokens(instructions, messages))

    async def aclose(self) -> None:
        await self.inner.aclose()


async def run_way(name: str, efforts: dict[str, str], turns: int, scale: float, tmp: Path) -> Way:
    with FakeOpenAI() as fake:
        fake.like_openai(Reasoning(time_scale=scale))
        settings = Settings(
            llm=LLMConfig(api_key="sk-fake", base_url=fake.base_url, **efforts),
            storage=StorageConfig(data_dir=tmp / name),
        )
        metered = Metered(model_client(settings, settings.llm.model))
        way = Way(name, [], [], [])
        async with open_engine(settings, llm=metered) as engine:
            for i in range(turns):
                metered.spent.clear()
                started = time.monotonic()
                first: list[float] = []

                async def seen(
                    _: str, first: list[float] = first, started: float = started
                ) -> None:
                    if not first:
                        first.append(time.monotonic() - started)

                text = MESSAGES[i % len(MESSAGES)]
                reply = await engine.handle_turn(ChatRef(LEARNER.id), LEARNER, text, on_delta=seen)
                if not reply.ok or not first:
                    raise SystemExit(f"{name}: turn {i} failed: {reply.text}")
                await engine.drain()  # the extraction and the summary, as after every reply
                way.first_text.append(first[0])
                spent = sum(metered.spent.values(), Usage())
                way.tokens.append(spent.total_tokens)
                way.reasoning.append(spent.reasoning_tokens)
    return way


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--turns", type=int, default=12)
    p.add_argument("--time-scale", type=float, default=0.1)
    args = p.parse_args()
    before = {"reasoning_effort": "", "extraction_reasoning_effort": "",
              "summary_reasoning_effort": ""}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        ways = [
            asyncio.run(run_way(name, efforts, args.turns, args.time_scale, Path(tmp)))
            for name, efforts in (("before", before), ("after", {}))
        ]
    default = LLMConfig()
    print(
        f"{args.turns} turns of one learner, gpt-5-mini as the fake emulates it; after: "
        f"reply {default.reasoning_effort}, extraction {default.extraction_reasoning_effort}, "
        f"summary {default.summary_reasoning_effort}; before: no effort (medium)"
    )
    print(
        f"{'':>7} {'first text s':>22} {'as real time s':>18} {'tokens/turn':>15} {'reasoning':>15}"
    )
    rows: dict[str, tuple[float, float, float, float, float, float]] = {}
    for w in ways:
        med, high = statistics.median(w.first_text), p95(w.first_text)
        tok, tok95 = statistics.median(w.tokens), p95([float(t) for t in w.tokens])
        rsn, rsn95 = statistics.median(w.reasoning), p95([float(t) for t in w.reasoning])
        rows[w.name] = (med, high, tok, tok95, rsn, rsn95)
        print(
            f"{w.name:>7} {med:>9.2f} / {high:<10.2f} {med / args.time_scale:>7.1f} / "
            f"{high / args.time_scale:<8.1f} {tok:>6.0f} / {tok95:<6.0f} "
            f"{rsn:>6.0f} / {rsn95:<6.0f}"
        )
    b, a = rows["before"], rows["after"]
    print(
        f"{'ratio':>7} {a[0] / b[0]:>9.2f} / {a[1] / b[1]:<10.2f} {'':>18} "
        f"{a[2] / b[2]:>6.2f} / {a[3] / b[3]:<6.2f} {a[4] / max(b[4], 1):>6.2f} / "
        f"{a[5] / max(b[5], 1):<6.2f}"
    )
    print("(median / p95; ratio = after / before; 'as real time' divides by --time-scale, so it")
    print(" includes the engine's own time scaled up too: an upper bound)")


if __name__ == "__main__":
    main()
