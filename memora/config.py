"""Typed configuration: defaults < TOML file < usual env names < MEMORA_<SECTION>__<KEY> env.

The TOML file is picked by `--config PATH`, else `MEMORA_CONFIG`, else `./config.toml` if present.
Every key is documented in `config.example.toml`.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.exceptions import SettingsError

from memora.errors import ConfigError as ConfigError  # re-exported

# The usual names some deployments already have in their environment.
USUAL_ENV = {
    "OPENAI_API_KEY": ("llm", "api_key"),
    "OPENAI_BASE_URL": ("llm", "base_url"),
    "TELEGRAM_BOT_TOKEN": ("telegram", "token"),
}


class _Section(BaseModel):
    # inf and nan are no timeout, budget or score anyone means (`timeout = inf` in TOML).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class TelegramConfig(_Section):
    token: str = ""
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str = "https://api.telegram.org/file/bot"
    admin_ids: list[int] = Field(default_factory=list)
    allowed_user_ids: list[int] = Field(default_factory=list)
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str = ""
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(8443, ge=1, le=65535)
    webhook_secret: str = ""
    poll_timeout: int = Field(30, ge=0, le=120)
    stream_replies: bool = False
    stream_drafts: bool = True  # private chats stream through message drafts (Bot API 9)

    def allows(self, user_id: int) -> bool:
        """Whether `user_id` may use the bot: everyone when allowed_user_ids is empty, else
        those listed, and the admins always."""
        ids = self.allowed_user_ids
        return not ids or user_id in ids or user_id in self.admin_ids


# "" sends no effort (the model's own default: medium for gpt-5 and gpt-5-mini).
Effort = Literal["", "none", "minimal", "low", "medium", "high", "xhigh"]


class LLMConfig(_Section):
    base_url: str | None = None
    api_key: str = ""
    model: str = "gpt-5-mini"
    api: Literal["responses", "chat_completions"] = "responses"
    timeout: float = Field(60.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    background_timeout: float = Field(30.0, gt=0)
    background_timeout_max: float = Field(300.0, gt=0)
    background_max_retries: int = Field(1, ge=0, le=10)
    # Per call kind: a quick first word for the reply, little reasoning for the background
    # calls (docs/decisions/0160-provider-requests.md). Sent only to models that take one.
    reasoning_effort: Effort = "minimal"  # the reply's
    extraction_reasoning_effort: Effort = "low"
    summary_reasoning_effort: Effort = "minimal"
    store: bool = False  # whether the provider may keep requests and answers (Responses API)
    # Azure OpenAI through the SDK's Azure client (empty endpoint: not Azure).
    azure_endpoint: str = ""
    azure_api_version: str = "2025-04-01-preview"
    azure_deployment: str = ""  # the replies' deployment; empty = model
    max_output_tokens: int = Field(0, ge=0)
    summary_model: str = ""
    extraction_model: str = ""
    transcription_model: str = "gpt-4o-mini-transcribe"
    speech_model: str = "gpt-4o-mini-tts"


# The input budget: the conversation's 1000 tokens plus the memory block's (docs/decisions/0105).
DEFAULT_MAX_INPUT_TOKENS = 1500


class MemoryConfig(_Section):
    max_input_tokens: int = Field(DEFAULT_MAX_INPUT_TOKENS, ge=100)
    max_recent_turns: int = Field(3, ge=0, le=100)
    max_message_chars: int = Field(4000, ge=1)
    token_counting: Literal["local", "provider"] = "local"
    safety_margin: float = Field(0.0, ge=0.0, le=1.0)


# The memory block's budget: every memory of a typical learner fits (docs/decisions/0105).
DEFAULT_MEMORY_TOKENS = 500


class RetrievalConfig(_Section):
    top_k: int = Field(3, ge=0, le=50)
    min_score: float | None = Field(None, ge=0.0, le=1.0)
    use_last_turn: bool = True
    memory_tokens: int = Field(DEFAULT_MEMORY_TOKENS, ge=0, le=8000)
    group_memories: Literal["group", "all"] = "group"


class EmbeddingsConfig(_Section):
    provider: Literal["local", "openai"] = "local"
    model: str = ""
    dimensions: int = Field(1536, ge=1)


class ExtractionConfig(_Section):
    enabled: bool = True


class VoiceConfig(_Section):
    enabled: bool = True
    max_seconds: int = Field(120, ge=1)
    max_bytes: int = Field(20_000_000, ge=1)
    spoken_replies: bool = False
    speech_voice: str = "alloy"


def default_data_dir() -> Path:
    """Per user, not per folder: `memora run` and `memora chat` find the same memory wherever
    they are started (~/.local/share/memora on Linux, ~/Library/Application Support/memora on
    macOS, %LOCALAPPDATA%\\memora on Windows). Start-up logs the resolved path."""
    return platformdirs.user_data_path("memora")


class LearnerConfig(_Section):
    enabled: bool = True


class TutorConfig(_Section):
    """Who the tutor is and how it teaches: the reply call's instructions ("" = Memora's own,
    memora.shortterm.instructions.TUTOR_INSTRUCTIONS)."""

    instructions: str = ""


class RemindersConfig(_Section):
    """Reminders and the weekly report (memora/reminders/)."""

    weekly: bool = False  # a learner who sets a daily reminder gets the weekly report too


class LimitsConfig(_Section):
    """Per learner, per UTC day and month (0 = no cap; admins are exempt)."""

    daily_tokens: int = Field(0, ge=0)
    monthly_tokens: int = Field(0, ge=0)
    daily_voice_seconds: int = Field(0, ge=0)
    monthly_voice_seconds: int = Field(0, ge=0)


class ModelPrice(_Section):
    input: float = Field(0.0, ge=0)  # per 1M input tokens
    output: float = Field(0.0, ge=0)  # per 1M output tokens (reasoning tokens are output)
    # per 1M input tokens the provider served from its prompt cache; unset: the input price
    cached_input: float | None = Field(None, ge=0)
    audio_minute: float = Field(0.0, ge=0)  # per minute of audio transcribed


class PricingConfig(_Section):
    currency: str = "USD"
    models: dict[str, ModelPrice] = Field(default_factory=dict)


def _empty_or_url(value: str, schemes: tuple[str, ...], error: str) -> str:
    """`value` when it is empty or starts with one of `schemes`; otherwise ValueError(`error`)."""
    if value and not value.startswith(schemes):
        raise ValueError(error)
    return value


class StorageConfig(_Section):
    data_dir: Path = Field(default_factory=default_data_dir)
    database_url: str = ""
    replica_heartbeat: float = Field(2.0, gt=0, le=60)

    @field_validator("data_dir")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, v: str) -> str:
        error = "must be empty (SQLite in data_dir) or a postgresql:// URL"
        return _empty_or_url(v, ("postgresql://", "postgres://"), error)

    @field_validator("data_dir", mode="before")
    @classmethod
    def _a_path_is_text(cls, v: object) -> object:
        """`data_dir = 5` is a typo, not the folder "5"."""
        if not isinstance(v, str | Path) or not str(v).strip():
            raise ValueError("must be a folder path written as text")
        return v


class LongtermConfig(_Section):
    chroma_url: str = ""

    @field_validator("chroma_url")
    @classmethod
    def _chroma_url(cls, v: str) -> str:
        error = "must be empty (Chroma under data_dir) or an http(s):// URL"
        return _empty_or_url(v, ("http://", "https://"), error).rstrip("/")


class WebAppConfig(_Section):
    """The learner's page (a Telegram Mini App) served by `memora run` (bot/web)."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)  # 0: any free port (tests)
    public_url: str = ""  # the page's public HTTPS address, ending in /app/
    max_age: int = Field(86400, ge=60)  # seconds a signed opening of the page stays valid
    requests_per_minute: int = Field(60, ge=1)  # per learner

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, v: str) -> str:
        error = "must be empty or an http(s):// URL (Telegram needs https)"
        return _empty_or_url(v, ("http://", "https://"), error)


