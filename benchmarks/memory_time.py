"""How often the reply's context holds the current fact and leaves out the stale one (issue 42).

Run from the repository root (``nice -n 19`` on a shared machine; ~20 s)::

    .venv/bin/python -m benchmarks.memory_time [FILE]

Default: ``benchmarks/data/memory_time.json``, a held-out set of ~40 learners writing English,
繁體 and 简体, in the style of LongMemEval's knowledge-update and temporal-reasoning categories
(a moved city, a changed level, a passed exam, an ended trip, "what was my level before?").
Each learner says a few filler facts, then the case's turns; each turn's extraction is scripted
as a careful model answers it and written by :func:`memora.extraction.apply` into a
real :class:`~memora.longterm.MemoryStore` (embedded Chroma in a temporary folder, LocalUSE),
with the clock at the turn's date. Then the case's question, on its date, goes through
:func:`memora.longterm.retrieval_policy.context_lines`, what the engine puts in the memory
block, at the default budget.

Two runs: **before**, the rule before time (no end dates in the extraction, no ``today``: no
fact is ever over, no question about the past brings anything back) and **after** (the
extraction's ``since``/``until``, the learner's today, the past on request). Printed: the share
of cases whose context holds every current fact the case names (``must``), the share of cases
with a stale fact whose context leaves it out (``must_not``), per kind and overall.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from memora import clock
from memora.config import DEFAULT_MEMORY_TOKENS
from memora.extraction import ExtractedMemory, ExtractionOutcome, apply
from memora.longterm import MemoryStore
from memora.longterm.embeddings import LocalUSE
from memora.longterm.retrieval_policy import ReplyQuery, RetrievalPolicy, context_lines

DATA = Path(__file__).resolve().parent / "data" / "memory_time.json"
FILLER_DATE = "2025-12-01"
KEYS = ("all", "knowledge-update", "temporal", "past", "en", "zh_Hant", "zh_Hans")


@dataclass
class Score:
    holds: int = 0
    cases: int = 0
    leaves_out: int = 0
    with_stale: int = 0
    failed: list[str] = field(default_factory=list)

    def add(self, case_id: str, holds: bool, stale: bool | None) -> None:
        self.cases += 1
        self.holds += holds
        if stale is not None:
            self.with_stale += 1
            self.leaves_out += not stale
        if not holds or stale:
            self.failed.append(case_id)

    def line(self, name: str) -> str:
        held = self.holds / self.cases if self.cases else 0.0
        left = self.leaves_out / self.with_stale if self.with_stale else 1.0
        return (
            f"{name:<18} holds the current fact {held:5.2f} ({self.holds}/{self.cases})"
            f"   leaves out the stale one {left:5.2f} ({self.leaves_out}/{self.with_stale})"
        )


def _at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(hour=9, tzinfo=UTC)


async def _say(
    store: MemoryStore, user_id: int, message: str, items: Sequence[dict[str, Any]], timed: bool
) -> None:
    """One learner message and its scripted extraction, written as the engine writes it:
    `replaces` names the text of a memory the call was shown (its id in that list, m1…)."""
    existing = await store.searcher.similar(user_id, message, k=5)
    memories = []
    for item in items:
        shown = [m.text for m in existing]
        target = item.get("replaces")
        memories.append(
            ExtractedMemory(
                text=item["text"],
                category=item.get("category", "other"),
                replaces=f"m{shown.index(target) + 1}" if target in shown else None,
                since=item.get("since") if timed else None,
                until=item.get("until") if timed else None,
            )
        )
    outcome = ExtractionOutcome(memories=memories, listed=len(existing))
    await apply(store, user_id, outcome, existing, chat_id=user_id, message_id=None)


async def run_case(
    store: MemoryStore, user_id: int, case: dict[str, Any], filler: Sequence[str], timed: bool
) -> tuple[bool, bool | None, dict[str, str]]:
    """(the context holds every current fact, it holds a stale one (None: none named), lines)."""
    clock.use(lambda: _at(FILLER_DATE))
    for text in filler:
        await _say(store, user_id, text, [{"text": text, "category": "personal"}], timed)
    for turn in case["turns"]:
        clock.use(lambda when=turn["at"]: _at(when))
        await _say(store, user_id, turn["message"], turn["extraction"], timed)
    ask = case["ask"]
    clock.use(lambda: _at(ask["at"]))
    policy = RetrievalPolicy(DEFAULT_MEMORY_TOKENS, min_score=store.profile.min_score)
    today: date | None = date.fromisoformat(ask["at"]) if timed else None
    lines, _tokens = await context_lines(
        store, policy, ReplyQuery(user_id, ask["message"], today=today)
    )
    block = "\n".join(lines.values()).casefold()
    holds = all(s.casefold() in block for s in case["must"])
    stale = any(s.casefold() in block for s in case["must_not"]) if case["must_not"] else None
    return holds, stale, lines


async def main(data: dict[str, Any], verbose: bool) -> None:
    cases = data["cases"]
    embedder = LocalUSE()
    with tempfile.TemporaryDirectory() as folder:
        store = await MemoryStore.create(Path(folder) / "chroma", embedder)
        try:
            for name, timed in (("before", False), ("after", True)):
                scores: dict[str, Score] = defaultdict(Score)
                for n, case in enumerate(cases):
                    user_id = 1000 * (2 if timed else 1) + n
                    filler = data["filler"][case["lang"]]
                    holds, stale, lines = await run_case(store, user_id, case, filler, timed)
                    for key in ("all", case["kind"], case["lang"]):
                        scores[key].add(case["id"], holds, stale)
                    if verbose and (not holds or stale):
                        print(f"  [{name}] {case['id']}: " + " | ".join(lines.values()))
                print(f"== {name} ({len(cases)} cases, memory_tokens {DEFAULT_MEMORY_TOKENS})")
                for key in (
                    "all",
                    "knowledge-update",
                    "temporal",
                    "past",
                    "en",
                    "zh_Hant",
                    "zh_Hans",
                ):
                    print("  " + scores[key].line(key))
                if scores["all"].failed:
                    print("  missed: " + ", ".join(scores["all"].failed))
        finally:
            clock.use(None)
            await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("file", nargs="?", type=Path, default=DATA)
    parser.add_argument("-v", "--verbose", action="store_true", help="print each missed context")
    args = parser.parse_args()
    asyncio.run(main(json.loads(args.file.read_text(encoding="utf-8")), args.verbose))
