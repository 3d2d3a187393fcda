"""How many tokens the after-reply extraction call takes, per form, and whether it fits a context.

The call is built by the real `memora.longterm.extraction.extract` for the scripted learner turns
of benchmarks/learner_extraction.py (learner model on: profile, mistakes, vocabulary), in both
forms (`full`, the default; `compact`, what the engine switches to once a server answers
`context_length_exceeded`), without and with the search-terms backfill (5 term-less memories
of the learner listed in <needs_terms>, see README "Search terms"), and with 3 existing
memories shown for `replaces`. Counted locally with o200k over what a JSON-mode server is sent
(the instructions with the schema sketch, the input message). With --base-url the same requests
go to a real OpenAI-compatible server through the real SDK with `max_tokens` 1, and the server's
own prompt token count is printed (its tokenizer and chat template), or the error it answered:

    .venv/bin/python benchmarks/extraction_size.py
    .venv/bin/python benchmarks/extraction_size.py --base-url http://127.0.0.1:8011/v1 \\
        --model smollm2 --n-ctx 2048 [--turns 4]

With --n-ctx, "room" is what the context leaves for the answer (llama.cpp refuses a prompt of
n_ctx tokens or more, and cuts the answer at the context's end). With --long each message is
followed by a pasted email (~1,400 characters), and with --base-url one whole `extract()` then
runs through the real seam, as the engine runs it: the full form first, the compact form if the
server refuses the full one as too long; its outcome is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time
from datetime import UTC, datetime
from typing import Any, TypeVar

from learner_extraction import TURNS, _profile_lines
from pydantic import BaseModel

from memora.llm import (
    SCHEMA_INSTRUCTIONS,
    ChatCompletionsLLM,
    ChatMessage,
    Completion,
    LLMError,
    OnDelta,
    Parsed,
    Usage,
    schema_sketch,
)
from memora.longterm.extraction import MAX_BACKFILL, Form, extract
from memora.longterm.records import Memory
from memora.tokens import LocalTokenCounter

T = TypeVar("T", bound=BaseModel)
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _memory(n: int, text: str, category: str = "other") -> Memory:
    return Memory(f"m{n}", 1, text, "manual", category, "2026-11-01", "2026-11-01")


EXISTING = [
    _memory(1, "使用者住在台北，是一個 software engineer。", "personal"),
    _memory(2, "The user confuses 'since' and 'for'.", "difficulty"),
    _memory(3, "使用者喜歡看 Netflix 的英國犯罪影集學英文。", "preference"),
]
TERMLESS = [
    _memory(10 + i, text)
    for i, text in enumerate(
        [
            "我妹妹在日本念護理。",
            "I prefer short explanations with one example.",
            "我每天搭捷運上班，通勤大約 40 分鐘。",
            "My cat is called Mochi.",
            "The user's company pays for the TOEIC exam.",
        ][:MAX_BACKFILL]
    )
]


class Capture:
    """An LLM that records the one structured request `extract` makes and answers it empty."""

    def __init__(self) -> None:
        self.sent: tuple[str, list[ChatMessage], type[BaseModel]] | None = None

    async def complete(
        self, instructions: str, messages: list[ChatMessage], on_delta: OnDelta | None = None
    ) -> Completion:
        raise AssertionError("no completion call")

    async def parse(
        self, instructions: str, messages: list[ChatMessage], schema: type[T]
    ) -> Parsed[T]:
        self.sent = (instructions, messages, schema)
        empty = schema.model_validate({})
        return Parsed(text=empty.model_dump_json(), usage=Usage(), parsed=empty)

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int:
        return 0

    async def aclose(self) -> None:
        pass


PASTED = (
    " 可以幫我看這封 email 嗎？ 'Dear Ms. Chen, I am writing to follow up on the project meeting "
    "we had last Tuesday. As we discussed, the team will deliver the first version of the "
    "report before the end of the month, and I will send you the slides by Friday. I would "
    "also like to ask whether it is possible to move our next meeting to the morning, because "
    "I have an English class every Thursday afternoon. Please let me know if this works for "
    "you. In addition, I attached the budget table that you asked for; the numbers for the "
    "second quarter are still estimates and may change after the finance team checks them. "
    "If you have any questions about the table or the schedule, please do not hesitate to "
    "contact me. Thank you again for your support and for the helpful comments on the draft. "
    "I look forward to hearing from you soon. Best regards, Mei Lin, Software Engineer.'"
)


async def request(
    turn: int, form: Form, backfill: bool, long: bool = False
) -> tuple[str, list[ChatMessage], Any]:
    """The extraction request for one scripted turn, as `extract` builds it."""
    message, reply = TURNS[turn][0] + (PASTED if long else ""), TURNS[turn][1]
    capture = Capture()
    await extract(
        capture,
        user_message=message,
        assistant_reply=reply,
        existing=EXISTING,
        now=NOW,
        profile_lines=_profile_lines(turn),
        needs_terms=TERMLESS if backfill else (),
        form=form,
    )
    assert capture.sent is not None
    return capture.sent


async def server_tokens(
    llm: ChatCompletionsLLM, instructions: str, messages: list[ChatMessage], schema: Any
) -> str:
    """The server's prompt tokens for the request (in JSON mode, as the engine sends it)."""
    try:
        answer = await llm.parse(instructions, messages, schema)
    except LLMError as exc:
        return f"refused: {exc}"
    return str(answer.usage.input_tokens)


