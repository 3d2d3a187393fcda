"""The OpenAI SDK's failures as LLMError with a short, true reason (nothing of the request in it),
and the refusals the clients learn from: a streamed request, a structured-output form (or one
schema), an optional request parameter."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Collection, Iterator
from contextlib import contextmanager
from typing import TypeVar

import openai
from pydantic import ValidationError

from memora.errors import LLMError
from memora.llm.protocol import TIMED_OUT

T_ = TypeVar("T_")

log = logging.getLogger(__name__)

NO_RESPONSES_API = "no_responses_api"  # LLMError.code: the server has no /responses endpoint
API_FIX = '[llm] api = "chat_completions"'
_told_no_responses_api = False  # the log says it once per process, at the first such answer


class StreamRefused(Exception):
    """The server answered a streamed request with HTTP 400 before any text."""


class FormatRefused(Exception):
    """The server rejected the way structured output was asked for (see `refuses_format`)."""


class ParamRefused(Exception):
    """The server refused an optional request parameter (see `param_refusals`)."""

    def __init__(self, param: str, why: str) -> None:
        super().__init__(param)
        self.param = param
        self.why = why


# Wire names → the parameter Memora learns about (longest first: "reasoning_effort" and
# "reasoning.effort" both name `reasoning`).
_WIRE_PARAMS = (
    ("reasoning_effort", "reasoning"),
    ("reasoning", "reasoning"),
    ("safety_identifier", "safety_identifier"),
    ("prompt_cache_key", "prompt_cache_key"),
    ("store", "store"),
)


def refused_param(exc: openai.APIStatusError, sent: Collection[str]) -> str | None:
    """Which optional parameter that was `sent` (wire names) an error answer refuses: OpenAI's
    and Azure's HTTP 400 "Unsupported parameter: 'reasoning.effort' is not supported with this
    model", "Unsupported value: ...", "Unrecognized request argument supplied: store", or a 422
    naming it. None when it names none of them (the error is something else)."""
    if exc.status_code not in (400, 422):
        return None
    body = exc.body if isinstance(exc.body, dict) else {}
    said = f"{body.get('param') or ''} {exc.message}".lower()
    for wire, param in _WIRE_PARAMS:
        if wire in sent and re.search(rf"\b{re.escape(wire)}\b", said):
            return param
    return None


@contextmanager
def param_refusals(sent: Collection[str]) -> Iterator[None]:
    """An SDK call whose refusal of an optional parameter in `sent` becomes ParamRefused."""
    try:
        yield
    except openai.APIStatusError as exc:
        param = refused_param(exc, sent)
        if param is None:
            raise
        raise ParamRefused(param, f"HTTP {exc.status_code}") from exc


def refuses_schema(exc: openai.APIStatusError) -> bool:
    """Whether a refused structured call refused its schema (OpenAI's and Azure's "Invalid
    schema for response_format 'X': ...": that schema alone) rather than the form itself."""
    return "invalid schema" in f"{exc.message} {exc.body}".lower()


_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "format", "grammar")


def refuses_format(exc: openai.APIStatusError) -> bool:
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


def lacks_responses_api(exc: openai.APIStatusError) -> bool:
    """Whether an error answer means the server has no Responses API: HTTP 404 to a
    `/responses` request (Ollama, DeepSeek and most local servers), except OpenAI's own 404 for
    a model it does not know (code "model_not_found")."""
    if exc.status_code != 404 or _code_of(exc) == "model_not_found":
        return False
    return "/responses" in exc.response.request.url.path


def _no_responses_api(service: str) -> LLMError:
    global _told_no_responses_api
    if not _told_no_responses_api:
        _told_no_responses_api = True
        log.error(
            "%s answered HTTP 404 to a Responses API request: this server has no Responses API."
            " Set %s in the config (or MEMORA_LLM__API=chat_completions).",
            service,
            API_FIX,
        )
    return LLMError(f"{service} has no Responses API (HTTP 404); set {API_FIX}", NO_RESPONSES_API)


@contextmanager
def translated(service: str = "the model service") -> Iterator[None]:
    """Turn every SDK failure raised inside the block into an LLMError with a short, true reason."""
    try:
        yield
    except asyncio.CancelledError:
        raise
    except openai.APIStatusError as exc:
        if lacks_responses_api(exc):
            raise _no_responses_api(service) from exc
        code = _code_of(exc)
        named = f" ({code})" if code else ""
        raise LLMError(f"{service} answered HTTP {exc.status_code}{named}", code) from exc
    except openai.APITimeoutError as exc:
        raise LLMError(f"{service} timed out", TIMED_OUT) from exc
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


async def refusable(coro: Awaitable[T_]) -> T_:
    """Start a streamed request; an HTTP 400 becomes StreamRefused (see OpenAILLM.complete)."""
    try:
        return await coro
    except openai.BadRequestError as exc:
        raise StreamRefused from exc


@contextmanager
def mid_stream() -> Iterator[None]:
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
