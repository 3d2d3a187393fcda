"""The LLM seam: one small protocol (`LLM`) and its AsyncOpenAI implementations, one class per API:
`ResponsesLLM` (OpenAI's Responses API) and `ChatCompletionsLLM` (the Chat Completions API every
OpenAI-compatible server understands), sharing `OpenAILLM`; `OpenAIAudio` hears and speaks."""

from memora.errors import LLMError
from memora.llm.audio import OpenAIAudio, Speaker, Transcriber, Transcript
from memora.llm.chat_completions import ChatCompletionsLLM
from memora.llm.identity import ProviderIdentity
from memora.llm.learned import Learned
from memora.llm.openai_base import Api, OpenAILLM
from memora.llm.protocol import (
    CONTEXT_EXCEEDED,
    LLM,
    REPLY,
    TIMED_OUT,
    CallInfo,
    CallKind,
    Completion,
    OnDelta,
    Parsed,
    Usage,
)
from memora.llm.responses import ResponsesLLM
from memora.llm.sdk_errors import guard, translated
from memora.llm.structured import (
    SCHEMA_INSTRUCTIONS,
    STRUCTURED_MODES,
    StructuredMode,
    loads_lenient,
    schema_sketch,
    validated,
)
from memora.types import ChatMessage, Role

__all__ = [
    "CONTEXT_EXCEEDED",
    "LLM",
    "REPLY",
    "SCHEMA_INSTRUCTIONS",
    "STRUCTURED_MODES",
    "TIMED_OUT",
    "Api",
    "CallInfo",
    "CallKind",
    "ChatCompletionsLLM",
    "ChatMessage",
    "Completion",
    "LLMError",
    "Learned",
    "OnDelta",
    "OpenAIAudio",
    "OpenAILLM",
    "Parsed",
    "ProviderIdentity",
    "ResponsesLLM",
    "Role",
    "Speaker",
    "StructuredMode",
    "Transcriber",
    "Transcript",
    "Usage",
    "guard",
    "loads_lenient",
    "schema_sketch",
    "translated",
    "validated",
]
