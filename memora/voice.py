"""Voice messages: the learner speaks, the OpenAI-compatible audio endpoint writes it down, and
the words then go through an ordinary turn (history, memories, extraction).

Audio is sent exactly as it arrived: Telegram voice notes are OGG/Opus, which the transcription
endpoint accepts, so there is no local decoding stack. The bytes only ever live in memory; the
adapter checks the limits (duration, size) from the message's metadata before downloading.

An optional spoken answer uses `audio.speech.create` on the same client, in Opus, so the adapter
can send it as a voice note.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from memora.errors import LLMError
from memora.llm.audio import Speaker as Speaker  # re-exported until the engine owns the voice turn
from memora.llm.audio import Transcriber as Transcriber
from memora.llm.audio import Transcript as Transcript
from memora.views import Reply

if TYPE_CHECKING:
    from memora.engine import ChatRef, Engine, UserRef

log = logging.getLogger(__name__)

HEARD = "🎤 I heard: {text}"  # Reply.note: shown above the reply, never spoken
VOICE_OFF = "Voice messages are turned off on this bot — please type your message."
TOO_LONG = (
    "That voice message is too long for me ({seconds} s; the limit is {limit} s). "
    "Please send a shorter one, or type it. Nothing was saved."
)
TOO_BIG = (
    "That audio file is too large for me ({mb:.1f} MB; the limit is {limit:.1f} MB). "
    "Please send a shorter one. Nothing was saved."
)
FAILED = (
    "Sorry — I couldn't transcribe that voice message ({why}). Nothing was saved; "
    "please try again in a moment, or type it."
)
NOTHING_HEARD = (
    "I couldn't hear any words in that voice message. Nothing was saved — "
    "please try again closer to the microphone, or type it."
)


@dataclass(frozen=True)
class VoiceLimits:
    """Refused before downloading: Telegram tells both figures in the message itself."""

    max_seconds: int = 120
    max_bytes: int = 20_000_000  # the Bot API's own download limit

    def refusal(self, seconds: int | None, size: int | None) -> str | None:
        """Why this audio is refused, or None when it fits."""
        if seconds is not None and seconds > self.max_seconds:
            return TOO_LONG.format(seconds=seconds, limit=self.max_seconds)
        if size is not None and size > self.max_bytes:
            return TOO_BIG.format(mb=size / 1e6, limit=self.max_bytes / 1e6)
        return None


async def voice_turn(
    engine: Engine,
    chat: ChatRef,
    user: UserRef,
    audio: bytes,
    filename: str,
    *,
    message_id: int | None = None,
    update_id: int | None = None,
) -> Reply:
    """Transcribe, then run the words as a typed message would run; the reply's note says what
    was heard. A failed or empty transcription stores nothing."""
    if engine.transcriber is None:
        return Reply(VOICE_OFF, ok=False)
    try:
        heard = await engine.transcriber.transcribe(audio, filename)
    except LLMError as exc:
        log.warning("transcription failed for chat %s: %s", chat.id, exc)
        return Reply(FAILED.format(why=exc), ok=False)
    text = " ".join(heard.text.split())
    if not text:
        return Reply(NOTHING_HEARD, ok=False)
    reply = await engine.handle_turn(
        chat, user, text, message_id=message_id, update_id=update_id, transcript=heard
    )
    return replace(reply, note=HEARD.format(text=text))


async def spoken(engine: Engine, reply: Reply) -> bytes | None:
    """The reply read aloud (not its note, the "I heard" line), or None when speech is off or fails:
    the written reply has already gone out, so a failure here only costs the voice note."""
    if engine.speaker is None or not reply.ok:
        return None
    try:
        return await engine.speaker.speak(reply.text)
    except LLMError as exc:
        log.warning("speech failed: %s", exc)
        return None
