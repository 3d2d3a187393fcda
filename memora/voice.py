"""Voice messages: what the learner is told about them and the limits checked before downloading.
The learner speaks, the OpenAI-compatible audio endpoint writes it down (memora.llm.audio), and
the words then go through an ordinary turn (`Engine.voice_turn`).

Audio is sent exactly as it arrived: Telegram voice notes are OGG/Opus, which the transcription
endpoint accepts, so there is no local decoding stack. The bytes only ever live in memory; the
adapter checks the limits (duration, size) from the message's metadata before downloading.

An optional spoken answer uses `audio.speech.create` on the same client, in Opus, so the adapter
can send it as a voice note.
"""

from __future__ import annotations

from dataclasses import dataclass

from memora.i18n import N_, _

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
