"""300-turn synthetic conversation through the real engine against a zero-latency fake LLM.

Prints input tokens sent per turn against a full-history baseline (same tokenizer, same system
prompt), LLM calls per turn on the reply path, and the engine's own overhead per turn.

    .venv/bin/python benchmarks/core_turns.py [--turns 300] [--recent 3] [--budget 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.llm import ChatMessage, Completion, OnDelta, Parsed, Usage
from memora.storage import Database
from memora.tokens import LocalTokenCounter

TOPICS = [
    "我的英文程度大概是 B1，想準備多益 850 分。",
    "How do I use 'since' and 'for'? 我老是搞混。",
    "Can you give me three words for the airport?",
    "我下個月要去倫敦出差，需要練習開會的英文。",
    "What's the difference between 'affect' and 'effect'?",
    "请帮我改这句: I have went to Tokyo last year.",
    "I prefer short explanations with examples, please.",
    "我每天通勤 40 分鐘，可以用來聽 podcast 嗎？",
]
REPLY = (
    "Good question! Here is a short explanation with two examples. "
    "Use 'for' with a length of time (for three months) and 'since' with a starting point "
    "(since 2024). Try writing one sentence of each, and I will check them for you. "
    "你可以先用自己的生活經驗造句，這樣比較容易記住。"
)


class ZeroLatencyLLM:
    """Answers at once; counts calls so the benchmark can see which happen on the reply path."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(
        self, instructions: str, messages: list[ChatMessage], on_delta: OnDelta | None = None
    ) -> Completion:
        self.calls += 1
        if "summary" in instructions.lower():
            text = " ".join(m.content[:400] for m in messages)[:700]
        else:
            text = REPLY
        if on_delta is not None:
            await on_delta(text)
        return Completion(text, Usage(len(str(messages)) // 4, len(text) // 4))

    async def parse(
        self, instructions: str, messages: list[ChatMessage], schema: type[BaseModel]
    ) -> Parsed:
        self.calls += 1
        return Parsed("{}", Usage(10, 2), schema.model_validate({}))

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int:
        return 0

    async def aclose(self) -> None:
        return None


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


async def main(turns: int, recent: int, budget: int) -> None:
    rng = random.Random(1)
    llm = ZeroLatencyLLM()
    counter = LocalTokenCounter()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "bench.sqlite3")
        await db.open()
        config = EngineConfig(max_input_tokens=budget, max_recent_turns=recent)
        engine = Engine(db=db, llm=llm, counter=counter, config=config)
        chat, user = ChatRef(1), UserRef(1, "learner")
        history: list[ChatMessage] = []
        sent, baseline, reply_path_calls, overhead_ms, after_ms = [], [], [], [], []
        for i in range(turns):
            text = f"{rng.choice(TOPICS)} (turn {i})"
            before = llm.calls
            t0 = time.perf_counter()
            reply = await engine.handle_turn(chat, user, text)
            t1 = time.perf_counter()
            reply_path_calls.append(llm.calls - before)
            await engine.drain()  # the after-reply work (summary) timed on its own
            after_ms.append((time.perf_counter() - t1) * 1000)
            overhead_ms.append((t1 - t0) * 1000)
            assert reply.ok and reply.stats is not None, reply.text
            sent.append(reply.stats.usage.counted_input)
            baseline.append(
                counter.count_sync(config.instructions, [*history, ChatMessage("user", text)])
            )
            history += [ChatMessage("user", text), ChatMessage("assistant", reply.text)]
        await db.close()

    print(f"turns: {turns}  max_recent_turns: {recent}  max_input_tokens: {budget}")
    print(
        f"input tokens per turn, memora:        mean {statistics.mean(sent):8.1f}  max {max(sent)}"
    )
    print(
        f"input tokens per turn, full history:  mean {statistics.mean(baseline):8.1f}  "
        f"max {max(baseline)}"
    )
    print(f"ratio memora / full history (total):  {sum(sent) / sum(baseline):.3f}")
    print(f"ratio at the last turn:               {sent[-1] / baseline[-1]:.3f}")
    over = sum(1 for s in sent if s > budget)
    print(f"turns over budget:                    {over}")
    print(
        f"LLM calls on the reply path per turn: mean {statistics.mean(reply_path_calls):.3f}  "
        f"max {max(reply_path_calls)}"
    )
    print(
        f"engine overhead per turn (ms):        median {statistics.median(overhead_ms):.2f}  "
        f"p95 {pct(overhead_ms, 95):.2f}"
    )
    print(
        f"after-reply work per turn (ms):       median {statistics.median(after_ms):.2f}  "
        f"p95 {pct(after_ms, 95):.2f}"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--recent", type=int, default=3)
    ap.add_argument("--budget", type=int, default=1000)
    a = ap.parse_args()
    asyncio.run(main(a.turns, a.recent, a.budget))