class LoggingConfig(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class Settings(BaseSettings):
    """All of Memora's settings."""

    model_config = SettingsConfigDict(
        env_prefix="MEMORA_",
        env_nested_delimiter="__",
        extra="forbid",
        case_sensitive=False,
    )

    telegram: TelegramConfig = TelegramConfig()
    llm: LLMConfig = LLMConfig()
    memory: MemoryConfig = MemoryConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    embeddings: EmbeddingsConfig = EmbeddingsConfig()
    extraction: ExtractionConfig = ExtractionConfig()
    voice: VoiceConfig = VoiceConfig()
    learner: LearnerConfig = LearnerConfig()
    tutor: TutorConfig = TutorConfig()
    limits: LimitsConfig = LimitsConfig()
    reminders: RemindersConfig = RemindersConfig()
    pricing: PricingConfig = PricingConfig()
    storage: StorageConfig = Field(default_factory=StorageConfig)  # data_dir: per user, now
    longterm: LongtermConfig = LongtermConfig()
    webapp: WebAppConfig = WebAppConfig()
    logging: LoggingConfig = LoggingConfig()

    @field_validator("llm")
    @classmethod
    def _llm_base_url(cls, v: LLMConfig) -> LLMConfig:
        if v.base_url == "":
            v.base_url = None
        return v

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # init_settings carries the merged TOML + usual names (see load_settings); MEMORA_* wins.
        return (env_settings, init_settings)

    @property
    def db_path(self) -> Path:
        return self.storage.data_dir / "memora.sqlite3"

    @property
    def chroma_path(self) -> Path:
        return self.storage.data_dir / "chroma"


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None


def _describe(err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "(root)"
    if first["type"] == "extra_forbidden":
        return f"unknown config key '{key}' (see config.example.toml)"
    got = first.get("input")
    shown = "" if isinstance(got, dict) or got is None else f" (got {got!r})"
    more = f" and {len(err.errors()) - 1} more" if len(err.errors()) > 1 else ""
    return f"invalid config value for '{key}': {first['msg']}{shown}{more}"


def _bad_env_value() -> str:
    """Name the MEMORA_* variable pydantic-settings could not decode (lists/sections are JSON)."""
    for name, value in os.environ.items():
        parts = name.lower().split("__")
        if not name.upper().startswith("MEMORA_") or len(parts) != 2:
            continue
        section, key = parts[0].removeprefix("memora_"), parts[1]
        model = Settings.model_fields.get(section)
        field = None
        if model is not None and isinstance(model.annotation, type):
            field = getattr(model.annotation, "model_fields", {}).get(key)
        if field is not None and "list" in str(field.annotation):
            try:
                json.loads(value)
            except ValueError:
                return (
                    f"invalid config value for '{section}.{key}' from {name}: "
                    f"expected a JSON list such as [123, 456] (got {value!r})"
                )
    return "invalid value in a MEMORA_* environment variable (lists must be JSON)"


def load_settings(config_path: str | Path | None = None) -> Settings:
    """Load settings in documented precedence; raise ConfigError with one clear line."""
    env = os.environ
    path_text = str(config_path) if config_path else env.get("MEMORA_CONFIG", "")
    data: dict[str, Any] = {}
    if path_text:
        data = _read_toml(Path(path_text).expanduser())
    elif Path("config.toml").is_file():
        data = _read_toml(Path("config.toml"))
    for name, (section, key) in USUAL_ENV.items():
        if env.get(name):
            data = _deep_merge(data, {section: {key: env[name]}})
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None
    except SettingsError:
        raise ConfigError(_bad_env_value()) from None


def require_llm(settings: Settings) -> None:
    """The model needs a key unless a self-hosted base_url is given."""
    if not settings.llm.api_key and settings.llm.base_url is None:
        raise ConfigError(
            "missing config key 'llm.api_key' (set OPENAI_API_KEY, MEMORA_LLM__API_KEY "
            "or [llm] api_key; or give llm.base_url for a local OpenAI-compatible server)"
        )


def require_telegram(settings: Settings) -> None:
    if not settings.telegram.token:
        raise ConfigError(
            "missing config key 'telegram.token' (set TELEGRAM_BOT_TOKEN, "
            "MEMORA_TELEGRAM__TOKEN or [telegram] token)"
        )
