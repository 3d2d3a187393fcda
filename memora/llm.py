"""The LLM seam: one small protocol and its AsyncOpenAI implementations, one class per API.

`ResponsesLLM` speaks OpenAI's Responses API, `ChatCompletionsLLM` the Chat Completions API that
every OpenAI-compatible server (Ollama, vLLM, llama.cpp) understands. They share `OpenAILLM`: the
client, the error translation, and the streaming fallback; each says what its API can do with
class attributes instead of branching on the API name.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar, cast

import openai
from openai import AsyncOpenAI, AsyncStream
from openai.lib._parsing._completions import type_to_response_format_param
from openai.lib._parsing._responses import type_to_text_format_param
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseIncompleteEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
)
from pydantic import BaseModel, ValidationError

log = logging.getLogger(__name__)

Role = Literal["system", "developer", "user", "assistant"]
T = TypeVar("T", bound=BaseModel)
T_ = TypeVar("T_")

OnDelta = Callable[[str], Awaitable[None]]
"""Called while a reply is being written, with the whole text so far (not just the new piece)."""


@dataclass(frozen=True)
class ChatMessage:
    """One message as sent to the model."""

    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class Usage:
    """Token usage reported by the provider for one call."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


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


StructuredMode = Literal["json_schema", "json_object", "instructions"]
STRUCTURED_MODES: tuple[StructuredMode, ...] = ("json_schema", "json_object", "instructions")
"""How structured output is asked for, best first: a strict JSON schema (OpenAI), JSON mode with
the schema attached (llama.cpp's server, which refuses `json_schema`), then only the schema in
the instructions and a lenient reading of the text (any server)."""

SCHEMA_INSTRUCTIONS = (
    "\n\nAnswer with one JSON object and nothing else (no prose, no code fence), of this shape "
    "(a type in place of each value; lists may be empty or longer):\n{schema}"
)


# A schema's wire forms are the same on every call: built once per schema class (building them
# walked the pydantic model on every extraction call).
@functools.cache
def _text_format(schema: type[BaseModel]) -> Any:
    return type_to_text_format_param(schema)


@functools.cache
def _response_format(schema: type[BaseModel]) -> Any:
    return type_to_response_format_param(schema)


@functools.cache
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    return schema.model_json_schema()


@functools.cache
def schema_sketch(schema: type[BaseModel]) -> str:
    """`schema` as the shape of an answer, in as few tokens as it takes: keys, nesting, enums
    and types, e.g. ``{"memories":[{"text":string,"replaces":int|null}]}``.

    It is what the instructions spell out when the server does not enforce a strict schema
    (JSON mode, where llama.cpp enforces the full schema sent beside the request as a grammar,
    or plain instructions). The JSON Schema itself repeated what the instructions already say
    about each field: for the extraction call with the learner model it was 933 SmolLM2 tokens
    (the sketch: see README "Local models"), and a 2,048-token local model could not take it.
    """
    root = _json_schema(schema)
    return _sketch(root, root.get("$defs", {}))


