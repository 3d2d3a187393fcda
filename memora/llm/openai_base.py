"""What both OpenAI APIs share (`OpenAILLM`): the client, errors as LLMError, streaming with its
fallback, structured output in the best form the server accepts (per schema), the optional
parameters each call kind sends and their refusals learned (memora/llm/learned.py). One subclass
per API (responses.py, chat_completions.py) says what its API can do with class attributes and
`_optional` instead of branching on the API name."""

from __future__ import annotations

import functools
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

import openai
from openai import AsyncOpenAI

from memora.errors import LLMError
from memora.llm.learned import Learned
from memora.llm.pacing import AdaptiveTimeout
from memora.llm.protocol import (
    REPLY,
    TIMED_OUT,
    CallInfo,
    CallKind,
    Completion,
    OnDelta,
    Parsed,
    T,
    Usage,
)
from memora.llm.sdk_errors import (
    FormatRefused,
    ParamRefused,
    StreamRefused,
    guard,
    param_refusals,
    refuses_format,
    refuses_schema,
    translated,
)
from memora.llm.structured import (
    SCHEMA_INSTRUCTIONS,
    STRUCTURED_MODES,
    StructuredMode,
    schema_sketch,
)
from memora.types import ChatMessage

log = logging.getLogger(__name__)

Api = Literal["responses", "chat_completions"]


R = TypeVar("R")


@dataclass(frozen=True)
class StructuredAsk(Generic[T]):
    """One request for structured output, as each API sends it: the form it is asked in, the
    instructions written for that form (the schema spelled out unless the server enforces it),
    the messages, the schema the answer is read as, and the call."""

    mode: StructuredMode
    instructions: str
    messages: list[ChatMessage]
    schema: type[T]
    call: CallInfo


