"""Fakes we own, registered at real seams (the LLM protocol); never the thing under test."""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from memora.commands import CommandContext, press_button, run_command
from memora.engine import Engine, EngineConfig
from memora.llm import (
    REPLY,
    CallInfo,
    ChatMessage,
    Completion,
    LLMError,
    OnDelta,
    Parsed,
    Usage,
    validated,
)
from memora.privacy.confirmations import yes_no
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from memora.types import ChatRef, UserRef

T = TypeVar("T", bound=BaseModel)


@dataclass
class Call:
    """One recorded call to the fake."""

    kind: str  # "complete" | "parse" | "count"
    instructions: str
    messages: list[ChatMessage]
    schema: str | None = None
    streamed: bool = False  # complete() was given an on_delta callback
    info: CallInfo = REPLY  # the call's kind and the learner's provider identifier


@dataclass(frozen=True)
class CutStream:
    """A reply that fails part-way: streamed, `text` arrives before `error` is raised; not
    streamed, the call just fails."""

    text: str
    error: Exception = field(default_factory=lambda: outage())


def split_deltas(text: str, n: int) -> list[str]:
    """The text so far after each of (at most) n deltas of whole words; the last is `text`."""
    words = re.findall(r"\s+|\S+\s*", text)
    if not words:
        return [text] if text else []
    step = max(1, -(-len(words) // n))
    return ["".join(words[: i + step]) for i in range(0, len(words), step)]


@dataclass
class FakeLLM:
    """A scripted LLM: queued answers per kind, or a default; exceptions in the queue are raised.

    `replies` answer `complete` calls made with the reply prompt, `summaries` those made with the
    summary prompt (told apart by `is_summary`), `parsed` answer `parse` calls (a dict, a JSON
    string, a BaseModel or an exception). Given `on_delta`, `complete` delivers its answer in
    `deltas` pieces of whole words (the text so far each time), `delta_delay` seconds apart; a
    `CutStream` reply delivers its text and then fails.
    """

    replies: deque[str | Exception | CutStream] = field(default_factory=deque)
    summaries: deque[str | Exception | CutStream] = field(default_factory=deque)
    parsed: deque[object] = field(default_factory=deque)
    calls: list[Call] = field(default_factory=list)
    is_summary: Callable[[str], bool] = lambda instr: "summary" in instr.lower()
    delay: float = 0.0
    deltas: int = 4
    delta_delay: float = 0.0
    closed: bool = False

    @staticmethod
    def _usage(instructions: str, messages: list[ChatMessage], out: str) -> Usage:
        text = instructions + "".join(m.content for m in messages)
        return Usage(input_tokens=len(text) // 4 + 1, output_tokens=len(out) // 4 + 1)

    async def complete(
        self,
        instructions: str,
        messages: list[ChatMessage],
        on_delta: OnDelta | None = None,
        *,
        call: CallInfo = REPLY,
    ) -> Completion:
        self.calls.append(
            Call("complete", instructions, list(messages), streamed=on_delta is not None, info=call)
        )
        if self.delay:
            await asyncio.sleep(self.delay)
        summary = self.is_summary(instructions)
        queue = self.summaries if summary else self.replies
        error: Exception | None = None
        if queue:
            item = queue.popleft()
            if isinstance(item, Exception):
                raise item
            if isinstance(item, CutStream):
                text, error = item.text, item.error
            else:
                text = item
        elif summary:
            text = "Summary: " + " | ".join(m.content[:60] for m in messages)[:400]
        else:
            last = next((m.content for m in reversed(messages) if m.role == "user"), "")
            text = f"Echo: {last}"
        if on_delta is not None:
            for i, so_far in enumerate(split_deltas(text, self.deltas)):
                if i and self.delta_delay:
                    await asyncio.sleep(self.delta_delay)
                await on_delta(so_far)
        if error is not None:
            raise error
        return Completion(text=text, usage=self._usage(instructions, messages, text))

    async def parse(
        self,
        instructions: str,
        messages: list[ChatMessage],
        schema: type[T],
        *,
        call: CallInfo = REPLY,
    ) -> Parsed:
        self.calls.append(Call("parse", instructions, list(messages), schema.__name__, info=call))
        if self.delay:
            await asyncio.sleep(self.delay)
        item: object = self.parsed.popleft() if self.parsed else schema.model_validate({})
        if isinstance(item, Exception):
            raise item
        if isinstance(item, str):  # the model's text, read as the real clients read it
            obj, problem = validated(schema, item)
            usage = self._usage(instructions, messages, item)
            return Parsed(text=item, usage=usage, parsed=obj, problem=problem)
        if isinstance(item, BaseModel):
            obj = schema.model_validate(item.model_dump())
        else:
            obj = schema.model_validate(item)
        raw = obj.model_dump_json()
        return Parsed(text=raw, usage=self._usage(instructions, messages, raw), parsed=obj)

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int:
        self.calls.append(Call("count", instructions, list(messages)))
        return sum(len(m.content) // 4 + 4 for m in messages) + len(instructions) // 4

    async def aclose(self) -> None:
        self.closed = True

    def count(self, kind: str, summary: bool | None = None) -> int:
        """How many calls of a kind were made (optionally only summary / reply ones)."""
        return sum(
            1
            for c in self.calls
            if c.kind == kind and (summary is None or self.is_summary(c.instructions) == summary)
        )


def outage() -> LLMError:
    """The error the real client raises when the service is down."""
    return LLMError("the model service answered HTTP 503")


def as_json(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)


class Clock:
    """Time passed in: tests move it, nothing sleeps."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def clocked_engine(db: Database, clock: Clock, **extra: Any) -> Engine:
    """An engine over `db` with a scripted model, on a clock the test moves."""
    config = EngineConfig(max_input_tokens=1000)
    return Engine(
        db=db, llm=FakeLLM(), counter=LocalTokenCounter(), config=config, clock=clock, **extra
    )


async def forgetme(engine: Engine, chat: ChatRef, user: UserRef) -> str:
    """/forgetme, then its Yes tapped by the same learner in the same chat: what they are told."""
    asked = await run_command(engine, "forgetme", CommandContext(chat, user, ""))
    question = yes_no(asked.buttons)
    assert question is not None, asked.text
    answer = await press_button(engine, chat, user, question[0])
    assert answer.edit is not None, answer.notice
    return answer.edit.text
