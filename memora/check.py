"""`memora check`: the configured model provider tried with the calls Memora makes (a reply, the
extraction's strict schema, a streamed reply, embeddings, a transcription), each result said as
what Memora will do with it; and what 1,000 learner turns cost at the `[pricing]` prices.

A problem that stops Memora from answering anyone (a refused key, an unknown model, a server that
cannot be reached or has no Responses API) is fatal: `Finding.fatal`, and the CLI exits non-zero.
A server that can do less (no json_schema, no streaming) is a note: Memora works around it; so is
a failing embedding or transcription endpoint (replies go on without memories or voice).
"""

from __future__ import annotations

import io
import time
import wave
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

import openai

from memora.app import make_audio, make_embedder, metering_models, model_client
from memora.config import PricingConfig, Settings
from memora.errors import LLMError
from memora.extraction import LearnerExtractionResult
from memora.llm import CallInfo, ChatMessage, OpenAILLM
from memora.llm.sdk_errors import NO_RESPONSES_API
from memora.usage import Call, cost, unpriced

Status = Literal["ok", "note", "off", "fatal"]
T = TypeVar("T")

ASK = "This is a connection check. Answer with the one word: ready."
API_NAMES = {"responses": "Responses API", "chat_completions": "Chat Completions API"}

TYPICAL_TURN = (
    Call("reply", "", input_tokens=855, output_tokens=126),
    Call("extraction", "", 3_165, 257, cached_tokens=2_765, reasoning_tokens=200),
    Call("summary", "", input_tokens=434, output_tokens=145),  # 27 folds in 30 turns
)
"""One learner turn of a 30-turn conversation at the default settings (reasoning efforts: reply
minimal, extraction low, summary minimal), per call: measured by
`python -m benchmarks.turn_cost` (docs/benchmarks.md) with the real prompts: what `memora check`
estimates the cost of 1,000 turns from."""


@dataclass(frozen=True)
class Finding:
    """What one capability does with this provider, said as what Memora will do."""

    capability: str
    status: Status
    says: str

    @property
    def fatal(self) -> bool:
        return self.status == "fatal"

    def line(self) -> str:
        mark = {"ok": "ok", "note": "note", "off": "-", "fatal": "FAIL"}[self.status]
        return f"{mark:<4} {self.capability}: {self.says}"


def server(settings: Settings) -> str:
    """Where the model calls go, as the operator configured it."""
    cfg = settings.llm
    return cfg.azure_endpoint or cfg.base_url or "https://api.openai.com/v1"


def _why(exc: LLMError, settings: Settings, model: str) -> str:
    """A failed first call, as the setting to change."""
    cause = exc.__cause__
    where = server(settings)
    if exc.code == NO_RESPONSES_API:
        return f'{where} has no Responses API: set [llm] api = "chat_completions"'
    if isinstance(cause, openai.AuthenticationError | openai.PermissionDeniedError):
        return f"{where} refuses the key (HTTP {cause.status_code}): check [llm] api_key"
    if isinstance(cause, openai.NotFoundError):
        return f"{where} does not know the model {model!r} (HTTP 404): check [llm] model"
    if isinstance(cause, openai.APIConnectionError):  # timeouts too
        return f"{where} cannot be reached ({exc}): check [llm] base_url"
    return f"{where} fails the model call ({exc})"


async def _timed(call: Awaitable[T]) -> tuple[T, float]:
    started = time.monotonic()
    result = await call
    return result, time.monotonic() - started


async def check_model(settings: Settings, llm: OpenAILLM, extraction: OpenAILLM) -> list[Finding]:
    """The key and model, a reply, the extraction's strict schema and streaming, tried on the
    clients Memora answers with (`llm`) and extracts with (`extraction`)."""
    cfg = settings.llm
    api = API_NAMES[cfg.api]
    try:
        answer, took = await _timed(llm.complete(ASK, [ChatMessage("user", "Ready?")]))
    except LLMError as exc:
        why = _why(exc, settings, llm.model)
        return [
            Finding("key and model", "fatal", why),
            Finding("reply", "fatal", "not tried: Memora cannot answer anyone until it works"),
        ]
    found = [
        Finding("key and model", "ok", f"{llm.model} answers at {server(settings)} ({api})"),
        Finding(
            "reply",
            "ok",
            f"answered in {took:.1f} s ({answer.usage.input_tokens} tokens in, "
            f"{answer.usage.output_tokens} out): Memora replies with {llm.model}",
        ),
    ]
    found.append(await _structured(extraction))
    found.append(await _streaming(llm))
    return found


