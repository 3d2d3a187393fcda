"""300-turn synthetic conversation through the real engine against a zero-latency fake LLM.

Prints input tokens sent per turn against a full-history baseline (same tokenizer, same system
prompt), LLM calls per turn on the reply path, and the engine's own overhead per turn.

    .venv/bin/python -m benchmarks.core_turns [--turns 300] [--recent 3] [--budget 1500]
        [--reply-tokens N] [--memories benchmarks/data/heavy_learners_dev.json]
        [--memory-tokens 500] [--grid]

(``--budget`` and ``--memory-tokens`` default to the product's ``max_input_tokens`` and
``memory_tokens``.) ``--reply-tokens``: the fake tutor's reply is about N o200k tokens (default:
its short stock reply, ~74). ``--memories``: the learner has the memories of the first learner
in that file (120 memories with terms; situations from the ``*_situations.json`` beside it) in a
real ``MemoryStore`` (embedded Chroma, LocalUSE), so every turn carries the memory block the product
sends a learner with a year of memories (``memory_tokens`` past the budget), and the mean
memory block is printed. ``--grid`` prints the table of docs/benchmarks.md ("The input budget
holds the memory budget"): reply-path calls per turn over reply lengths × (no memories, or
those memories with a memory budget) × input budgets. The fake model reports o200k input usage,
as an OpenAI model does, so the budget's calibration stays at 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memora.config import DEFAULT_MAX_INPUT_TOKENS, DEFAULT_MEMORY_TOKENS
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.llm import ChatMessage, Completion, OnDelta, Parsed, Usage
from memora.longterm import MemoryStore, NewMemory
from memora.longterm.embeddings import LocalUSE
from memora.shortterm.instructions import MEMORY_BLOCK
from memora.shortterm.tokens import LocalTokenCounter, o200k
from memora.storage import Database

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


RAW = LocalTokenCounter()  # o200k with per-message framing, never calibrated


class ZeroLatencyLLM:
    """Answers at once; counts calls so the benchmark can see which happen on the reply path."""

    def __init__(self, reply: str = REPLY) -> None:
        self.calls = 0
        self.reply = reply
        self.memory_block = 0  # o200k tokens of the memory lines in the last reply request

    async def complete(
        self,
        instructions: str,
        messages: list[ChatMessage],
        on_delta: OnDelta | None = None,
        **_: Any,
    ) -> Completion:
        self.calls += 1
        if "summary" in instructions.lower():
            text = " ".join(m.content[:400] for m in messages)[:700]
        else:
            text = self.reply
            lines = [m.content for m in messages if m.content.startswith(MEMORY_BLOCK)]
            self.memory_block = len(o200k().encode(lines[0][len(MEMORY_BLOCK) :])) if lines else 0
        if on_delta is not None:
            await on_delta(text)
        # the usage an OpenAI model reports (its tokenizer is o200k): the budget's calibration
        # stays at 1, so the figures are the o200k budget's own
        usage = Usage(RAW.raw_count(instructions, messages), RAW.text_tokens(text))
        return Completion(text, usage)

    async def parse(
        self, instructions: str, messages: list[ChatMessage], schema: type[BaseModel], **_: Any
    ) -> Parsed:
        self.calls += 1
        return Parsed("{}", Usage(10, 2), schema.model_validate({}))

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int:
        return 0

    async def aclose(self) -> None:
        return None


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def reply_of(tokens: int) -> str:
    """The stock reply, repeated and cut to about `tokens` o200k tokens (0: the stock reply)."""
    if not tokens:
        return REPLY
    enc = o200k()
    ids = enc.encode(" ".join([REPLY] * (tokens // 40 + 1)))[:tokens]
    return str(enc.decode(ids))


HEAVY_LEARNERS = Path(__file__).parent / "data" / "heavy_learners_dev.json"


def first_learner(path: Path) -> list[NewMemory]:
    """The first learner of a heavy-learners file, as the extraction call hands memories to the
    store (situations from the ``*_situations.json`` beside the file, when there is one)."""
    side = path.with_name(path.stem + "_situations.json")
    situations = json.loads(side.read_text("utf-8")) if side.exists() else {}
    return [
        NewMemory(
            m["text"],
            category=m.get("category", "other"),
            terms=tuple(m.get("terms") or ()),
            situations=tuple(situations.get(m["id"]) or ()),
        )
        for m in json.loads(path.read_text("utf-8"))["users"][0]["memories"]
    ]


async def heavy_store(path: Path, folder: Path) -> MemoryStore:
    """A real store holding the first learner of a heavy-learners file as user 1."""
    store = await MemoryStore.create(folder, LocalUSE())
    await store.writer.add_many(1, first_learner(path))
    return store


@dataclass(frozen=True)
class Setting:
    """One conversation to run: its length, window, budgets, reply length and memories."""

    turns: int = 300
    recent: int = 3
    budget: int = DEFAULT_MAX_INPUT_TOKENS
    reply_tokens: int = 0
    memories: Path | None = None
    memory_tokens: int = DEFAULT_MEMORY_TOKENS


@dataclass
class Run:
    """One conversation's figures (see `main` for what is printed)."""

    reply_tokens: int
    sent: list[int] = field(default_factory=list)  # input tokens counted per turn
    baseline: list[int] = field(default_factory=list)  # the full history's, same tokenizer
    calls: list[int] = field(default_factory=list)  # LLM calls on the reply path per turn
    block: list[int] = field(default_factory=list)  # o200k tokens of the memory lines
    overhead_ms: list[float] = field(default_factory=list)
    after_ms: list[float] = field(default_factory=list)


