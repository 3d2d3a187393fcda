"""Voice turns: transcribe, then run the words as a typed message would run; and the reply read
aloud when spoken answers are on."""

from __future__ import annotations

import logging
from dataclasses import replace

from memora.engine.turn import Turns
from memora.errors import LLMError
from memora.i18n import _
from memora.types import ChatRef, UserRef
from memora.views import Reply
from memora.voice import FAILED, HEARD, NOTHING_HEARD, VOICE_OFF

log = logging.getLogger(__name__)


class VoiceTurns(Turns):
    """The turn of a voice message, and the spoken reply."""

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
        refused = None if unlimited else await self.over_limit(user)
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
        reply = await self.handle_turn(
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
