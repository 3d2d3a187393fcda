"""Voice messages: what the learner is told about them, the limits checked before downloading, and
the voice turn. The learner speaks, the OpenAI-compatible audio endpoint writes it down
(memora.llm.audio), and the words then go through an ordinary turn (`Voice.voice_turn`, below).

Audio is sent exactly as it arrived: Telegram voice notes are OGG/Opus, which the transcription
endpoint accepts, so there is no local decoding stack. The bytes only ever live in memory; the
adapter checks the limits (duration, size) from the message's metadata before downloading.

An optional spoken answer uses `audio.speech.create` on the same client, in Opus, so the adapter
can send it as a voice note.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from memora.engine.people import People
from memora.engine.turn import Turns
from memora.errors import LLMError
from memora.i18n import N_, _
from memora.llm.audio import Speaker, Transcriber
from memora.types import ChatRef, UserRef
from memora.views import Reply

log = logging.getLogger(__name__)

HEARD = N_("🎤 I heard: {text}")  # Reply.note: shown above the reply, never spoken
VOICE_OFF = N_("Voice messages are turned off on this bot — please type your message.")
TOO_LONG = N_(
    "That voice message is too long for me ({seconds} s; the limit is {limit} s). "
    "Please send a shorter one, or type it. Nothing was saved."
)
TOO_BIG = N_(
    "That audio file is too large for me ({mb:.1f} MB; the limit is {limit:.1f} MB). "
    "Please send a shorter one. Nothing was saved."
)
FAILED = N_(
    "Sorry — I couldn't transcribe that voice message ({why}). Nothing was saved; "
    "please try again in a moment, or type it."
)
NOTHING_HEARD = N_(
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
            return _(TOO_LONG).format(seconds=seconds, limit=self.max_seconds)
        if size is not None and size > self.max_bytes:
            return _(TOO_BIG).format(mb=size / 1e6, limit=self.max_bytes / 1e6)
        return None


@dataclass(eq=False)
class Voice:
    """The turn of a voice message, and the spoken reply."""

    transcriber: Transcriber | None  # voice messages (None: turned off)
    speaker: Speaker | None  # spoken answers (None: turned off, the default)
    people: People
    turns: Turns

    @property
    def hears_voice(self) -> bool:
        """Whether voice messages are transcribed (a transcriber is configured)."""
        return self.transcriber is not None

    @property
    def speaks(self) -> bool:
        """Whether replies to voice messages are also sent aloud."""
        return self.speaker is not None

    async def voice_turn(
        self,
        chat: ChatRef,
        user: UserRef,
        audio: bytes,
        filename: str,
        *,
        message_id: int | None = None,
        update_id: int | None = None,
        seconds: float = 0.0,
        unlimited: bool = False,
    ) -> Reply:
        """Transcribe, then run the words as a typed message would run; the reply's note says what
        was heard. A failed or empty transcription stores nothing. `seconds` is the recording's
        length as the platform said (counted against the learner's voice limits); a learner over
        a usage limit is told so before the transcription call (`unlimited`: an admin)."""
        if self.transcriber is None:
            return Reply(_(VOICE_OFF), ok=False)
        refused = None if unlimited else await self.people.over_limit(user)
        if refused is not None:
            return Reply(refused, ok=False)
        try:
            heard = await self.transcriber.transcribe(audio, filename)
        except LLMError as exc:
            log.warning("transcription failed for chat %s: %s", chat.id, exc)
            return Reply(_(FAILED).format(why=exc), ok=False)
        text = " ".join(heard.text.split())
        if not text:
            return Reply(_(NOTHING_HEARD), ok=False)
        reply = await self.turns.handle_turn(
            chat,
            user,
            text,
            message_id=message_id,
            update_id=update_id,
            transcript=replace(heard, length=seconds),
            unlimited=unlimited,
        )
        return replace(reply, note=_(HEARD).format(text=text))

    async def spoken(self, reply: Reply) -> bytes | None:
        """The reply read aloud (not its note, the "I heard" line), or None when speech is off or
        fails: the written reply has already gone out, so a failure here only costs the voice
        note."""
        if self.speaker is None or not reply.ok:
            return None
        try:
            return await self.speaker.speak(reply.text)
        except LLMError as exc:
            log.warning("speech failed: %s", exc)
            return None