async def converse(setting: Setting) -> Run:
    """`turns` turns of one learner through the real engine (SQLite, and with `memories` a real
    MemoryStore holding a heavy learner's memories)."""
    turns, memories = setting.turns, setting.memories
    rng = random.Random(1)
    llm = ZeroLatencyLLM(reply_of(setting.reply_tokens))
    run = Run(len(o200k().encode(llm.reply)))
    counter = LocalTokenCounter()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "bench.sqlite3")
        await db.open()
        store = await heavy_store(memories, Path(tmp) / "chroma") if memories else None
        config = EngineConfig(
            max_input_tokens=setting.budget,
            max_recent_turns=setting.recent,
            memory_tokens=setting.memory_tokens,
        )
        engine = Engine(db=db, llm=llm, counter=counter, config=config, store=store)
        chat, user = ChatRef(1), UserRef(1, "learner")
        history: list[ChatMessage] = []
        for i in range(turns):
            text = f"{rng.choice(TOPICS)} (turn {i})"
            before = llm.calls
            t0 = time.perf_counter()
            reply = await engine.handle_turn(chat, user, text)
            t1 = time.perf_counter()
            run.calls.append(llm.calls - before)
            await engine.drain()  # the after-reply work (summary) timed on its own
            run.after_ms.append((time.perf_counter() - t1) * 1000)
            run.overhead_ms.append((t1 - t0) * 1000)
            assert reply.ok and reply.stats is not None, reply.text
            run.sent.append(reply.stats.usage.counted_input)
            if store is not None:
                run.block.append(llm.memory_block)
            run.baseline.append(
                counter.count_sync(config.instructions, [*history, ChatMessage("user", text)])
            )
            history += [ChatMessage("user", text), ChatMessage("assistant", reply.text)]
        if store is not None:
            await store.close()
        await db.close()
    return run


async def main(setting: Setting) -> None:
    run = await converse(setting)
    sent, budget, memories = run.sent, setting.budget, setting.memories
    print(
        f"turns: {setting.turns}  max_recent_turns: {setting.recent}  max_input_tokens: {budget}  "
        f"memory_tokens: {setting.memory_tokens}  reply: ~{run.reply_tokens} tokens  "
        "memories: " + (f"{memories.name} (first learner)" if memories else "none")
    )
    if run.block:
        print(
            f"memory block per turn (o200k):         mean {statistics.mean(run.block):8.1f}  "
            f"max {max(run.block)}"
        )
    print(
        f"input tokens per turn, memora:        mean {statistics.mean(sent):8.1f}  max {max(sent)}"
    )
    print(
        f"input tokens per turn, full history:  mean {statistics.mean(run.baseline):8.1f}  "
        f"max {max(run.baseline)}"
    )
    print(f"ratio memora / full history (total):  {sum(sent) / sum(run.baseline):.3f}")
    print(f"ratio at the last turn:               {sent[-1] / run.baseline[-1]:.3f}")
    over = sum(1 for s in sent if s > budget)
    print(f"turns over budget:                    {over}")
    print(
        f"LLM calls on the reply path per turn: mean {statistics.mean(run.calls):.3f}  "
        f"max {max(run.calls)}"
    )
    print(
        f"engine overhead per turn (ms):        median {statistics.median(run.overhead_ms):.2f}  "
        f"p95 {pct(run.overhead_ms, 95):.2f}"
    )
    print(
        f"after-reply work per turn (ms):       median {statistics.median(run.after_ms):.2f}  "
        f"p95 {pct(run.after_ms, 95):.2f}"
    )


GRID_REPLIES = (0, 100, 150, 200, 250, 300)  # 0: the stock reply (~74 tokens)
# (with the heavy learner's memories, memory_tokens, max_input_tokens)
GRID_COLUMNS = (
    (False, 250, 1000),
    (True, 250, 1000),
    (True, 250, 1250),
    (True, 500, 1250),
    (True, 500, 1500),
    (True, 500, 2000),
)


async def grid(turns: int, recent: int, memories: Path) -> None:
    """LLM calls on the reply path per turn (and mean input tokens), reply length × columns."""
    print(
        f"LLM calls on the reply path per turn (mean input tokens), {turns} turns, "
        f"max_recent_turns {recent}; 'heavy': the first learner of {memories.name}\n"
    )
    heads = [
        ("heavy" if heavy else "no memories") + (f", memory {m}" if heavy else "") + f", input {b}"
        for heavy, m, b in GRID_COLUMNS
    ]
    print("| reply | " + " | ".join(heads) + " |")
    print("|---" * (len(heads) + 1) + "|")
    for reply_tokens in GRID_REPLIES:
        cells, size = [], 0
        for heavy, memory_tokens, budget in GRID_COLUMNS:
            run = await converse(
                Setting(
                    turns, recent, budget, reply_tokens, memories if heavy else None, memory_tokens
                )
            )
            size = run.reply_tokens
            cells.append(f"{statistics.mean(run.calls):.2f} ({statistics.mean(run.sent):.0f})")
        print(f"| ~{size} tokens | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    d = Setting()
    ap.add_argument("--turns", type=int, default=d.turns)
    ap.add_argument("--recent", type=int, default=d.recent)
    ap.add_argument("--budget", type=int, default=d.budget)
    ap.add_argument("--reply-tokens", type=int, default=d.reply_tokens)
    ap.add_argument("--memories", type=Path, default=d.memories)
    ap.add_argument("--memory-tokens", type=int, default=d.memory_tokens)
    ap.add_argument("--grid", action="store_true")
    a = ap.parse_args()
    if a.grid:
        heavy = a.memories or HEAVY_LEARNERS
        asyncio.run(grid(a.turns, a.recent, heavy))
    else:
        asyncio.run(
            main(Setting(a.turns, a.recent, a.budget, a.reply_tokens, a.memories, a.memory_tokens))
        )
