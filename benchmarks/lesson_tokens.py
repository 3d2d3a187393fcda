"""What a lesson mode costs in tokens, and that its reply path stays one LLM call per turn.

Run from the repository root::

    .venv/bin/python -m benchmarks.lesson_tokens [--learners 2]

Each learner talks to the real `memora chat` process (the terminal chat: real engine, openai
SDK, SQLite, Chroma) over loopback HTTP to the fake OpenAI server (tests/support/fake_openai.py)
playing the tutor (tests/support/fake_tutor.py): once an ordinary conversation, once through each
lesson mode in memora.modes.LESSONS that this script knows how to drive (DRIVES; others are skipped
and named). Token figures are the fake's usage figures (its deterministic estimate, len/4 + 1 a
message).

Prints per mode: the extraction call's output tokens with no mode vs in the mode (mean, and the
added tokens), the input tokens the mode block adds to each reply request, and the reply path's
LLM calls per learner message (must be 1).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memora.modes import LESSONS
from memora.modes.placement import QUESTIONS
from tests.support.fake_openai import (
    Answer,
    FakeOpenAI,
    FakeRequest,
    _as_reply,
    _reply_text,
    approx_tokens,
)
from tests.support.fake_tutor import mode_block, tutor_responder
from tests.support.terminal import chat, memora_env

ORDINARY = [f"Yesterday I go to the market and buy {n} apples, is it right?" for n in range(8)]
DRIVES: dict[str, list[str]] = {
    "placement": ["/placement", *(f"answer {n}: right" for n in range(1, QUESTIONS + 1))],
    "roleplay": [
        "/roleplay airport",
        "Hello, I want to check in for my flight to Tokyo.",
        "Here is my passport.",
        "One bag, and a window seat, please.",
        "Thank you, bye!",
    ],
}
"""The lines a learner types to go through a mode, by kind."""


@dataclass
class Tally:
    """What the fake model was asked and answered in one run."""

    extraction_out: list[int] = field(default_factory=list)
    mode_block_in: list[int] = field(default_factory=list)
    replies: int = 0


def recording(tally: Tally) -> Callable[[FakeRequest], Answer]:
    def respond(req: FakeRequest) -> Answer:
        answer = tutor_responder(req)
        if req.kind == "structured":
            tally.extraction_out.append(approx_tokens(_reply_text(_as_reply(answer, req.kind))))
        elif req.kind == "reply":
            tally.replies += 1
            block = mode_block(req)
            if block is not None:
                tally.mode_block_in.append(approx_tokens(block))
        return answer

    return respond


def run(lines: list[str], learners: int) -> tuple[Tally, int]:
    """All learners through `lines`; the tally and the number of learner messages sent."""
    tally = Tally()
    with FakeOpenAI() as llm, tempfile.TemporaryDirectory() as tmp:
        llm.responder = recording(tally)
        for n in range(learners):
            data = Path(tmp) / f"learner{n}"
            data.mkdir()
            chat(memora_env(llm, data, MEMORA_MEMORY__MAX_RECENT_TURNS="10"), lines)
    return tally, learners * len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=2)
    args = parser.parse_args()
    base, base_sent = run(ORDINARY, args.learners)
    base_out = statistics.mean(base.extraction_out)
    print(
        f"{args.learners} learners; ordinary conversation: {base_sent} messages, "
        f"{base.replies / base_sent:.2f} reply calls per message, "
        f"extraction output {base_out:.1f} tokens (mean of {len(base.extraction_out)})"
    )
    print(
        f"{'mode':<12}{'extr. out before':>17}{'in mode':>9}{'added':>7}"
        f"{'block in (mean)':>16}{'reply calls/msg':>16}"
    )
    for kind in LESSONS:
        if kind not in DRIVES:
            print(f"{kind:<12} skipped: this benchmark does not know how to drive it")
            continue
        tally, sent = run(DRIVES[kind], args.learners)
        out = statistics.mean(tally.extraction_out)
        block = statistics.mean(tally.mode_block_in) if tally.mode_block_in else 0.0
        print(
            f"{kind:<12}{base_out:>17.1f}{out:>9.1f}{out - base_out:>+7.1f}"
            f"{block:>16.1f}{tally.replies / sent:>16.2f}"
        )


if __name__ == "__main__":
    main()
