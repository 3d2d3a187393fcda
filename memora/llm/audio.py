"""Hearing and speaking through any server with OpenAI's audio endpoints: a voice note is sent as it
arrived (Telegram's OGG/Opus, which the transcription endpoint accepts; no local decoding), and a
spoken answer comes back as Opus, ready to send as a voice note. The bytes live in memory only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from openai import AsyncOpenAI

from memora.llm.sdk_errors import guard


@dataclass(frozen=True)
class Transcript:
    """What was heard, with what the provider billed for it: tokens (gpt-4o-*-transcribe) or
    seconds of audio (whisper-style models); either may be zero."""

    text: str
    tokens: int = 0
    seconds: float = 0.0
    length: float = 0.0  # the recording's length in seconds, as the platform said (0: unknown)


class Transcriber(Protocol):
    """What the core needs to hear a learner."""

    async def transcribe(self, audio: bytes, filename: str) -> Transcript: ...


class Speaker(Protocol):
    """What the core needs to answer aloud (Opus bytes)."""

    async def speak(self, text: str) -> bytes: ...


class OpenAIAudio:
    """Transcription and speech through any server that speaks OpenAI's audio endpoints."""

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        transcription_model: str,
        speech_model: str = "",
        speech_voice: str = "alloy",
    ) -> None:
        self._client = client
        self.transcription_model = transcription_model
        self.speech_model = speech_model
        self.speech_voice = speech_voice

    async def transcribe(self, audio: bytes, filename: str) -> Transcript:
        resp: Any = await guard(
            self._client.audio.transcriptions.create(
                model=self.transcription_model, file=(filename, audio)
            ),
            "the transcription service",
        )
        usage = getattr(resp, "usage", None)
        tokens = int(getattr(usage, "total_tokens", 0) or 0)
        seconds = float(getattr(usage, "seconds", 0.0) or 0.0)
        return Transcript(text=str(resp.text or ""), tokens=tokens, seconds=seconds)

    async def speak(self, text: str) -> bytes:
        resp: Any = await guard(
            self._client.audio.speech.create(
                model=self.speech_model,
                voice=self.speech_voice,
                input=text,
                response_format="opus",
            ),
            "the speech service",
        )
        return bytes(resp.content)

    async def aclose(self) -> None:
        await self._client.close()
