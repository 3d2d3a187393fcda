"""A fake OpenAI HTTP server (stdlib only) that the real `openai` SDK talks to over 127.0.0.1.

It speaks enough of the wire format for the SDK's own parsing to work:

- ``POST /v1/responses``               plain text, or structured (``text.format.type ==
  "json_schema"``, what ``client.responses.parse(text_format=Model)`` sends); with
  ``stream: true`` a server-sent event stream (``response.created`` … one
  ``response.output_text.delta`` per word … ``response.completed`` with usage)
- ``POST /v1/chat/completions``        plain text, or structured (``response_format`` json_schema);
  with ``stream: true`` ``chat.completion.chunk`` events, a usage chunk when
  ``stream_options.include_usage`` is set, then ``data: [DONE]``
- ``POST /v1/responses/input_tokens``  ``{"object": "response.input_tokens", "input_tokens": N}``
- ``POST /v1/embeddings``              deterministic hashed character-n-gram vectors
- ``POST /v1/audio/transcriptions``    multipart upload (``file``, ``model``), checked like a real
  server would (an ``.ogg``/``.oga``/``.opus`` file must be real Ogg/Opus; its length is read
  from the pages); ``{"text", "usage"}`` with token usage, or ``duration`` for ``whisper-*``.
  The text is queued with ``queue_reply(text, kind="transcribe")``, else ``transcriber``
- ``POST /v1/audio/speech``            the bytes of a real Ogg/Opus voice note (tests/data)
- anything else                        404 in OpenAI's error format

Usage is reported as OpenAI reports it, details included: a prompt that begins as an earlier
request's did (same model, same schema) gets that prefix as cached input tokens, from 1,024 tokens
in blocks of 128 (``PrefixCache``; ``prefix_cache = None`` turns it off); reasoning tokens are
scripted per answer (``FakeReply(usage={"reasoning_tokens": N})``) and billed as output. Tokens
are the fake's estimate (``approx_tokens``) unless ``count_tokens`` names a real tokenizer.

Every request is recorded (``server.requests``), including each retry the SDK makes. Answers are
scripted with ``queue_reply`` (FIFO, first priority) or a ``responder`` hook; the default echoes
the last user message and builds a minimal valid object for structured calls. Failures are
injected with ``fail_next``, ``down``, ``latency`` and ``kind_latency``; a streamed answer can be
cut part-way with ``FakeReply(cut_after=N, cut=...)`` and paced with ``stream_delay``;
``refuse_streams`` answers every streamed request with 400.

By default the fake is kinder than any real service: it takes any schema and parameter, and
answers at once with no reasoning. A provider profile makes it answer as one kind of service
documents (tests/support/provider_rules.py says which rules, and where they come from):
``like_openai()`` (strict schemas checked, a reasoning effort refused by models that do not
reason, reasoning tokens and optionally latency by effort), ``like_azure()`` (the Azure client's
paths, `api-version` and `api-key`; `default` refused in strict schemas), ``like_deepseek()``
(Chat Completions only, JSON mode but no `json_schema`), ``like_local_server()`` (no Responses
API: 404) and ``like_llama_cpp()`` (recorded from its server).

Usage::

    with FakeOpenAI() as server:
        llm = ResponsesLLM(model="gpt-test", api_key="sk-fake", base_url=server.base_url)

To grow it: a new endpoint is one branch in ``_describe`` (its kind) and one in ``_handle``.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import hashlib
import json
import math
import re
import select
import socket
import struct
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal
from urllib.parse import parse_qs

from tests.support.local_server import LocalHTTPServer, LocalServer
from tests.support.paths import DATA
from tests.support.provider_rules import (
    Reasoning,
    effort_sent,
    invalid_schema_message,
    strict_schema_problems,
)

Kind = Literal["reply", "structured", "count", "embed", "transcribe", "speech", "other"]
Api = Literal["responses", "chat_completions", "embeddings", "audio"]
FailMode = Literal["status", "disconnect"]
CutMode = Literal["disconnect", "end", "error"]

DEFAULT_EMBEDDING_DIM = 1536
GENERATION_KINDS: frozenset[str] = frozenset({"reply", "structured"})
# tests/data/voice_hello.ogg: see make_voice_fixture.sh there
VOICE_FIXTURE = DATA / "voice_hello.ogg"
AUDIO_TYPES = ("flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "opus", "wav", "webm")


# -- requests and replies ------------------------------------------------------------------------
@dataclass
class FakeRequest:
    """One HTTP request the server received (every retry is a separate request)."""

    method: str
    path: str
    body: dict[str, Any]
    kind: Kind
    api: Api | None = None
    model: str | None = None
    # Responses `instructions`, or the first system/developer message of a chat request.
    instructions: str | None = None
    # {"role", "content"} dicts: Responses `input`, or chat messages minus the leading system one.
    messages: list[dict[str, str]] = field(default_factory=list)
    schema_name: str | None = None  # structured calls: the json_schema name
    schema: dict[str, Any] | None = None  # structured calls: the JSON schema itself
    response_format: str | None = None  # structured calls: "json_schema" or "json_object"
    texts: list[str] = field(default_factory=list)  # embedding inputs
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names
    retry_count: int = 0  # the SDK's `x-stainless-retry-count` header (0 on the first try)
    audio: bytes | None = None  # transcription uploads: the file's bytes
    filename: str | None = None  # … and its name

    @property
    def last_user_message(self) -> str:
        return next((m["content"] for m in reversed(self.messages) if m["role"] == "user"), "")

    @property
    def stream(self) -> bool:
        """Whether the client asked for a server-sent event stream."""
        return bool(self.body.get("stream"))


@dataclass
class FakeReply:
    """A scripted answer.

    `text` is the answer text (for structured calls it is sent verbatim, so invalid JSON can be
    tested); `data` is dumped to JSON when `text` is None. `refusal` makes the model refuse
    (Responses: a refusal content part; Chat: `message.refusal`). `incomplete` marks the answer as
    cut off (Responses: status "incomplete"; Chat: finish_reason "length"). `usage` overrides
    the token figures: keys "input_tokens" and/or "output_tokens", "cached_tokens" and
    "reasoning_tokens" (for count calls, "input_tokens" is the count; for embed calls it is the
    billed tokens).

    Streamed answers only: `cut_after=N` stops the stream after N text deltas, the way `cut`
    says: "disconnect" drops the connection mid-body, "end" ends the body cleanly but without
    the final events (no ``response.completed``, no finish_reason, no ``[DONE]``), "error" sends
    an error event (Responses: ``error``; Chat: a chunk with an ``error`` object) and ends.
    """

    text: str | None = None
    data: Any = None
    refusal: str | None = None
    incomplete: bool = False
    usage: dict[str, int] | None = None
    cut_after: int | None = None
    cut: CutMode = "disconnect"


Answer = FakeReply | str | dict[str, Any] | list[Any] | int
Responder = Callable[[FakeRequest], Answer]


@dataclass
class _Failure:
    kind: Kind | None
    status: int
    mode: FailMode
    message: str | None
    code: str | None = None


def approx_tokens(text: str) -> int:
    """The fake's deterministic token estimate for one message / answer."""
    return len(text) // 4 + 1