def _sketch(node: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in node:
        return _sketch(defs[str(node["$ref"]).rsplit("/", 1)[-1]], defs)
    if "enum" in node or "const" in node:
        values = node.get("enum", [node.get("const")])
        return "|".join(json.dumps(v, ensure_ascii=False) for v in values)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            return "|".join(_sketch(option, defs) for option in node[key])
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        props: dict[str, Any] = node.get("properties", {})
        inner = ",".join(f"{json.dumps(k)}:{_sketch(v, defs)}" for k, v in props.items())
        return "{" + inner + "}"
    if kind == "array":
        return "[" + _sketch(node.get("items", {}), defs) + "]"
    names = {"integer": "int", "boolean": "bool", None: "any"}
    return names.get(kind, str(kind))


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def loads_lenient(text: str) -> Any:
    """The JSON value in a model's text, read leniently where that cannot change its meaning.

    Accepted: a code fence around it, prose before or after the first balanced object or list,
    trailing commas before a closing bracket. Not guessed: a truncated answer, single quotes,
    comments: those raise ValueError (json.JSONDecodeError), and the caller asks again.
    """
    candidate = text.strip()
    fenced = _FENCE.search(candidate)
    if fenced:
        candidate = fenced.group(1).strip()
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        pass
    start = min((i for i in (candidate.find("{"), candidate.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError("no JSON object in the answer")
    value, _end = json.JSONDecoder().raw_decode(_balanced(candidate, start))
    return value


def _balanced(text: str, start: int) -> str:
    """The bracketed value starting at `start` (strings respected), trailing commas removed."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return _TRAILING_COMMA.sub(r"\1", text[start : i + 1])
    raise ValueError("the JSON in the answer is cut off")


def validated(schema: type[T], text: str) -> tuple[T | None, str | None]:
    """(the text as a `schema` instance, None) or (None, why it is not one)."""
    if not text.strip():
        return None, "the model returned an empty answer"
    try:
        return schema.model_validate_json(text), None
    except ValidationError as strict:
        try:
            return schema.model_validate(loads_lenient(text)), None
        except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
            first = strict if isinstance(exc, json.JSONDecodeError) else exc
            return None, _short(first)


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
        what = errors[0]["msg"] if errors else str(exc)
        return f"the answer does not fit the schema ({len(errors)} error(s); {where}: {what})"
    return f"the answer is not valid JSON ({exc})"


CONTEXT_EXCEEDED = "context_length_exceeded"
"""The error code of a request longer than the model's context (OpenAI's, llama.cpp's server's),
also given to a structured answer the context cut short (ChatCompletionsLLM._parse)."""


class LLMError(Exception):
    """The model could not answer (outage, timeout, refusal, bad response).

    `code` is the error code the server named, if any (e.g. "context_length_exceeded": the
    caller may ask again in fewer tokens)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class _StreamRefused(Exception):
    """The server answered a streamed request with HTTP 400 before any text."""


class _FormatRefused(Exception):
    """The server rejected the way structured output was asked for (see `_refuses_format`)."""


_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "format", "grammar")


def _refuses_format(exc: openai.APIStatusError) -> bool:
    """Whether an error answer says the server cannot do the structured-output form asked for.

    llama.cpp's server (llama-cpp-python) answers `json_schema` with HTTP 500 and a validation
    error naming `response_format`; others answer 400 or 422. An error that does not name the
    format (an outage, a context too long) is not a refusal: the form is kept.
    """
    if exc.status_code not in (400, 422, 500, 501):
        return False
    said = f"{exc.message} {exc.body}".lower()
    return any(word in said for word in _FORMAT_WORDS)


_ERROR_CODE = re.compile(r"[a-z0-9_.-]{1,64}")


def _code_of(exc: openai.APIStatusError) -> str | None:
    """The code the error names, if it looks like one (llama.cpp's server answers an over-long
    request with HTTP 400 and "context_length_exceeded"), so /extraction and /status say why.
    Only the code: an error's message may quote the request, and what reaches the log stays
    short."""
    code = exc.code if isinstance(exc.code, str) else None
    return code if code and _ERROR_CODE.fullmatch(code) else None


@contextmanager
def translated(service: str = "the model service") -> Iterator[None]:
    """Turn every SDK failure raised inside the block into an LLMError with a short, true reason."""
    try:
        yield
    except asyncio.CancelledError:
        raise
    except openai.APIStatusError as exc:
        code = _code_of(exc)
        named = f" ({code})" if code else ""
        raise LLMError(f"{service} answered HTTP {exc.status_code}{named}", code) from exc
    except openai.APITimeoutError as exc:
        raise LLMError(f"{service} timed out") from exc
    except openai.APIConnectionError as exc:
        raise LLMError(f"{service} could not be reached") from exc
    except openai.OpenAIError as exc:
        raise LLMError(f"the call to {service} failed: {type(exc).__name__}") from exc
    except ValidationError as exc:  # structured output that does not fit the schema
        raise LLMError("the model returned malformed structured output") from exc


async def guard(call: Awaitable[T_], service: str = "the model service") -> T_:
    """Await an SDK call; turn every SDK failure into an LLMError with a short, true reason."""
    with translated(service):
        return await call


async def _refusable(coro: Awaitable[T_]) -> T_:
    """Start a streamed request; an HTTP 400 becomes _StreamRefused (see OpenAILLM.complete)."""
    try:
        return await coro
    except openai.BadRequestError as exc:
        raise _StreamRefused from exc


@contextmanager
def _mid_stream() -> Iterator[None]:
    """Failures while an answer streams in: a broken connection is not "could not be reached"."""
    try:
        yield
    except openai.APITimeoutError:
        raise
    except openai.APIConnectionError as exc:
        raise LLMError("the connection to the model service broke mid-answer") from exc
    except openai.APIStatusError:
        raise
    except openai.APIError as exc:  # an error event in the stream
        raise LLMError("the model service failed mid-answer") from exc
    except json.JSONDecodeError as exc:
        raise LLMError("the model service sent a malformed stream") from exc


class LLM(Protocol):
    """What the core needs from a language model."""

    async def complete(
        self,
        instructions: str,
        messages: list[ChatMessage],
        on_delta: OnDelta | None = None,
    ) -> Completion:
        """The answer. With `on_delta`, the text is streamed: `on_delta` is awaited with the whole
        text so far each time more arrives (possibly never, e.g. from a server that cannot
        stream). The Completion returned is the same either way, and a failure part-way raises
        LLMError like any other."""
        ...

    async def parse(
        self, instructions: str, messages: list[ChatMessage], schema: type[T]
    ) -> Parsed[T]: ...

    async def count_input_tokens(self, instructions: str, messages: list[ChatMessage]) -> int: ...

    async def aclose(self) -> None: ...


Api = Literal["responses", "chat_completions"]


class OpenAILLM(ABC):
    """What both OpenAI APIs share: the client, errors as LLMError, streaming with its fallback.

    A subclass per API implements `_create` (one plain answer), `_stream` (the answer as it is
    written) and `_parse` (structured output); `OpenAILLM.for_api(...)` picks the class.
    """

    api: ClassVar[Api]
    usage_fields: ClassVar[tuple[str, str]]
    """The names of the input and output token counts in this API's usage object."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        reasoning_effort: str | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        self.model = model
        self.reasoning_effort = reasoning_effort
        # A cap on each answer, for local servers: without one, llama.cpp's server lets a small
        # model that repeats itself write until its context is full (minutes on a CPU).
        self.max_output_tokens = max_output_tokens
        # Learned, not configured: some OpenAI-compatible servers answer stream=true with 400.
        self._stream_refused = False
        # Learned too: the best structured-output form this server accepts, and whether it has
        # answered one yet (until then a refusal is not retried: it cannot succeed).
        self._structured: StructuredMode = "json_schema"
        self._structured_confirmed = False
        self._client = AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    @staticmethod
    def for_api(api: Api, **kwargs: Any) -> OpenAILLM:
        """The client for `api` ("responses" or "chat_completions"), built with `kwargs`."""
        cls: type[OpenAILLM] = ResponsesLLM if api == "responses" else ChatCompletionsLLM
        return cls(**kwargs)

    @property
    def streams(self) -> bool:
        """Whether a reply asked for with `on_delta` is streamed (False once the server refused)."""
        return not self._stream_refused

    @property
    def structured_mode(self) -> StructuredMode:
        """How structured output is asked for now (it only moves down STRUCTURED_MODES)."""
        return self._structured

    def _usage(self, raw: object) -> Usage:
        if raw is None:
            return Usage()
        inp, out = self.usage_fields
        return Usage(int(getattr(raw, inp, 0) or 0), int(getattr(raw, out, 0) or 0))

    # -- the protocol --------------------------------------------------------------------------
    async def complete(
        self,
        instructions: str,
        messages: list[ChatMessage],
        on_delta: OnDelta | None = None,
    ) -> Completion:
        if on_delta is None or self._stream_refused:
            completion = await guard(self._create(instructions, messages))
        else:
            try:
                completion = await self._stream(instructions, messages, on_delta)
            except _StreamRefused:
                # Some OpenAI-compatible servers reject stream=true (or stream_options). Ask
                # again without streaming; if that works, the server cannot stream: stop trying.
                completion = await guard(self._create(instructions, messages))
                log.warning("the model server refuses streamed requests; replies are not streamed")
                self._stream_refused = True
        if not completion.text.strip():
            raise LLMError("the model returned an empty answer")
        return completion

    async def parse(
        self, instructions: str, messages: list[ChatMessage], schema: type[T]
    ) -> Parsed[T]:
        """The answer as a `schema` instance, asked for in the best form the server accepts.

        A server that refuses the form (HTTP 400/422/500 naming it) is asked again, once, in the
        next form of STRUCTURED_MODES, and the client remembers it for the rest of the process,
        as it does for streaming. Until a form has worked once, its request is sent without the
        SDK's retries: a refusal would only be refused again.
        """
        while True:
            mode = self._structured
            client = self._client
            if not self._structured_confirmed:
                client = client.with_options(max_retries=0)
            try:
                with translated():
                    try:
                        answer = await self._parse(client, mode, instructions, messages, schema)
                    except openai.APIStatusError as exc:
                        if mode != STRUCTURED_MODES[-1] and _refuses_format(exc):
                            raise _FormatRefused from exc
                        raise
            except _FormatRefused as refused:
                self._structured = STRUCTURED_MODES[STRUCTURED_MODES.index(mode) + 1]
                log.warning(
                    "the model server refuses structured output as %s (%s); using %s from now on",
                    mode,
                    refused.__cause__,
                    self._structured,
                )
                continue
            self._structured_confirmed = True
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

    async def aclose(self) -> None:
        await self._client.close()

    # -- per API ---------------------------------------------------------------------------------
    @abstractmethod
    async def _create(self, instructions: str, messages: list[ChatMessage]) -> Completion:
        """One plain (not streamed) answer."""

    @abstractmethod
    async def _stream(
        self, instructions: str, messages: list[ChatMessage], on_delta: OnDelta
    ) -> Completion:
        """The answer, `on_delta` awaited as it grows; raises _StreamRefused on an HTTP 400."""

    @abstractmethod
    async def _parse(
        self,
        client: AsyncOpenAI,
        mode: StructuredMode,
        instructions: str,
        messages: list[ChatMessage],
        schema: type[T],
    ) -> Parsed[T]:
        """The answer asked for in `mode` and read as `schema` (see `Parsed` for None)."""


class ResponsesLLM(OpenAILLM):
    """OpenAI's Responses API: instructions apart from the input, reasoning effort, SSE events."""

    api = "responses"
    usage_fields = ("input_tokens", "output_tokens")

    def _extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.reasoning_effort:
            extra["reasoning"] = {"effort": self.reasoning_effort}
        if self.max_output_tokens:
            extra["max_output_tokens"] = self.max_output_tokens
        return extra

    async def _create(self, instructions: str, messages: list[ChatMessage]) -> Completion:
        resp = await self._client.responses.create(
            model=self.model,
            instructions=instructions,
            input=[m.as_dict() for m in messages],  # type: ignore[misc]
            **self._extra(),
        )
        return Completion(text=resp.output_text or "", usage=self._usage(resp.usage))

    async def _stream(
        self, instructions: str, messages: list[ChatMessage], on_delta: OnDelta
    ) -> Completion:
        """Text from `response.output_text.delta` events; the final text and usage from the
        `response.completed` (or `.incomplete`) event."""
        text = ""
        final: Any = None
        with translated():
            created = self._client.responses.create(
                model=self.model,
                instructions=instructions,
                input=[m.as_dict() for m in messages],  # type: ignore[misc]
                stream=True,
                **self._extra(),
            )
            stream = cast(AsyncStream[ResponseStreamEvent], await _refusable(created))
            async with stream:
                with _mid_stream():
                    async for event in stream:
                        if isinstance(event, ResponseTextDeltaEvent):
                            text += event.delta
                            await on_delta(text)
                        elif isinstance(event, ResponseCompletedEvent | ResponseIncompleteEvent):
                            final = event.response
                            break
                        elif isinstance(event, ResponseFailedEvent):
                            error = event.response.error
                            code = error.code if error is not None else "failed"
                            raise LLMError(f"the model service failed mid-answer: {code}")
                        elif isinstance(event, ResponseErrorEvent):
                            why = event.code or "error"
                            raise LLMError(f"the model service failed mid-answer: {why}")
        if final is None:
            raise LLMError("the answer stream ended before the answer was complete")
        return Completion(text=final.output_text or text, usage=self._usage(final.usage))

    async def _parse(
        self,
        client: AsyncOpenAI,
        mode: StructuredMode,
        instructions: str,
        messages: list[ChatMessage],
        schema: type[T],
    ) -> Parsed[T]:
        fmt: Any = {"type": "text"}
        if mode == "json_schema":
            fmt = _text_format(schema)
        elif mode == "json_object":
            fmt = {"type": "json_object"}
        text_config: Any = {"format": fmt}
        input_items: Any = [m.as_dict() for m in messages]
        resp = await client.responses.create(
            model=self.model,
            instructions=self._format_instructions(mode, instructions, schema),
            input=input_items,
            text=text_config,
            **self._extra(),
        )
        usage = self._usage(resp.usage)
        refusal = next(
            (
                part.refusal
                for item in resp.output
                if item.type == "message"
                for part in item.content
                if part.type == "refusal"
            ),
            None,
        )
        if refusal is not None:
            return Parsed(text=refusal, usage=usage, problem="the model refused")
        text = resp.output_text or ""
        parsed, problem = validated(schema, text)
        return Parsed(text=text, usage=usage, parsed=parsed, problem=problem)


class ChatCompletionsLLM(OpenAILLM):
    """Chat Completions: what every OpenAI-compatible server speaks; the instructions become the
    system message, and no reasoning effort is sent (compatible servers may reject it)."""

    api = "chat_completions"
    usage_fields = ("prompt_tokens", "completion_tokens")

    def _extra(self) -> dict[str, Any]:
        # `max_tokens`, which every compatible server reads (llama.cpp's, Ollama, vLLM);
        # OpenAI's reasoning models want `max_completion_tokens`: use the Responses API there.
        return {"max_tokens": self.max_output_tokens} if self.max_output_tokens else {}

    @staticmethod
    def _messages(instructions: str, messages: list[ChatMessage]) -> Any:
        out = [{"role": "system", "content": instructions}]
        # "developer" is a Responses/OpenAI role; older compatible servers only know "system".
        out += [
            {"role": "system" if m.role == "developer" else m.role, "content": m.content}
            for m in messages
        ]
        return out

    async def _create(self, instructions: str, messages: list[ChatMessage]) -> Completion:
        resp = await self._client.chat.completions.create(
            model=self.model, messages=self._messages(instructions, messages), **self._extra()
        )
        if not resp.choices:
            raise LLMError("the model returned no choices")
        text = resp.choices[0].message.content or ""
        return Completion(text=text, usage=self._usage(resp.usage))

    async def _stream(
        self, instructions: str, messages: list[ChatMessage], on_delta: OnDelta
    ) -> Completion:
        """`choices[0].delta.content` pieces until a finish_reason; usage from the last chunk
        (`stream_options.include_usage`)."""
        text = ""
        finished = False
        usage: object = None
        with translated():
            stream = await _refusable(
                self._client.chat.completions.create(
                    model=self.model,
                    messages=self._messages(instructions, messages),
                    stream=True,
                    stream_options={"include_usage": True},
                    **self._extra(),
                )
            )
            async with stream:
                with _mid_stream():
                    async for chunk in stream:
                        if chunk.usage is not None:
                            usage = chunk.usage
                        for choice in chunk.choices:
                            if choice.index != 0:
                                continue
                            if choice.delta is not None and choice.delta.content:
                                text += choice.delta.content
                                await on_delta(text)
                            if choice.finish_reason is not None:
                                finished = True
        if not finished:
            raise LLMError("the answer stream ended before the answer was complete")
        return Completion(text=text, usage=self._usage(usage))

    async def _parse(
        self,
        client: AsyncOpenAI,
        mode: StructuredMode,
        instructions: str,
        messages: list[ChatMessage],
        schema: type[T],
    ) -> Parsed[T]:
        extra = self._extra()
        if mode == "json_schema":
            extra["response_format"] = _response_format(schema)
        elif mode == "json_object":  # llama.cpp's server constrains the output to `schema`
            extra["response_format"] = {
                "type": "json_object",
                "schema": _json_schema(schema),
            }
        resp = await client.chat.completions.create(
            model=self.model,
            messages=self._messages(
                self._format_instructions(mode, instructions, schema), messages
            ),
            **extra,
        )
        if not resp.choices:
            raise LLMError("the model returned no choices")
        choice = resp.choices[0]
        msg = choice.message
        usage = self._usage(resp.usage)
        if msg.refusal:
            return Parsed(text=msg.refusal, usage=usage, problem="the model refused")
        text = msg.content or ""
        parsed, problem = validated(schema, text)
        if parsed is None and choice.finish_reason == "length" and self._cut_by_context(usage):
            # llama.cpp answers a prompt that fits and stops the answer where its context ends
            # (it lowers max_tokens to the room left): asking again, longer, cannot fit more.
            # Said as the server says a prompt too long, so the caller can ask in fewer tokens.
            self._structured_confirmed = True  # the server took the form: it answered 200
            raise LLMError(
                f"the answer was cut at the end of the model's context ({usage.input_tokens} "
                f"prompt + {usage.output_tokens} answer tokens)",
                CONTEXT_EXCEEDED,
            )
        return Parsed(text=text, usage=usage, parsed=parsed, problem=problem)

    def _cut_by_context(self, usage: Usage) -> bool:
        """Whether an answer that stopped for length stopped before the cap it was sent with
        (`max_tokens`): then the server's context ended it. Without a cap, the server's limit
        is its context; with one and no usage reported, it cannot be told: no."""
        if not self.max_output_tokens:
            return True
        return 0 < usage.output_tokens < self.max_output_tokens