NEEDS_TERMS = re.compile(r"<needs_terms>\n(.*?)\n</needs_terms>", re.DOTALL)


def _row(label: str, values: list[int], n_ctx: int | None) -> str:
    mid, top = statistics.median(values), max(values)
    room = f"  room at {n_ctx}: min {n_ctx - top}" if n_ctx else ""
    return f"{label:<36} median {mid:7.1f}  max {top:5d}{room}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="a real OpenAI-compatible server (Chat Completions)")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--api-key", default="not-needed")
    parser.add_argument("--n-ctx", type=int, default=None, help="the server's context, if known")
    parser.add_argument("--turns", type=int, default=len(TURNS))
    parser.add_argument("--long", action="store_true", help="a pasted email after each message")
    args = parser.parse_args()
    counter = LocalTokenCounter()
    llm = None
    if args.base_url:
        # max_tokens 1: only the prompt's size is wanted. The first request is refused as
        # json_schema by llama.cpp's server and asked again in JSON mode, as the engine does.
        llm = ChatCompletionsLLM(
            model=args.model,
            api_key=args.api_key,
            base_url=args.base_url,
            timeout=600,
            max_retries=0,
            max_output_tokens=1,
        )
    turns = range(min(args.turns, len(TURNS)))
    print(f"Extraction call size, learner model on, {len(turns)} scripted turns, 3 memories shown")
    for form in ("full", "compact"):
        base: list[int] = []
        for backfill in (False, True):
            local: list[int] = []
            remote: list[str] = []
            listed = 0
            for turn in turns:
                instructions, messages, schema = await request(turn, form, backfill, args.long)
                block = NEEDS_TERMS.search(messages[-1].content)
                listed = len(block.group(1).splitlines()) if block else 0
                sent = instructions + SCHEMA_INSTRUCTIONS.format(schema=schema_sketch(schema))
                local.append(counter.count_sync(sent, messages))
                if llm is not None:
                    remote.append(await server_tokens(llm, instructions, messages, schema))
            label = f"{form}, {listed} term-less listed"
            print(_row(f"{label} (o200k)", local, None))
            numbers = [int(r) for r in remote if r.isdigit()]
            if numbers:
                print(_row(f"{label} (server)", numbers, args.n_ctx))
            refused = [r for r in remote if not r.isdigit()]
            if refused:
                print(f"{'':<36} {len(refused)} refused, e.g. {refused[0]}")
            if backfill:
                added = [b - a for a, b in zip(base, local, strict=True)]
                print(f"{'':<36} the backfill adds {statistics.median(added):.0f} o200k tokens")
            base = local
    if llm is not None:
        if args.long:
            await one_extraction(llm)
        await llm.aclose()


async def one_extraction(llm: ChatCompletionsLLM) -> None:
    """One whole extraction of a long message through the real seam, as the engine makes it."""
    llm.max_output_tokens = 200  # now the answer is wanted
    started = time.monotonic()
    outcome = await extract(
        llm,
        user_message=TURNS[0][0] + PASTED,
        assistant_reply=TURNS[0][1],
        existing=EXISTING,
        now=NOW,
        profile_lines=_profile_lines(0),
        needs_terms=TERMLESS,
    )
    seconds = time.monotonic() - started
    print(
        f"one extract() of turn 1 + the email: form {outcome.form}, error {outcome.error}, "
        f"{len(outcome.memories)} memories, terms for {sorted(outcome.terms_for)}, "
        f"input {outcome.usage.input_tokens} output {outcome.usage.output_tokens} tokens, "
        f"{seconds:.0f} s"
    )


if __name__ == "__main__":
    asyncio.run(main())