class OpenAILLM(ABC):
    """What both OpenAI APIs share: the client, errors as LLMError, streaming with its fallback.

    A subclass per API implements `_create` (one plain answer), `_stream` (the answer as it is
    written) and `_parse` (structured output); `OpenAILLM.for_api(...)` picks the class.
    """

    api: ClassVar[Api]
    usage_fields: ClassVar[tuple[str, str]]
    """The names of the input and output token counts in this API's usage object."""
    usage_details: ClassVar[tuple[str, str]]
    """The names of its input and output details (their `cached_tokens`, `reasoning_tokens`)."""
    _by_api: ClassVar[dict[str, type[OpenAILLM]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        OpenAILLM._by_api[cls.api] = cls  # what `for_api` picks from

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        reasoning_effort: str | None = None,
        efforts: Mapping[CallKind, str] | None = None,
        store: bool = False,
        max_output_tokens: int | None = None,
        pacing: AdaptiveTimeout | None = None,
        learned: Learned | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self.model = model
        # Background clients (summary, extraction): the time limit follows the endpoint
        self.pacing = pacing
        # The reasoning effort per call kind ("" or absent: none sent, the model's default);
        # `reasoning_effort` alone is the reply's (as [llm] reasoning_effort is).
        self.efforts: dict[CallKind, str] = dict(efforts or {})
        if reasoning_effort is not None:
            self.efforts["reply"] = reasoning_effort
        # Whether the provider may keep requests and answers (Responses `store`; off unless the
        # operator opts in: /forgetme cannot reach a provider's copy).
        self.store = store
        # A cap on each answer, for local servers: without one, llama.cpp's server lets a small
        # model that repeats itself write until its context is full (minutes on a CPU).
        self.max_output_tokens = max_output_tokens
        # Learned, not configured: refused parameters, streams and structured forms.
        self.learned = learned or Learned()
        self._client = client or AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    @staticmethod
    def for_api(api: Api, **kwargs: Any) -> OpenAILLM:
        """The client for `api` ("responses" or "chat_completions"), built with `kwargs`."""
        return OpenAILLM._by_api[api](**kwargs)

    @property
    def streams(self) -> bool:
        """Whether a reply asked for with `on_delta` is streamed (False once the server refused)."""
        return self.learned.streams(self.model)

    @property
    def structured_mode(self) -> StructuredMode:
        """How structured output is asked for now for any schema the server has not refused
        (it only moves down STRUCTURED_MODES)."""
        return self.learned.form(self.model)

    def structured_mode_for(self, schema: type[Any]) -> StructuredMode:
        """How structured output is asked for now for `schema`."""
        return self.learned.form(self.model, schema.__name__)

    def _effort(self, call: CallInfo) -> str | None:
        """The reasoning effort sent with `call`, unless none is set or the model refused it."""
        effort = self.efforts.get(call.kind) or None
        return effort if effort and self.learned.takes(self.model, "reasoning") else None

    def _taken(self, params: dict[str, Any]) -> dict[str, Any]:
        """`params` (wire names) minus those this model has refused."""
        named = {"reasoning_effort": "reasoning"}
        return {k: v for k, v in params.items() if self.learned.takes(self.model, named.get(k, k))}

    async def _sent(self, create: Callable[..., Awaitable[R]], **kwargs: Any) -> R:
        """One SDK request; a refusal of one of its optional parameters raises ParamRefused."""
        with param_refusals(kwargs):
            return await create(**kwargs)

    async def _learning(self, attempt: Callable[[], Awaitable[R]]) -> R:
        """`attempt` again, without the parameter, each time the server refuses one."""
        while True:
            try:
                return await attempt()
            except ParamRefused as refused:
                self.learned.refuse_param(self.model, refused.param, refused.why)

    def _usage(self, raw: object) -> Usage:
        if raw is None:
            return Usage()
        inp, out = self.usage_fields
        inp_details, out_details = (getattr(raw, name, None) for name in self.usage_details)
        return Usage(
            int(getattr(raw, inp, 0) or 0),
            int(getattr(raw, out, 0) or 0),
            # DeepSeek reports its context cache's hits beside the totals instead
            int(
                getattr(inp_details, "cached_tokens", 0)
                or getattr(raw, "prompt_cache_hit_tokens", 0)
                or 0
            ),
            int(getattr(out_details, "reasoning_tokens", 0) or 0),
        )

    # -- the protocol --------------------------------------------------------------------------
    async def complete(
        self,
        instructions: str,
        messages: list[ChatMessage],
        on_delta: OnDelta | None = None,
        *,
        call: CallInfo = REPLY,
    ) -> Completion:
        completion = await self._learning(
            functools.partial(self._complete, instructions, messages, on_delta, call)
        )
        if not completion.text.strip():
            raise LLMError("the model returned an empty answer")
        return completion

    async def _complete(
        self,
        instructions: str,
        messages: list[ChatMessage],
        on_delta: OnDelta | None,
        call: CallInfo,
    ) -> Completion:
        if on_delta is None or not self.streams:
            return await self._paced(
                lambda client: guard(self._create(client, instructions, messages, call))
            )
        try:
            return await self._stream(instructions, messages, on_delta, call)
        except StreamRefused:
            # Some OpenAI-compatible servers reject stream=true (or stream_options). Ask
            # again without streaming; if that works, the server cannot stream: stop trying.
            completion = await guard(self._create(self._client, instructions, messages, call))
            self.learned.refuse_stream(self.model)
            return completion

    async def parse(
        self,
        instructions: str,
        messages: list[ChatMessage],
        schema: type[T],
        *,
        call: CallInfo = REPLY,
    ) -> Parsed[T]:
        """The answer as a `schema` instance, asked for in the best form the server accepts.

        A server that refuses the form (HTTP 400/422/500 naming it) is asked again, once, in the
        next form of STRUCTURED_MODES, and it is remembered for the rest of the process, as
        streaming is: for this schema alone when the server said the schema is invalid (another
        schema keeps its strict form), for every schema when it refused the form itself. Until
        a form has worked once, its request is sent without the SDK's retries: a refusal would
        only be refused again.
        """
        while True:
            mode = self.structured_mode_for(schema)
            formatted = self._format_instructions(mode, instructions, schema)
            ask = StructuredAsk(mode, formatted, messages, schema, call)
            client = self._client
            if not self.learned.confirmed(self.model):
                client = client.with_options(max_retries=0)
            try:
                with translated():
                    try:
                        answer = await self._learning(
                            functools.partial(
                                self._paced, functools.partial(self._parse, ask=ask), client
                            )
                        )
                    except openai.APIStatusError as exc:
                        if mode != STRUCTURED_MODES[-1] and refuses_format(exc):
                            raise FormatRefused from exc
                        raise
            except FormatRefused as refused:
                cause = refused.__cause__
                alone = isinstance(cause, openai.APIStatusError) and refuses_schema(cause)
                self.learned.refuse_form(
                    self.model, mode, schema.__name__ if alone else None, cause
                )
                continue
            self.learned.confirm(self.model)
            return answer

    def _format_instructions(self, mode: StructuredMode, instructions: str, schema: Any) -> str:
        """The instructions, with the schema spelled out unless the server enforces it."""
        if mode == "json_schema":
            return instructions
        return instructions + SCHEMA_INSTRUCTIONS.format(schema=schema_sketch(schema))

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int:
        """The provider's own count (the Responses API's endpoint, whichever API replies)."""
        resp = await guard(
            self._client.responses.input_tokens.count(
                model=self.model,
                instructions=instructions,
                input=[m.as_dict() for m in messages],  # type: ignore[misc]
            )
        )
        return int(resp.input_tokens)

    async def _paced(
        self, call: Callable[[AsyncOpenAI], Awaitable[R]], client: AsyncOpenAI | None = None
    ) -> R:
        """Run one call through `client` (this one's by default) with the background time limit
        when this client has one (`pacing`): what the call took, or that it timed out, sets the
        next call's limit, and a timeout says both limits."""
        client = client or self._client
        if self.pacing is None:
            return await call(client)
        limit = self.pacing.current
        started = time.monotonic()
        try:
            result = await call(client.with_options(timeout=limit))
        except (openai.APITimeoutError, LLMError) as exc:
            if isinstance(exc, LLMError) and exc.code != TIMED_OUT:
                raise
            self.pacing.timed_out(limit)
            raise LLMError(
                f"the model service timed out after {limit:.0f} s; its next background call "
                f"may take {self.pacing.current:.0f} s ([llm] background_timeout_max)",
                TIMED_OUT,
            ) from exc
        self.pacing.took(time.monotonic() - started)
        return result

    async def aclose(self) -> None:
        await self._client.close()

    # -- per API ---------------------------------------------------------------------------------
    @abstractmethod
    def _optional(self, call: CallInfo) -> dict[str, Any]:
        """The optional parameters this API takes for `call` (wire names), minus those the
        model refused: store, safety_identifier, prompt_cache_key, the reasoning effort."""

    @abstractmethod
    async def _create(
        self, client: AsyncOpenAI, instructions: str, messages: list[ChatMessage], call: CallInfo
    ) -> Completion:
        """One plain (not streamed) answer, asked through `client`."""

    @abstractmethod
    async def _stream(
        self, instructions: str, messages: list[ChatMessage], on_delta: OnDelta, call: CallInfo
    ) -> Completion:
        """The answer, `on_delta` awaited as it grows; raises StreamRefused on an HTTP 400."""

    @abstractmethod
    async def _parse(self, client: AsyncOpenAI, ask: StructuredAsk[T]) -> Parsed[T]:
        """The answer asked in `ask.mode`, read as `ask.schema` (see `Parsed` for None)."""