async def _structured(llm: OpenAILLM) -> Finding:
    """The extraction's own schema, asked for strictly, as after every reply."""
    ask = [ChatMessage("user", "<user_message>\nHello!\n</user_message>")]
    try:
        parsed = await llm.parse(ASK, ask, LearnerExtractionResult, call=CallInfo("extraction"))
    except LLMError as exc:
        return Finding(
            "structured output",
            "note",
            f"failed ({exc}): memories are not extracted while it fails; replies go on",
        )
    form = llm.structured_mode_for(LearnerExtractionResult)  # decided per schema
    if form == "json_schema":
        says = "strict json_schema taken: extraction answers in the exact schema"
        return Finding("structured output", "ok", says)
    if form == "json_object":
        says = "your server refuses json_schema: extraction will use JSON mode"
    else:
        says = "your server refuses json_schema and JSON mode: extraction asks for JSON in words"
    if parsed.parsed is None:
        says += f" (its answer did not fit: {parsed.problem})"
    return Finding("structured output", "note", says)


async def _streaming(llm: OpenAILLM) -> Finding:
    pieces: list[str] = []

    async def on_delta(text: str) -> None:
        pieces.append(text)

    try:
        await llm.complete(ASK, [ChatMessage("user", "Ready?")], on_delta=on_delta)
    except LLMError as exc:
        return Finding("streaming", "note", f"a streamed reply failed ({exc})")
    if not llm.streams:
        return Finding("streaming", "note", "your server refuses streaming: replies arrive whole")
    return Finding(
        "streaming", "ok", f"replies are streamed as they are written ({len(pieces)} pieces)"
    )


async def check_embeddings(settings: Settings) -> Finding:
    """The provider's embeddings, when `[embeddings] provider = "openai"`: the embedder Memora
    builds, asked for one vector."""
    if settings.embeddings.provider != "openai":
        return Finding("embeddings", "off", "the local model in the package (no provider call)")
    embedder = make_embedder(settings)
    try:
        got = await embedder.embed(["I live in Taipei."])
    except Exception as exc:  # the embedder's own errors and the SDK's
        says = f"{embedder.name} failed ({exc}): no memory is kept while it fails; replies go on"
        return Finding("embeddings", "note", says)
    finally:
        closer = getattr(embedder, "aclose", None)
        if closer is not None:
            await closer()
    return Finding("embeddings", "ok", f"{embedder.name}, {got.vectors.shape[1]} dimensions")


def silence_wav(seconds: float = 0.5, rate: int = 16_000) -> bytes:
    """A short silent WAV file: something every transcription endpoint takes."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * int(seconds * rate))
    return out.getvalue()


async def check_transcription(settings: Settings) -> Finding:
    audio = make_audio(settings)
    if audio is None:
        return Finding("transcription", "off", "voice is off ([voice] enabled = false)")
    model = settings.llm.transcription_model
    try:
        await audio.transcribe(silence_wav(), "check.wav")
    except LLMError as exc:
        return Finding(
            "transcription", "note", f"{model} failed ({exc}): voice notes get an apology"
        )
    finally:
        await audio.aclose()
    return Finding("transcription", "ok", f"{model} transcribes voice notes")


def turn_cost(pricing: PricingConfig, models: Mapping[str, str], turns: int = 1000) -> Finding:
    """What `turns` typical learner turns cost at the configured prices, each call on the model
    configured for its kind."""
    calls = [replace(c, model=models.get(c.kind, "")) for c in TYPICAL_TURN]
    missing = unpriced(pricing, calls)
    each = cost(pricing, calls)
    if missing or each is None:
        says = f"no price in [pricing] for {', '.join(missing)}: add one to see what turns cost"
        return Finding("cost", "off", says)
    return Finding(
        "cost",
        "ok",
        f"{turns:,} learner turns ≈ {each * turns:.2f} {pricing.currency} at [pricing] (a "
        "typical turn: reply, extraction and summary, as benchmarks/turn_cost measures it)",
    )


async def run_checks(settings: Settings) -> list[Finding]:
    """Every check but Telegram's, in order, on the clients Memora itself would build."""
    cfg = settings.llm
    llm = model_client(settings, cfg.model)
    extraction = model_client(settings, cfg.extraction_model or cfg.model, background=True)
    try:
        found = await check_model(settings, llm, extraction)
    finally:
        await llm.aclose()
        await extraction.aclose()
    if any(f.fatal for f in found):
        return found
    found.append(await check_embeddings(settings))
    found.append(await check_transcription(settings))
    found.append(turn_cost(settings.pricing, metering_models(settings)))
    return found
