"""The one composition function: settings in, a running engine out, closed on exit."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from urllib.parse import urlsplit

from openai import AsyncAzureOpenAI, AsyncOpenAI

from memora.blocking import run_blocking
from memora.config import ConfigError, Settings, require_llm
from memora.engine import Engine, EngineConfig
from memora.llm import LLM, ChatMessage, Learned, OpenAIAudio, OpenAILLM
from memora.llm.pacing import AdaptiveTimeout
from memora.longterm import MemoryStore
from memora.longterm.embeddings import Embedder, LocalUSE, OpenAIEmbedder
from memora.privacy.secretfilter import mask_secrets
from memora.shortterm.instructions import TUTOR_INSTRUCTIONS
from memora.shortterm.tokens import LocalTokenCounter, ProviderTokenCounter, TokenCounter
from memora.startup import StartupError, check_stores
from memora.storage import Database
from memora.textnorm import warm_in_background
from memora.usage import Metering, UsageLedger

log = logging.getLogger(__name__)


class _Redact(logging.Filter):
    """Keeps tokens, keys and the secrets the filter recognises (a learner's password in a
    DEBUG dump of a request) out of every log line, whoever logs it."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s and len(s) >= 6]

    def _clean(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "[redacted]")
        return mask_secrets(text)

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = self._clean(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:  # tracebacks quote tokens too
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._clean(record.exc_text)
        return True


def setup_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.logging.level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    db_password = urlsplit(settings.storage.database_url).password or ""
    keys = [settings.telegram.token, settings.llm.api_key, db_password]
    redact = _Redact([*keys, settings.telegram.webhook_secret])
    for handler in logging.getLogger().handlers:
        handler.addFilter(redact)
    # httpx logs every request URL (Telegram URLs contain the bot token); the openai SDK's
    # httpx2 logs every model call; aiosqlite's DEBUG quotes every statement's values (learner
    # text, the deployment's keys); matplotlib its font cache. None belongs in an operator's log
    # (nor in the terminal chat, which shows the log).
    for noisy in ("httpx", "httpx2", "httpcore", "chromadb", "aiosqlite", "matplotlib", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def redact(secret: str) -> None:
    """Keep one more secret, known only once running (the webhook's, from the store), out of
    every log line from now on (PTB's DEBUG log quotes each Bot API call's parameters)."""
    for handler in logging.getLogger().handlers:
        for found in handler.filters:
            if isinstance(found, _Redact) and len(secret) >= 6:
                found.secrets.append(secret)


def metering_models(settings: Settings, embedding_model: str = "") -> dict[str, str]:
    """The model each kind of call uses, as configured (what its usage is priced by)."""
    cfg = settings.llm
    return {
        "reply": cfg.model,
        "summary": cfg.summary_model or cfg.model,
        "extraction": cfg.extraction_model or cfg.model,
        "transcription": cfg.transcription_model,
        "embedding": embedding_model,
    }


def metering(settings: Settings, db: Database, embedding_model: str) -> Metering:
    """What each learner spends, counted against `[limits]`, by the models configured here."""
    models = metering_models(settings, embedding_model)
    return Metering(UsageLedger(db), settings.limits, models, settings.pricing)


def openai_client(settings: Settings, *, timeout: float, max_retries: int) -> AsyncOpenAI:
    """The SDK client for the configured server: Azure OpenAI's own client when
    `[llm] azure_endpoint` is set (its paths, api-version and api-key header), else OpenAI's."""
    cfg = settings.llm
    if cfg.azure_endpoint:
        return AsyncAzureOpenAI(
            azure_endpoint=cfg.azure_endpoint,
            api_version=cfg.azure_api_version,
            api_key=cfg.api_key or "not-needed",
            timeout=timeout,
            max_retries=max_retries,
        )
    return AsyncOpenAI(
        api_key=cfg.api_key or "not-needed",
        base_url=cfg.base_url,
        timeout=timeout,
        max_retries=max_retries,
    )


def model_client(
    settings: Settings, model: str, learned: Learned | None = None, *, background: bool = False
) -> OpenAILLM:
    """A model client; `background` ones (summary, extraction) get their own, shorter limits.
    `learned`: what the server refused, shared by the clients of one process."""
    cfg = settings.llm
    timeout = cfg.background_timeout if background else cfg.timeout
    max_retries = cfg.background_max_retries if background else cfg.max_retries
    if cfg.azure_endpoint and cfg.azure_deployment and model == cfg.model:
        model = cfg.azure_deployment  # Azure routes by deployment: its name is the model
    return OpenAILLM.for_api(
        cfg.api,
        model=model,
        api_key=cfg.api_key or "not-needed",
        client=openai_client(settings, timeout=timeout, max_retries=max_retries),
        efforts={
            "reply": cfg.reasoning_effort,
            "extraction": cfg.extraction_reasoning_effort,
            "summary": cfg.summary_reasoning_effort,
        },
        store=cfg.store,
        learned=learned,
        max_output_tokens=cfg.max_output_tokens or None,
        # a background call's limit follows what the endpoint has shown (a CPU-bound local model)
        pacing=AdaptiveTimeout(cfg.background_timeout, cfg.background_timeout_max)
        if background
        else None,
    )


def make_audio(settings: Settings) -> OpenAIAudio | None:
    """The transcription (and optional speech) client: same server and key as the model."""
    if not settings.voice.enabled:
        return None
    cfg = settings.llm
    client = openai_client(settings, timeout=cfg.timeout, max_retries=cfg.max_retries)
    return OpenAIAudio(
        client,
        transcription_model=cfg.transcription_model,
        speech_model=cfg.speech_model,
        speech_voice=settings.voice.speech_voice,
    )


def make_embedder(settings: Settings) -> Embedder:
    if settings.embeddings.provider == "openai":
        return OpenAIEmbedder(
            model=settings.embeddings.model or "text-embedding-3-small",
            api_key=settings.llm.api_key or "not-needed",
            base_url=settings.llm.base_url,
            timeout=settings.llm.timeout,
            max_retries=settings.llm.max_retries,
            dim=settings.embeddings.dimensions,
            client=openai_client(
                settings, timeout=settings.llm.timeout, max_retries=settings.llm.max_retries
            ),
        )
    return LocalUSE()


def check_budget(settings: Settings, instructions: str = TUTOR_INSTRUCTIONS) -> None:
    """The budget must leave room for a message beside the system prompt, which is never cut."""
    floor = LocalTokenCounter(settings.memory.safety_margin).count_sync(
        instructions, [ChatMessage("user", "x" * 200)]
    )
    if settings.memory.max_input_tokens < floor:
        raise ConfigError(
            f"invalid config value for 'memory.max_input_tokens': "
            f"{settings.memory.max_input_tokens} leaves no room for a message beside the system "
            f"prompt (use at least {floor})"
        )


@asynccontextmanager
async def open_engine(
    settings: Settings, *, llm: LLM | None = None, needs_model: bool = True
) -> AsyncIterator[Engine]:
    """Open the database, the memory store and the model clients; close them all on exit.

    `needs_model=False` (exports) opens everything without insisting on an API key.
    """
    if needs_model:
        require_llm(settings)
    await run_blocking(check_stores, settings, writable=needs_model)
    async with AsyncExitStack() as stack:
        db = Database(settings.db_path, url=settings.storage.database_url)
        stack.push_async_callback(db.close)  # before open: a failed open closes its thread too
        try:
            await db.open()
        except Exception as exc:  # sqlite3, OSError, the PostgreSQL driver: none can start
            where = "(storage.database_url)" if settings.storage.database_url else settings.db_path
            raise StartupError(f"the database {where} cannot be used: {exc}") from None

        learned = Learned()  # a refusal is learned (and logged) once for the three clients
        main_llm: LLM = llm or model_client(settings, settings.llm.model, learned)
        stack.push_async_callback(main_llm.aclose)
        summary_llm = extraction_llm = main_llm
        if llm is None:  # their own clients: other models maybe, shorter limits always
            cfg = settings.llm
            summary_model, extraction_model = cfg.summary_model, cfg.extraction_model
            summary_llm = model_client(
                settings, summary_model or cfg.model, learned, background=True
            )
            stack.push_async_callback(summary_llm.aclose)
            extraction_llm = model_client(
                settings, extraction_model or cfg.model, learned, background=True
            )
            stack.push_async_callback(extraction_llm.aclose)

        check_budget(settings)
        counter: TokenCounter
        if settings.memory.token_counting == "provider":
            counter = ProviderTokenCounter(main_llm, settings.memory.safety_margin)
        else:
            counter = LocalTokenCounter(settings.memory.safety_margin)

        warm_in_background()  # the stemmer's dictionary while the rest opens
        embedder = make_embedder(settings)
        store = MemoryStore(settings.chroma_path, embedder, url=settings.longterm.chroma_url)
        try:
            await store.open()
        except Exception as exc:  # chromadb raises many kinds; each one means "cannot start"
            where = (
                "(longterm.chroma_url)" if settings.longterm.chroma_url else settings.chroma_path
            )
            raise StartupError(f"the memory store {where} cannot be opened: {exc}") from None
        stack.push_async_callback(store.close)
        closer = getattr(embedder, "aclose", None)
        if closer is not None:
            stack.push_async_callback(closer)

        audio = make_audio(settings)
        if audio is not None:
            stack.push_async_callback(audio.aclose)

        engine = Engine(
            db=db,
            llm=main_llm,
            summary_llm=summary_llm,
            extraction_llm=extraction_llm,
            counter=counter,
            store=store,
            config=EngineConfig.from_settings(settings),
            transcriber=audio,
            speaker=audio if settings.voice.spoken_replies else None,
            metering=metering(settings, db, embedder.name),
        )
        stack.push_async_callback(engine.drain)
        log.info(
            "engine ready: model=%s api=%s data_dir=%s embeddings=%s",
            settings.llm.model,
            settings.llm.api,
            settings.storage.data_dir.resolve(),
            embedder.name,
        )
        yield engine
