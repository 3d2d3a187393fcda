"""The rules real model providers document, as the fake server (tests/support/fake_openai.py)
enforces them in its provider profiles (`FakeOpenAI.like_openai`, `like_azure`, `like_deepseek`,
`like_local_server`): OpenAI's strict subset of JSON Schema (and Azure's refusal of `default`),
which models take a reasoning effort, and how long and how many tokens reasoning takes.

Sources, as documented by each service (the wording of the errors is theirs):

- OpenAI, "Structured Outputs" guide, "Supported schemas": root an object (not `anyOf`), every
  object `additionalProperties: false` and every property in `required`; the keywords it takes
  (types, `enum`, `const`, `anyOf`, `$ref`/`$defs`, `description`, `title`; `pattern` and
  `format` for strings; `multipleOf`, `minimum`, `maximum` and their exclusive forms for
  numbers; `minItems`, `maxItems` for arrays); at most 5,000 properties, 10 levels of nesting,
  1,000 enum values. A schema outside it: HTTP 400 "Invalid schema for response_format '<name>':
  In context=(...), ...".
- Azure OpenAI, "Structured outputs" (unsupported keywords): the same subset, and `default`
  refused ("'default' is not permitted").
- OpenAI, "Reasoning models": `reasoning.effort` (Responses) / `reasoning_effort` (Chat
  Completions) only on reasoning models (gpt-5 family, o-series); a model that does not reason
  answers HTTP 400 "Unsupported parameter: 'reasoning.effort' is not supported with this model."
  (code `unsupported_parameter`). Without one, a reasoning model reasons at its default effort
  (medium for gpt-5 and gpt-5-mini).
- An unknown request argument: HTTP 400 "Unrecognized request argument supplied: <name>"
  (OpenAI's and Azure's wording).
- JSON mode (`json_object`, OpenAI and DeepSeek): HTTP 400 unless the word "json" appears in the
  messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "anyOf", "$ref", "$defs", "definitions", "description", "title", "pattern", "format",
        "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems",
        "maxItems", "default",
    }
)  # fmt: skip
STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
MAX_PROPERTIES, MAX_DEPTH, MAX_ENUM = 5000, 10, 1000


def strict_schema_problems(schema: dict[str, Any], *, refuses_default: bool = False) -> list[str]:
    """What a strict structured-output call with `schema` would be refused for, in the
    provider's words (empty: it is accepted). `refuses_default`: Azure OpenAI's rule."""
    problems: list[str] = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("In context=(), the root schema must be an object and not use anyOf")
    counted = {"properties": 0}

    def walk(node: Any, where: tuple[str, ...], depth: int) -> None:
        if not isinstance(node, dict):
            return
        for key in node:
            if key not in STRICT_KEYWORDS or (key == "default" and refuses_default):
                problems.append(f"In context={where}, '{key}' is not permitted")
        if depth > MAX_DEPTH:
            problems.append(f"In context={where}, the schema nests deeper than {MAX_DEPTH}")
        if node.get("format") is not None and node["format"] not in STRICT_FORMATS:
            problems.append(f"In context={where}, format '{node['format']}' is not permitted")
        if len(node.get("enum") or ()) > MAX_ENUM:
            problems.append(f"In context={where}, an enum has more than {MAX_ENUM} values")
        props: dict[str, Any] = node.get("properties") or {}
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                problems.append(
                    f"In context={where}, 'additionalProperties' is required to be supplied "
                    "and to be false"
                )
            missing = sorted(set(props) - set(node.get("required") or ()))
            if missing:
                problems.append(
                    f"In context={where}, 'required' is required to be supplied and to be an "
                    f"array including every key in properties. Missing '{missing[0]}'"
                )
            counted["properties"] += len(props)
        for name, sub in props.items():
            walk(sub, (*where, "properties", name), depth + 1)
        if "items" in node:
            walk(node["items"], (*where, "items"), depth + 1)
        for i, sub in enumerate(node.get("anyOf") or ()):
            walk(sub, (*where, "anyOf", str(i)), depth)
        for defs in ("$defs", "definitions"):
            for name, sub in (node.get(defs) or {}).items():
                walk(sub, (defs, name), depth)

    walk(schema, (), 0)
    if counted["properties"] > MAX_PROPERTIES:
        problems.append(f"In context=(), more than {MAX_PROPERTIES} properties")
    return problems


def invalid_schema_message(name: str | None, problem: str) -> str:
    return f"Invalid schema for response_format '{name}': {problem}."


# Reasoning: how much a reasoning model thinks at each effort on one of Memora's calls, and how
# fast. ASSUMED figures (no provider publishes per-call numbers), from:
# - OpenAI's reasoning guide: reasoning tokens are billed as output tokens and come before the
#   first visible token; "minimal" (gpt-5) produces few or no reasoning tokens, for the fastest
#   time to first token; without an effort the model uses medium.
# - One public measurement of gpt-5-mini on Azure (qiita.com/FukuharaYohei, 2026-01-18: output
#   tokens 1,830 at minimal and at low, 2,518 at medium, 6,427 at high on one question): medium
#   ≈ 700 reasoning tokens more than minimal, high ≈ 4,600 more. A tutor's turn is an easier
#   question: low is taken as 200 (between minimal and medium).
# - Speed: 80 output tokens a second, about what gpt-5-mini streams (assumed; providers vary
#   with load), so medium's 700 tokens are ~9 s before the first word.
REASONING_TOKENS: dict[str, int] = {
    "none": 0,
    "minimal": 0,
    "low": 200,
    "medium": 700,
    "high": 4600,
    "xhigh": 9000,
}
REASONING_TOKENS_PER_SECOND = 80.0


@dataclass(frozen=True)
class Reasoning:
    """Which models reason and what each effort costs (`REASONING_TOKENS` and speed above).

    A model matching `models` reasons: at the effort sent, else `default_effort`; its answer
    carries that many reasoning tokens (in the output tokens, as OpenAI bills them) and is
    delayed by their time × `time_scale` (0: no delay, the tests; 1: real time; benchmarks use
    a fraction). Other models refuse an effort with HTTP 400. `efforts`: what each family takes
    (gpt-5: minimal..high; gpt-5.x: none..xhigh; o-series: low..high)."""

    models: str = r"^(gpt-5|o\d)"
    default_effort: str = "medium"
    time_scale: float = 0.0
    tokens: dict[str, int] = field(default_factory=lambda: dict(REASONING_TOKENS))
    tokens_per_second: float = REASONING_TOKENS_PER_SECOND

    def reasons(self, model: str | None) -> bool:
        return bool(re.match(self.models, model or ""))

    def efforts(self, model: str | None) -> tuple[str, ...]:
        name = model or ""
        if re.match(r"^gpt-5\.", name):
            return ("none", "low", "medium", "high", "xhigh")
        if re.match(r"^o\d", name):
            return ("low", "medium", "high")
        return ("minimal", "low", "medium", "high")

    def seconds(self, tokens: int) -> float:
        return tokens / self.tokens_per_second * self.time_scale


def effort_sent(body: dict[str, Any]) -> str | None:
    """The reasoning effort a request names (Responses `reasoning.effort`, or Chat
    Completions' `reasoning_effort`), or None."""
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort"):
        return str(reasoning["effort"])
    effort = body.get("reasoning_effort")
    return str(effort) if effort else None
