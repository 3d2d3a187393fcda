"""What the core needs from a language model: the `LLM` protocol and the values it returns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

from memora.errors import LLMError as LLMError
from memora.types import ChatMessage

T = TypeVar("T", bound=BaseModel)

OnDelta = Callable[[str], Awaitable[None]]
"""Called while a reply is being written, with the whole text so far (not just the new piece)."""


CallKind = Literal["reply", "extraction", "summary"]
"""What a model call is for: each kind has its own reasoning effort and prompt-cache key."""


@dataclass(frozen=True)
class CallInfo:
    """What one model call is and whom it is for, as the provider may be told: its kind, and
    the learner's provider identifier (a keyed hash, never their platform id; see
    memora.llm.identity), sent as `safety_identifier` where the API takes one."""

    kind: CallKind = "reply"
    learner: str | None = None


REPLY = CallInfo()


@dataclass(frozen=True)
class Usage:
    """Token usage reported by the provider for one call: `cached_tokens` are the part of the
    input the provider served from its prompt cache (billed at its cached-input price), and
    `reasoning_tokens` the part of the output the model spent reasoning (billed as output)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True)
class Completion:
    """A text answer and its usage."""

    text: str
    usage: Usage


@dataclass(frozen=True)
class Parsed(Completion, Generic[T]):
    """A structured answer: the validated object plus the raw text.

    `parsed` is None when the model refused, or when its text did not fit the schema even read
    leniently; `problem` then says which, so the caller can ask again or record why.
    """

    parsed: T | None = None
    problem: str | None = None


CONTEXT_EXCEEDED = "context_length_exceeded"
TIMED_OUT = "timed_out"  # LLMError.code of a call that hit its time limit
"""The error code of a request longer than the model's context (OpenAI's, llama.cpp's server's),
also given to a structured answer the context cut short (ChatCompletionsLLM._parse)."""


class LLM(Protocol):
    """What the core needs from a language model."""

    async def complete(
        self,
        instructions: str,
        messages: list[ChatMessage],
        on_delta: OnDelta | None = None,
        *,
        call: CallInfo = REPLY,
    ) -> Completion:
        """The answer to a call of this kind for this learner (`call`). With `on_delta`, the
        text is streamed: `on_delta` is awaited with the whole text so far each time more
        arrives (possibly never, e.g. from a server that cannot stream). The Completion returned
        is the same either way, and a failure part-way raises LLMError like any other."""
        ...

    async def parse(
        self,
        instructions: str,
        messages: list[ChatMessage],
        schema: type[T],
        *,
        call: CallInfo = REPLY,
    ) -> Parsed[T]: ...

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int: ...

    async def aclose(self) -> None: ...
