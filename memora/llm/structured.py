"""Structured output: how it is asked for (STRUCTURED_MODES), the schema spelled out in few tokens
for servers that do not enforce it, and a lenient but faithful reading of the model's JSON."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Literal, TypeVar

from openai.lib._parsing._completions import type_to_response_format_param
from openai.lib._parsing._responses import type_to_text_format_param
from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

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
def text_format(schema: type[BaseModel]) -> Any:
    """The Responses API's `text.format` for `schema`."""
    return type_to_text_format_param(schema)


@functools.cache
def response_format(schema: type[BaseModel]) -> Any:
    """Chat Completions' `response_format` for `schema`."""
    return type_to_response_format_param(schema)


@functools.cache
def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """`schema` as JSON Schema."""
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
    root = json_schema(schema)
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