Counter = Callable[[str], int]


def prompt_parts(req: FakeRequest, *, schema: bool = False) -> list[str]:
    """What a request's prompt is made of, in the order a provider reads it: with `schema`, a
    strict call's JSON schema first (OpenAI: "the structured output schema serves as a prefix to
    the system message"), then the instructions, then each message's content."""
    parts = [req.instructions] if req.instructions else []
    parts += [m["content"] for m in req.messages]
    if schema and req.response_format == "json_schema" and req.schema is not None:
        parts.insert(0, json.dumps(req.schema, sort_keys=True))
    return parts


def input_tokens_of(req: FakeRequest, count: Counter = approx_tokens, schema: bool = False) -> int:
    """Input tokens the fake bills: one `count` per message, instructions included (and the
    schema of a strict call, with `schema`)."""
    parts = req.texts if req.kind == "embed" else prompt_parts(req, schema=schema)
    return sum(count(p) for p in parts)


CACHE_MIN_TOKENS = 1024  # OpenAI caches prompts from 1,024 tokens ...
CACHE_BLOCK_TOKENS = 128  # ... in steps of 128 tokens


class PrefixCache:
    """A provider's prompt cache, as OpenAI documents it: a request whose prompt begins with the
    same tokens as an earlier request's (same model) is billed that prefix as cached input,
    counted from 1,024 tokens in blocks of 128 (a shorter prefix is not cached). The prefix is
    measured part by part (see `prompt_parts`): whole parts that are equal, then the common
    start of the first part that differs. Nothing expires (a test is shorter than the cache's
    5-10 minutes) and every request reaches the one cache (`prompt_cache_key` only routes)."""

    def __init__(
        self, min_tokens: int = CACHE_MIN_TOKENS, block_tokens: int = CACHE_BLOCK_TOKENS
    ) -> None:
        self.min_tokens = min_tokens
        self.block_tokens = block_tokens
        self._seen: list[tuple[tuple[str | None, ...], list[str]]] = []
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()

    def cached(self, key: tuple[str | None, ...], parts: list[str], count: Counter) -> int:
        """The cached tokens of this prompt (`key`: what must be equal besides, the model and
        a schema not counted in `parts`), which is then remembered for later requests."""
        with self._lock:
            best = max((_common(parts, p, count) for k, p in self._seen if k == key), default=0)
            self._seen.append((key, parts))
        if best < self.min_tokens:
            return 0
        return best - (best - self.min_tokens) % self.block_tokens


def _common(parts: list[str], earlier: list[str], count: Counter) -> int:
    """The tokens of the prefix two prompts share."""
    tokens = 0
    for mine, theirs in zip(parts, earlier, strict=False):
        if mine == theirs:
            tokens += count(mine)
            continue
        n = 0
        while n < min(len(mine), len(theirs)) and mine[n] == theirs[n]:
            n += 1
        return tokens + (count(mine[:n]) - 1 if n else 0)  # the partial token at the end
    return tokens


@dataclass(frozen=True)
class Tokens:
    """A generation's usage: input (`cached` of it from the prompt cache) and output
    (`reasoning` of it spent reasoning)."""

    input: int
    output: int
    cached: int = 0
    reasoning: int = 0
    # How Chat Completions reports the cached part: OpenAI's `prompt_tokens_details`, or
    # DeepSeek's `prompt_cache_hit_tokens` / `prompt_cache_miss_tokens` beside the totals
    cache_fields: Literal["openai", "deepseek"] = "openai"


def fake_embedding(text: str, dim: int = DEFAULT_EMBEDDING_DIM) -> list[float]:
    """Deterministic L2-normalised vector: hashed bag of character 3-grams and words."""
    vec = [0.0] * dim
    norm_text = " " + " ".join(text.lower().split()) + " "
    grams = [norm_text[i : i + 3] for i in range(max(1, len(norm_text) - 2))]
    grams += ["w:" + w for w in norm_text.split()]
    for gram in grams:
        n = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
        vec[n % dim] += 1.0 if (n >> 63) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def minimal_instance(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """A minimal value valid for a (pydantic / OpenAI strict) JSON schema.

    Empty strings and arrays, 0, false, null for nullable, the first enum value; follows
    `$ref` into `$defs` / `definitions`; honours minLength / minItems / minimum.
    """
    root = schema if root is None else root
    if "$ref" in schema:
        target: Any = root
        for part in str(schema["$ref"]).removeprefix("#/").split("/"):
            target = target[part]
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return minimal_instance(merged, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options: list[dict[str, Any]] = schema[key]
            if any(o.get("type") == "null" for o in options):
                return None
            return minimal_instance(options[0], root)
    if "allOf" in schema:
        merged = {}
        for part_schema in schema["allOf"]:
            merged.update(part_schema)
        return minimal_instance(merged, root)
    typ = schema.get("type")
    if isinstance(typ, list):
        if "null" in typ:
            return None
        typ = typ[0] if typ else None
    if typ == "object" or (typ is None and "properties" in schema):
        props: dict[str, Any] = schema.get("properties", {})
        return {name: minimal_instance(sub, root) for name, sub in props.items()}
    if typ == "array":
        items = schema.get("items", {})
        return [minimal_instance(items, root) for _ in range(int(schema.get("minItems", 0)))]
    if typ == "string":
        fmt = schema.get("format")
        if fmt == "date-time":
            return "1970-01-01T00:00:00Z"
        if fmt == "date":
            return "1970-01-01"
        return "x" * int(schema.get("minLength", 0))
    if typ in ("integer", "number"):
        value: float = 0
        if "minimum" in schema:
            value = max(value, schema["minimum"])
        if "exclusiveMinimum" in schema:
            value = max(value, schema["exclusiveMinimum"] + 1)
        if "maximum" in schema and value > schema["maximum"]:
            value = schema["maximum"]
        return math.ceil(value) if typ == "integer" else value
    if typ == "boolean":
        return False
    return None


def extraction_answer(*items: tuple[str, str, Sequence[str]]) -> dict[str, Any]:
    """The extraction call's answer as a model writes it: each memory (text, category, search
    terms in English and the learner's language), replacing nothing."""
    return {
        "memories": [
            {"text": text, "category": category, "replaces": None, "terms": list(terms)}
            for text, category, terms in items
        ]
    }


_NEEDS_TERMS = re.compile(r"<needs_terms>\n(.*?)\n</needs_terms>", re.DOTALL)
_LISTED = re.compile(r"^t(\d+)\. (.*)$")


def needs_terms_listed(req: FakeRequest) -> dict[int, str]:
    """The memories an extraction request asks search terms for (number → text), read from its
    <needs_terms> block as a model would; empty when it asks for none."""
    found = _NEEDS_TERMS.search(req.last_user_message)
    if found is None:
        return {}
    listed = (_LISTED.match(line) for line in found.group(1).splitlines())
    return {int(m.group(1)): m.group(2) for m in listed if m}


def terms_writer(
    terms: dict[str, Sequence[str]],
    also: dict[str, Any] | None = None,
    situations: dict[str, Sequence[str]] | None = None,
) -> Callable[[FakeRequest], Answer]:
    """A responder that answers each extraction request like a model that writes search terms:
    for every memory listed in <needs_terms> whose text is a key of `terms`, that memory's
    number, those terms and its `situations` (none where that has no entry; `also`: more fields
    of the answer, e.g. "memories"); other requests as the default responder. A memory not in
    `terms` gets no answer."""

    def respond(req: FakeRequest) -> Answer:
        if req.kind != "structured":
            return default_responder(req)
        listed = needs_terms_listed(req)
        answer = minimal_instance(req.schema) if req.schema else {}
        answer.update(also or {})
        answer["terms_for"] = [
            {
                "id": f"t{n}",
                "terms": list(terms[text]),
                "situations": list((situations or {}).get(text, ())),
            }
            for n, text in listed.items()
            if text in terms
        ]
        return answer

    return respond


# -- request parsing -------------------------------------------------------------------------------
def _content_text(content: Any) -> str:
    """Flatten message content: a string, or a list of parts with `text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _messages(items: Any) -> list[dict[str, str]]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[dict[str, str]] = []
    for item in items or []:
        if isinstance(item, dict) and "role" in item:
            out.append({"role": str(item["role"]), "content": _content_text(item.get("content"))})
    return out


def _describe(method: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> FakeRequest:
    req = FakeRequest(method=method, path=path, body=body, kind="other", headers=headers)
    req.model = body.get("model") if isinstance(body.get("model"), str) else None
    try:
        req.retry_count = int(headers.get("x-stainless-retry-count", "0"))
    except ValueError:
        req.retry_count = 0
    fmt: Any = None
    if method == "POST" and path == "/v1/responses":
        req.api = "responses"
        instr = body.get("instructions")
        req.instructions = _content_text(instr) if instr is not None else None
        req.messages = _messages(body.get("input"))
        fmt = (body.get("text") or {}).get("format")
        if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object"):
            req.kind = "structured"
            req.response_format = fmt["type"]
            req.schema_name = fmt.get("name")
            req.schema = fmt.get("schema")
        else:
            req.kind = "reply"
    elif method == "POST" and path == "/v1/chat/completions":
        req.api = "chat_completions"
        msgs = _messages(body.get("messages"))
        if msgs and msgs[0]["role"] in ("system", "developer"):
            req.instructions = msgs[0]["content"]
            msgs = msgs[1:]
        req.messages = msgs
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object"):
            req.kind = "structured"
            req.response_format = fmt["type"]
            js = fmt.get("json_schema") or {}
            req.schema_name = js.get("name")
            # json_object may carry the schema itself, as llama.cpp's server accepts it
            req.schema = js.get("schema") or fmt.get("schema")
        else:
            req.kind = "reply"
    elif method == "POST" and path == "/v1/responses/input_tokens":
        req.api = "responses"
        req.kind = "count"
        instr = body.get("instructions")
        req.instructions = _content_text(instr) if instr is not None else None
        req.messages = _messages(body.get("input"))
    elif method == "POST" and path == "/v1/embeddings":
        req.api = "embeddings"
        req.kind = "embed"
        raw = body.get("input")
        if isinstance(raw, str):
            req.texts = [raw]
        elif isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
            req.texts = [" ".join(map(str, raw))]  # one pre-tokenised input
        elif isinstance(raw, list):
            req.texts = [t if isinstance(t, str) else " ".join(map(str, t)) for t in raw]
    elif method == "POST" and path in ("/v1/audio/transcriptions", "/v1/audio/speech"):
        req.api = "audio"
        req.kind = "transcribe" if path.endswith("transcriptions") else "speech"
    return req


# -- audio -----------------------------------------------------------------------------------------
def ogg_opus_seconds(data: bytes) -> float:
    """The playback length of an Ogg/Opus file, read from its pages; ValueError if it is not one.

    Opus in Ogg counts granules at 48 kHz; the last page's granule position minus the header's
    pre-skip is the length (RFC 7845)."""
    pos, granule, pre_skip = 0, 0, None
    while pos < len(data):
        if data[pos : pos + 4] != b"OggS" or pos + 27 > len(data):
            raise ValueError("not an Ogg stream")
        granule = max(granule, struct.unpack_from("<q", data, pos + 6)[0])
        segments = data[pos + 26]
        start = pos + 27 + segments
        if pre_skip is None:
            if data[start : start + 8] != b"OpusHead":
                raise ValueError("not an Ogg/Opus stream")
            pre_skip = struct.unpack_from("<H", data, start + 10)[0]
        pos = start + sum(data[pos + 27 : start])
    if pre_skip is None:
        raise ValueError("empty")
    return max(0, granule - pre_skip) / 48000


def multipart_form(content_type: str, raw: bytes) -> tuple[dict[str, str], dict[str, Any]]:
    """Form fields and files ({"filename", "content"}) of a multipart/form-data body."""
    head = f"content-type: {content_type}\r\n\r\n".encode()
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    fields: dict[str, str] = {}
    files: dict[str, Any] = {}
    for part in msg.iter_parts():
        name = str(part.get_param("name", header="content-disposition") or "")
        payload = part.get_payload(decode=True)
        content = payload if isinstance(payload, bytes) else b""
        if part.get_filename() is not None:
            files[name] = {"filename": part.get_filename(), "content": content}
        else:
            fields[name] = content.decode()
    return fields, files


def audio_seconds(req: FakeRequest) -> float:
    """The upload's length when it is Ogg/Opus (0.0 for other formats, which are not parsed)."""
    try:
        return ogg_opus_seconds(req.audio or b"")
    except ValueError:
        return 0.0


def default_transcriber(req: FakeRequest) -> Answer:
    """What the fake "hears": it cannot recognise speech, so it says how much audio it got."""
    return f"(fake transcript of {audio_seconds(req):.1f} s of audio)"


def _bad_audio(req: FakeRequest) -> str | None:
    """What a real server would refuse in a transcription upload, or None."""
    ext = (req.filename or "").rsplit(".", 1)[-1].lower()
    if not req.audio or ext not in AUDIO_TYPES:
        return f"Invalid file format. Supported formats: {list(AUDIO_TYPES)}"
    if ext in ("ogg", "oga", "opus") and not audio_seconds(req):
        return "Audio file might be corrupted or unsupported"
    return None


def _transcription_body(req: FakeRequest, reply: FakeReply) -> Any:
    text, seconds = _reply_text(reply), audio_seconds(req)
    if (req.model or "").startswith("whisper"):
        return {"text": text, "usage": {"type": "duration", "seconds": math.ceil(seconds)}}
    given = reply.usage or {}  # gpt-4o-*-transcribe bill tokens; the fake counts 10 a second
    inp = given.get("input_tokens", max(1, round(seconds * 10)))
    out = given.get("output_tokens", approx_tokens(text))
    usage = {"type": "tokens", "input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
    return {"text": text, "usage": usage}


@dataclass(frozen=True)
class _Binary:
    """A non-JSON answer body (speech audio)."""

    content: bytes
    content_type: str


# -- answers ---------------------------------------------------------------------------------------
def default_responder(req: FakeRequest) -> Answer:
    """Echo the last user message; for structured calls, a minimal object valid for the schema."""
    if req.kind == "structured":
        return minimal_instance(req.schema) if req.schema else {}
    return f"Echo: {req.last_user_message}"


def _as_reply(answer: Answer, kind: Kind) -> FakeReply:
    if isinstance(answer, FakeReply):
        return answer
    if isinstance(answer, str):
        return FakeReply(text=answer)
    if isinstance(answer, bool) or not isinstance(answer, int):
        return FakeReply(data=answer)
    if kind == "count":
        return FakeReply(usage={"input_tokens": answer})
    return FakeReply(text=str(answer))


def _reply_text(reply: FakeReply) -> str:
    if reply.text is not None:
        return reply.text
    if reply.data is None:
        return ""
    dump = getattr(reply.data, "model_dump_json", None)  # a pydantic model is fine too
    return str(dump()) if callable(dump) else json.dumps(reply.data, ensure_ascii=False)


def _new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def _responses_body(req: FakeRequest, reply: FakeReply, text: str, usage: Tokens) -> Any:
    now = int(time.time())
    content: list[dict[str, Any]]
    if reply.refusal is not None:
        content = [{"type": "refusal", "refusal": reply.refusal}]
    else:
        content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    output: list[dict[str, Any]] = []
    reasoning = req.body.get("reasoning")
    if reasoning or usage.reasoning:  # reasoning models put a reasoning item before the message
        output.append({"id": _new_id("rs_"), "type": "reasoning", "summary": []})
    status = "incomplete" if reply.incomplete else "completed"
    output.append(
        {
            "id": _new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": content,
        }
    )
    inp, out = usage.input, usage.output
    return {
        "id": _new_id("resp_"),
        "object": "response",
        "created_at": now,
        "status": status,
        "background": False,
        "completed_at": None if reply.incomplete else now,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if reply.incomplete else None,
        "instructions": req.body.get("instructions"),
        "max_output_tokens": req.body.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": req.model or "fake-model",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": req.body.get("previous_response_id"),
        "reasoning": {"effort": (reasoning or {}).get("effort"), "summary": None},
        "service_tier": "default",
        "store": bool(req.body.get("store", True)),
        "temperature": req.body.get("temperature", 1.0),
        "text": req.body.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": req.body.get("tool_choice", "auto"),
        "tools": req.body.get("tools", []),
        "top_p": req.body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": usage.cached, "cache_write_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": inp + out,
        },
        "user": None,
        "metadata": req.body.get("metadata") or {},
    }


def _chat_body(req: FakeRequest, reply: FakeReply, text: str, usage: Tokens) -> Any:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if reply.refusal is not None:
        message.update(content=None, refusal=reply.refusal)
    message["annotations"] = []
    return {
        "id": _new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.model or "fake-model",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "length" if reply.incomplete else "stop",
            }
        ],
        "usage": _chat_usage(usage),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def _chat_usage(usage: Tokens) -> dict[str, Any]:
    inp, out = usage.input, usage.output
    if usage.cache_fields == "deepseek":  # DeepSeek's API reference, "usage"
        return {
            "prompt_tokens": inp,
            "completion_tokens": out,
            "total_tokens": inp + out,
            "prompt_cache_hit_tokens": usage.cached,
            "prompt_cache_miss_tokens": inp - usage.cached,
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
        }
    return {
        "prompt_tokens": inp,
        "completion_tokens": out,
        "total_tokens": inp + out,
        "prompt_tokens_details": {"cached_tokens": usage.cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": usage.reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


@dataclass
class _EventStream:
    """A server-sent event answer: framed events in order; `drop` closes the socket after them
    instead of ending the body."""

    frames: list[bytes]
    drop: bool = False


def _frame(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {body}\n\n".encode()


def text_pieces(text: str) -> list[str]:
    """How the fake streams a text: one piece per word, with the whitespace after it."""
    return re.findall(r"\s+|\S+\s*", text) if text else []


def _responses_stream(
    req: FakeRequest, reply: FakeReply, text: str, usage: Tokens
) -> tuple[list[bytes], list[bytes], list[bytes], Callable[[int], bytes]]:
    """(head, deltas, tail, error-frame maker) of a Responses event stream."""
    final = _responses_body(req, reply, text, usage)
    message = final["output"][-1]
    out_index = len(final["output"]) - 1
    seq = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal seq
        frame = _frame({"type": kind, **fields, "sequence_number": seq}, kind)
        seq += 1
        return frame

    started = {
        **final,
        "status": "in_progress",
        "completed_at": None,
        "incomplete_details": None,
        "output": [],
        "usage": None,
    }
    item = {**message, "status": "in_progress", "content": []}
    where = {"item_id": message["id"], "output_index": out_index, "content_index": 0}
    empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    head = [
        event("response.created", response=started),
        event("response.in_progress", response=started),
        event("response.output_item.added", output_index=out_index, item=item),
        event("response.content_part.added", **where, part=empty_part),
    ]
    deltas: list[bytes] = []
    tail: list[bytes] = []
    if reply.refusal is None:
        deltas = [
            event("response.output_text.delta", **where, delta=piece, logprobs=[])
            for piece in text_pieces(text)
        ]
        tail.append(event("response.output_text.done", **where, text=text, logprobs=[]))
    else:
        tail.append(event("response.refusal.done", **where, refusal=reply.refusal))
    tail += [
        event("response.content_part.done", **where, part=message["content"][0]),
        event("response.output_item.done", output_index=out_index, item=message),
        event("response.incomplete" if reply.incomplete else "response.completed", response=final),
    ]

    def error(at: int) -> bytes:
        data = {
            "type": "error",
            "code": "server_error",
            "message": "The server had an error while streaming (fake).",
            "param": None,
            "sequence_number": at,
        }
        return _frame(data, "error")

    return head, deltas, tail, error


def _chat_stream(
    req: FakeRequest, reply: FakeReply, text: str, usage: Tokens, report: bool = True
) -> tuple[list[bytes], list[bytes], list[bytes], Callable[[int], bytes]]:
    """(head, deltas, tail, error-frame maker) of a Chat Completions chunk stream; `report`
    False leaves the usage chunk out even when asked for (llama.cpp's server)."""
    final = _chat_body(req, reply, text, usage)
    asked = bool((req.body.get("stream_options") or {}).get("include_usage"))
    with_usage = asked and report
    base = {
        "id": final["id"],
        "object": "chat.completion.chunk",
        "created": final["created"],
        "model": final["model"],
        "service_tier": final["service_tier"],
        "system_fingerprint": final["system_fingerprint"],
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _frame({**base, "choices": [choice], **({"usage": None} if with_usage else {})})

    head = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if reply.refusal is None:
        deltas = [chunk({"content": piece}) for piece in text_pieces(text)]
    else:
        deltas = [chunk({"refusal": piece}) for piece in text_pieces(reply.refusal)]
    tail = [chunk({}, final["choices"][0]["finish_reason"])]
    if with_usage:
        tail.append(_frame({**base, "choices": [], "usage": final["usage"]}))
    tail.append(_frame("[DONE]"))

    def error(at: int) -> bytes:
        message = "The server had an error while streaming (fake)."
        return _frame(error_body(message, "server_error"))

    return head, deltas, tail, error


def _event_stream(
    req: FakeRequest, reply: FakeReply, text: str, usage: Tokens, report: bool = True
) -> _EventStream:
    if req.api == "responses":
        head, deltas, tail, error = _responses_stream(req, reply, text, usage)
    else:
        head, deltas, tail, error = _chat_stream(req, reply, text, usage, report)
    if reply.cut_after is None:
        return _EventStream(head + deltas + tail)
    frames = head + deltas[: reply.cut_after]
    if reply.cut == "error":
        return _EventStream([*frames, error(len(frames))])
    return _EventStream(frames, drop=reply.cut == "disconnect")


def _embeddings_body(req: FakeRequest, reply: FakeReply | None) -> Any:
    dim = req.body.get("dimensions") or DEFAULT_EMBEDDING_DIM
    b64 = req.body.get("encoding_format") == "base64"  # the SDK asks for base64 by default
    data = []
    for i, t in enumerate(req.texts):
        vec = fake_embedding(t, int(dim))
        emb: Any = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode() if b64 else vec
        data.append({"object": "embedding", "index": i, "embedding": emb})
    tokens = input_tokens_of(req)
    if reply is not None and reply.usage and "input_tokens" in reply.usage:
        tokens = reply.usage["input_tokens"]
    return {
        "object": "list",
        "data": data,
        "model": req.model or "text-embedding-3-small",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def llama_cpp_refusal(form: str) -> dict[str, Any]:
    """llama-cpp-python's answer (HTTP 500) to a `response_format` type it does not know, as
    recorded from its server (0.3.36): FastAPI's validation error, wrapped as a server error."""
    message = (
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
        "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': "
        f"'{form}', 'ctx': {{'expected': \"'text' or 'json_object'\"}}}}\n\n  File "
        '"/venv/lib/python3.11/site-packages/llama_cpp/server/app.py", line 376, in '
        "create_chat_completion\n    POST /v1/chat/completions"
    )
    return error_body(message, "internal_server_error")


def error_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error envelope."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


_STATUS_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Bad request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    404: ("invalid_request_error", None, "Not found."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached (fake)."),
    500: ("server_error", None, "The server had an error while processing your request."),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


# -- the HTTP server -------------------------------------------------------------------------------
class _Server(LocalHTTPServer):
    def __init__(self, address: tuple[str, int], fake: FakeOpenAI) -> None:
        self.fake = fake
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # the client went away (timeouts, stop()): not our problem
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else keep-alive answers wait ~40 ms for delayed ACKs
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _client_gone(self) -> bool:
        """Whether the client closed the connection (e.g. it timed out while we slept)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _serve(self, method: str) -> None:
        fake = self.server.fake
        path, _, query = self.path.partition("?")
        path = path.rstrip("/")
        raw = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        deployment = None
        if fake.azure_api_version is not None:
            path, deployment = fake.azure_path(path, query, headers)
        upload: dict[str, Any] = {}
        if headers.get("content-type", "").startswith("multipart/form-data"):
            fields, files = multipart_form(headers["content-type"], raw)
            parsed, raw, upload = dict(fields), b"", files.get("file", {})
        else:
            try:
                parsed = json.loads(raw) if raw else {}
            except ValueError:
                parsed = None
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        req = _describe(method, path, body, headers)
        if deployment is not None:  # Azure: the deployment in the path is the model
            req.model = deployment
        req.audio, req.filename = upload.get("content"), upload.get("filename")
        status, payload, extra = fake._handle(
            req, bad_json=raw != b"" and parsed is None, client_gone=self._client_gone
        )
        if status == 0:  # disconnect without an answer
            self._drop()
            return
        if isinstance(payload, _EventStream):
            self._stream(payload)
            return
        binary = payload if isinstance(payload, _Binary) else None
        data = binary.content if binary else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", binary.content_type if binary else "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-request-id", "req_" + uuid.uuid4().hex[:16])
        self.send_header("openai-processing-ms", "1")
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _stream(self, answer: _EventStream) -> None:
        """Server-sent events, one HTTP chunk each, paced by `stream_delay`."""
        fake = self.server.fake
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.send_header("x-request-id", "req_" + uuid.uuid4().hex[:16])
        self.end_headers()
        self.wfile.flush()
        for i, frame in enumerate(answer.frames):
            if i and fake.stream_delay > 0 and fake._stopping.wait(fake.stream_delay):
                self._drop()
                return
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            self.wfile.flush()
        if answer.drop:
            self._drop()
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class FakeOpenAI(LocalServer):
    """A fake OpenAI API on 127.0.0.1 (port 0 = a free one), served from a daemon thread.

    Thread-safe; usable from sync tests, async tests and subprocesses (pass `base_url`).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__()
        self.host = host
        self.port = port
        self.responder: Responder = default_responder
        self.transcriber: Responder = default_transcriber  # transcription text when none queued
        self.latency: float = 0.0  # seconds added to every answer
        self.kind_latency: dict[str, float] = {}  # extra seconds per request kind
        self.stream_delay: float = 0.0  # seconds between the events of a streamed answer
        self.refuse_streams: bool = False  # answer stream=true with 400, like servers without it
        # Structured-output forms answered with an error, as llama.cpp's server answers
        # "json_schema" with HTTP 500 and a validation error naming response_format.
        self.refused_formats: frozenset[str] = frozenset()
        self.refused_format_status: int = 500
        # Chat Completions streams without the usage chunk, whatever stream_options says
        # (llama.cpp's server).
        self.stream_usage: bool = True
        # The model's context in approx_tokens: a chat request whose prompt fills it is refused
        # and a longer answer is cut, as llama.cpp's server does (see like_llama_cpp and
        # _over_context); None = no limit.
        self.context_window: int | None = None
        self.down: bool = False  # every request answers 503
        # Usage as a provider reports it: tokens counted with `count_tokens` (approx_tokens, or
        # a real tokenizer for figures like the provider's), a strict call's schema billed with
        # the prompt when `bill_schema`, and `prefix_cache` (None: no prompt cache) reporting
        # the prefix an earlier request shared as cached input.
        self.count_tokens: Counter = approx_tokens
        self.bill_schema: bool = False
        self.prefix_cache: PrefixCache | None = PrefixCache()
        self.retry_after_ms: float | None = 1.0  # sent with error answers; keeps retries fast
        self._provider_defaults()
        self._lock = threading.Lock()
        self._requests: list[FakeRequest] = []
        self._queue: deque[tuple[Kind | None, Answer]] = deque()
        self._failures: deque[_Failure] = deque()
        self._stopping = threading.Event()
        self._epoch = 0  # bumped by reset(): answers still sleeping in `latency` are dropped

    # -- lifecycle -------------------------------------------------------------------------------
    def open_server(self) -> _Server:
        self._stopping.clear()
        server = _Server((self.host, self.port), self)
        self.port = server.server_address[1]
        return server

    def wake(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in `latency`

    @property
    def base_url(self) -> str:
        """E.g. "http://127.0.0.1:PORT/v1" (what `AsyncOpenAI(base_url=...)` wants)."""
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running; call start() first")
        return f"http://{self.host}:{self.port}/v1"

    # -- scripting -------------------------------------------------------------------------------
    def queue_reply(self, answer: Answer, kind: Kind | None = None) -> None:
        """Answer the next request of `kind` with this (FIFO, before the responder).

        kind=None matches the next generation request ("reply" or "structured"); count and embed
        requests only take entries queued for their own kind (an int or FakeReply(usage=...)).
        """
        with self._lock:
            self._queue.append((kind, answer))

    def fail_next(
        self,
        n: int = 1,
        status: int = 500,
        kind: Kind | None = None,
        *,
        mode: FailMode = "status",
        message: str | None = None,
        code: str | None = None,
    ) -> None:
        """Fail the next `n` requests (of `kind`, or of any kind): an HTTP error in OpenAI's
        format (`code` instead of the status's usual one, e.g. "model_not_found"), or with
        mode="disconnect" a closed socket and no answer at all."""
        with self._lock:
            self._failures.extend(_Failure(kind, status, mode, message, code) for _ in range(n))

    def reset(self) -> None:
        """Forget recorded requests, queued replies and failures; restore default behaviour."""
        with self._lock:
            self._epoch += 1
            self._requests.clear()
            self._queue.clear()
            self._failures.clear()
        self.responder = default_responder
        self.transcriber = default_transcriber
        self.latency = 0.0
        self.kind_latency = {}
        self.stream_delay = 0.0
        self.refuse_streams = False
        self.refused_formats = frozenset()
        self.refused_format_status = 500
        self.stream_usage = True
        self.context_window = None
        self.down = False
        self.retry_after_ms = 1.0
        self.count_tokens = approx_tokens
        self.bill_schema = False
        self.prefix_cache = PrefixCache()
        self._provider_defaults()

    def _provider_defaults(self) -> None:
        """The provider rules off: the kind server every test had before the profiles."""
        self.profile = "kind"
        self.apis: frozenset[str] | None = None  # the APIs served (None: all); others 404
        self.strict_schemas = False  # json_schema checked against OpenAI's strict subset
        self.schema_refuses_default = False  # ... and `default` refused (Azure)
        self.refused_params: frozenset[str] = frozenset()  # 400 "Unrecognized request argument"
        self.reasoning: Reasoning | None = None  # reasoning models emulated (provider_rules)
        self.json_word = False  # json_object refused unless "json" is in the messages
        self.azure_api_version: str | None = None  # Azure's paths, api-version and api-key

    # -- provider profiles (the rules each service documents: tests/support/provider_rules.py) --
    def like_openai(self, reasoning: Reasoning | None = None) -> FakeOpenAI:
        """OpenAI's API: both APIs, strict schemas checked, reasoning effort only for reasoning
        models (which report reasoning tokens), JSON mode needs the word "json"."""
        self.profile = "openai"
        self.strict_schemas = True
        self.reasoning = reasoning or Reasoning()
        self.json_word = True
        return self

    def like_azure(self, api_version: str = "2025-04-01-preview") -> FakeOpenAI:
        """Azure OpenAI through the SDK's Azure client: OpenAI's rules, served at
        `/openai/deployments/<deployment>/chat/completions` and `/openai/responses` with an
        `api-version` query and an `api-key` header; `default` refused in strict schemas."""
        self.like_openai()
        self.profile = "azure"
        self.schema_refuses_default = True
        self.azure_api_version = api_version
        return self

    def like_deepseek(self) -> FakeOpenAI:
        """A DeepSeek-like server: Chat Completions only (404 on /v1/responses), JSON mode
        (with the word "json") but no `json_schema` (HTTP 400), no reasoning effort taken; its
        context cache counts a repeated prefix in 64-token units and reports it as
        `prompt_cache_hit_tokens` (DeepSeek's "Context Caching" guide)."""
        self.profile = "deepseek"
        self.apis = frozenset({"chat_completions", "embeddings"})
        self.refused_formats = frozenset({"json_schema"})
        self.refused_format_status = 400
        self.json_word = True
        self.refused_params = frozenset({"reasoning_effort"})
        # its context cache: a repeated prefix in units of 64 tokens, reported as hit tokens
        self.prefix_cache = PrefixCache(min_tokens=64, block_tokens=64)
        return self

    def like_local_server(self) -> FakeOpenAI:
        """A local server without the Responses API (older Ollama, most local servers): Chat
        Completions, any schema taken as it is, unknown arguments ignored."""
        self.profile = "local"
        self.apis = frozenset({"chat_completions", "embeddings", "audio"})
        return self

    def provider_refusal(self, req: FakeRequest) -> tuple[int, Any, dict[str, str]] | None:
        """What this profile's provider refuses in `req` (tests/support/provider_rules.py), or
        None."""
        if self.apis is not None and req.api is not None and req.api not in self.apis:
            return self._error(404, f"Invalid URL ({req.method} {req.path})")
        for name in sorted(self.refused_params):
            if name in req.body:
                return self._refusal(f"Unrecognized request argument supplied: {name}", name)
        effort = effort_sent(req.body)
        wire = "reasoning.effort" if req.api == "responses" else "reasoning_effort"
        if effort is not None and self.reasoning is not None:
            if not self.reasoning.reasons(req.model):
                said = f"Unsupported parameter: '{wire}' is not supported with this model."
                return self._refusal(said, wire, "unsupported_parameter")
            takes = self.reasoning.efforts(req.model)
            if effort not in takes:
                said = (
                    f"Unsupported value: '{wire}' does not support '{effort}' with this model. "
                    f"Supported values are: {', '.join(repr(e) for e in takes)}."
                )
                return self._refusal(said, wire, "unsupported_value")
        if req.response_format == "json_schema" and self.strict_schemas and req.schema:
            problems = strict_schema_problems(
                req.schema, refuses_default=self.schema_refuses_default
            )
            if problems:
                said = invalid_schema_message(req.schema_name, problems[0])
                return self._refusal(said, "response_format", "invalid_json_schema")
        if req.response_format == "json_object" and self.json_word:
            said = " ".join([req.instructions or "", *(m["content"] for m in req.messages)])
            if "json" not in said.lower():
                return self._refusal(
                    "'messages' must contain the word 'json' in some form, to use "
                    "'response_format' of type 'json_object'.",
                    "messages",
                )
        if req.response_format in self.refused_formats:
            body = llama_cpp_refusal(req.response_format or "")
            if self.profile == "deepseek":  # DeepSeek's words for a format it lacks
                body = error_body(
                    "This response_format type is unavailable now", "invalid_request_error"
                )
            return self.refused_format_status, body, {}
        return None

    def _refusal(
        self, message: str, param: str, code: str | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        body = error_body(message, "invalid_request_error", code)
        body["error"]["param"] = param
        return 400, body, {}

    def reasoned_tokens(self, req: FakeRequest) -> int:
        """The reasoning tokens this profile's model spends on `req` (0: it does not reason)."""
        if self.reasoning is None or not self.reasoning.reasons(req.model):
            return 0
        effort = effort_sent(req.body) or self.reasoning.default_effort
        return self.reasoning.tokens.get(effort, 0)

    def azure_path(self, path: str, query: str, headers: dict[str, str]) -> tuple[str, str | None]:
        """(the OpenAI path an Azure request stands for, its deployment); ("", None) when Azure
        would not serve it (a plain /v1 path, no api-version, no api-key)."""
        asked = parse_qs(query).get("api-version", [""])[0]
        if asked != self.azure_api_version or not headers.get("api-key"):
            return "", None
        found = re.fullmatch(r"/openai/deployments/([^/]+)(/.+)", path)
        if found:
            return "/v1" + found.group(2), found.group(1)
        if path.startswith("/openai/"):
            return "/v1" + path.removeprefix("/openai"), None
        return "", None

    # -- inspection ------------------------------------------------------------------------------
    @property
    def requests(self) -> list[FakeRequest]:
        """A snapshot of every request received, in order."""
        with self._lock:
            return list(self._requests)

    def requests_of(self, kind: Kind) -> list[FakeRequest]:
        return [r for r in self.requests if r.kind == kind]

    @property
    def last_request(self) -> FakeRequest:
        with self._lock:
            if not self._requests:
                raise AssertionError("FakeOpenAI received no requests")
            return self._requests[-1]

    # -- internals -------------------------------------------------------------------------------
    def _error(
        self, status: int, message: str | None = None, code: str | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        type_, usual, default = _STATUS_ERRORS.get(status, ("server_error", None, "Error."))
        code = code or usual
        headers: dict[str, str] = {}
        if status == 429 or status >= 500:
            if self.retry_after_ms is not None:
                headers["retry-after-ms"] = f"{self.retry_after_ms:g}"
            if status == 429:
                headers["retry-after"] = "0"
        return status, error_body(message or default, type_, code), headers

    def like_llama_cpp(self, context_window: int | None = None) -> FakeOpenAI:
        """Answer as llama-cpp-python's server (0.3.36, `python -m llama_cpp.server`) was seen to
        answer Memora: `json_schema` refused with HTTP 500 (its validation error), `json_object`
        with a `schema` honoured, streams without usage, and with `context_window` its context
        rule (`Llama._create_completion`): a prompt as long as the context is refused with HTTP
        400 `context_length_exceeded` (streamed: 200 and no events); a prompt that fits is
        answered, cut where the context ends (`max_tokens` is lowered to the room left, and
        an answer longer than that stops there with finish_reason "length")."""
        self.refused_formats = frozenset({"json_schema"})
        self.refused_format_status = 500
        self.stream_usage = False
        self.context_window = context_window
        return self

    def _over_context(self, req: FakeRequest) -> tuple[int, Any, dict[str, str]] | None:
        if self.context_window is None or req.api != "chat_completions":
            return None
        prompt = input_tokens_of(req)
        if prompt < self.context_window:  # llama.cpp checks the prompt alone, then cuts the answer
            return None
        completion = int(req.body.get("max_tokens") or 0)
        if req.stream:  # the server has sent its 200 before it finds out: the stream is empty
            return 200, _EventStream([]), {}
        message = (
            f"This model's maximum context length is {self.context_window} tokens. However, "
            f"you requested {prompt + completion} tokens ({prompt} in the messages, "
            f"{completion} in the completion). Please reduce the length of the messages or "
            "completion."
        )
        body = error_body(message, "invalid_request_error", "context_length_exceeded")
        body["error"]["param"] = "messages"
        return 400, body, {}

    def _cut_to_context(self, req: FakeRequest, reply: FakeReply, text: str) -> FakeReply:
        """The answer as a server with `context_window` sends it: no longer than the room the
        prompt leaves (and `max_tokens`, which llama.cpp lowers to that room), cut mid-text and
        marked incomplete when longer. Without a context window the answer is as scripted."""
        if self.context_window is None or req.api != "chat_completions" or reply.refusal:
            return reply
        room = self.context_window - input_tokens_of(req)
        asked = int(req.body.get("max_tokens") or 0)
        cap = min(asked, room) if asked > 0 else room
        if approx_tokens(text) <= cap:
            return reply
        cut = text[: max(0, cap - 1) * 4]  # approx_tokens(cut) == cap
        return FakeReply(text=cut, incomplete=True, usage=reply.usage)

    def _usage(self, req: FakeRequest, reply: FakeReply, text: str) -> Tokens:
        """What an answered generation request reports: as scripted (`FakeReply.usage`), else
        counted, its cached input from `prefix_cache`."""
        given = reply.usage or {}
        parts = prompt_parts(req, schema=self.bill_schema)
        inp = given.get("input_tokens", sum(self.count_tokens(p) for p in parts))
        cached = 0
        if self.prefix_cache is not None:
            schema = None  # a schema not billed still ends the shared prefix where it differs
            if req.response_format == "json_schema" and not self.bill_schema:
                schema = json.dumps(req.schema, sort_keys=True)
            key = (req.model, schema)
            cached = min(inp, self.prefix_cache.cached(key, parts, self.count_tokens))
        # billed as output, never shown: as scripted, else as the profile's model reasons
        reasoning = given.get("reasoning_tokens", self.reasoned_tokens(req))
        return Tokens(
            inp,
            given.get("output_tokens", self.count_tokens(reply.refusal or text) + reasoning),
            given.get("cached_tokens", cached),
            reasoning,
            "deepseek" if self.profile == "deepseek" else "openai",
        )

    def _take_failure(self, kind: Kind) -> _Failure | None:
        for f in self._failures:
            if f.kind is None or f.kind == kind:
                self._failures.remove(f)
                return f
        return None

    def _take_queued(self, kind: Kind) -> tuple[bool, Answer]:
        for entry in self._queue:
            qkind, answer = entry
            if qkind == kind or (qkind is None and kind in GENERATION_KINDS):
                self._queue.remove(entry)
                return True, answer
        return False, ""

    def _handle(
        self, req: FakeRequest, *, bad_json: bool, client_gone: Callable[[], bool]
    ) -> tuple[int, Any, dict[str, str]]:
        with self._lock:
            self._requests.append(req)
            failure = None if self.down else self._take_failure(req.kind)
            epoch = self._epoch
        delay = self.latency + self.kind_latency.get(req.kind, 0.0)
        if delay > 0:
            # After a sleep, a client that gave up (or a reset()/stop() meanwhile) must not
            # consume replies queued for later requests: just drop the connection.
            if self._stopping.wait(delay) or epoch != self._epoch or client_gone():
                return 0, None, {}
        if self.down:
            return self._error(503)
        if failure is not None:
            if failure.mode == "disconnect":
                return 0, None, {}
            return self._error(failure.status, failure.message, failure.code)
        if bad_json:
            return self._error(400, "We could not parse the JSON body of your request.")
        refused = self.provider_refusal(req)
        if refused is not None:
            return refused
        if req.stream and (self.refuse_streams or req.kind not in GENERATION_KINDS):
            return self._error(400, "This server does not support stream=true (fake).")
        over = self._over_context(req)
        if over is not None:
            return over
        if req.kind == "other":
            return self._error(404, f"Invalid URL ({req.method} {req.path})")
        with self._lock:
            found, answer = self._take_queued(req.kind)
        if req.kind == "embed":
            return 200, _embeddings_body(req, _as_reply(answer, "embed") if found else None), {}
        if req.kind == "count":
            count = input_tokens_of(req)
            if found:
                usage = _as_reply(answer, "count").usage or {}
                count = usage.get("input_tokens", count)
            return 200, {"object": "response.input_tokens", "input_tokens": count}, {}
        if req.kind == "transcribe":
            bad = _bad_audio(req)
            if bad is not None:
                return self._error(400, bad)
            answer = answer if found else self.transcriber(req)
            return 200, _transcription_body(req, _as_reply(answer, req.kind)), {}
        if req.kind == "speech":
            return 200, _Binary(VOICE_FIXTURE.read_bytes(), "audio/ogg"), {}
        if not found:
            answer = self.responder(req)
        reply = _as_reply(answer, req.kind)
        reply = self._cut_to_context(req, reply, _reply_text(reply))
        text = _reply_text(reply)
        tokens = self._usage(req, reply, text)
        if tokens.reasoning and self.reasoning is not None:
            # The model thinks before its first visible word (streamed or not).
            pause = self.reasoning.seconds(tokens.reasoning)
            if pause > 0 and (self._stopping.wait(pause) or epoch != self._epoch):
                return 0, None, {}
        if req.stream:
            return 200, _event_stream(req, reply, text, tokens, self.stream_usage), {}
        if req.api == "responses":
            return 200, _responses_body(req, reply, text, tokens), {}
        return 200, _chat_body(req, reply, text, tokens), {}
