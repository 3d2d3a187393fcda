"""Voice notes and audio files: check the limits from the message, download into memory (never to
disk), let the core transcribe and answer, render; optionally answer aloud as a voice note."""

from __future__ import annotations

import logging
from datetime import timedelta

from telegram import Audio, Message, Update, Voice
from telegram.constants import ChatAction
from telegram.error import TelegramError

from memora.engine import Engine
from memora.engine.voice import VOICE_OFF, VoiceLimits
from memora.i18n import N_, _
from memora.storage.durable import VOICE, Kept
from memora.views import Reply

from ..bodies import Answer, voice_body
from ..context import Context
from ..messages import addressed_text, refs, typing
from ..outbox import Deliverer

log = logging.getLogger(__name__)

DOWNLOAD_FAILED = N_(
    "Sorry — I couldn't download that voice message from Telegram ({why}). Nothing was saved; "
    "please send it again."
)


def _seconds(media: Voice | Audio) -> int | None:
    d = media.duration
    if d is None:
        return None
    return int(d.total_seconds()) if isinstance(d, timedelta) else int(d)


def _filename(media: Voice | Audio) -> str:
    """The name the endpoint sees: it infers the format from the extension."""
    if isinstance(media, Audio) and media.file_name:
        return media.file_name
    subtype = (media.mime_type or "audio/ogg").split("/")[-1].split(";")[0]
    ext = {"mpeg": "mp3", "mp4": "m4a", "x-m4a": "m4a", "x-wav": "wav"}.get(subtype, subtype)
    return f"voice.{ext}"


async def _download(media: Voice | Audio) -> bytes:
    """The file's bytes, straight into memory."""
    file = await media.get_file()
    return bytes(await file.download_as_bytearray())


async def on_voice(update: Update, context: Context) -> None:
    """A voice note or an audio file → limits → in-memory download → transcribe → one turn."""
    message = update.message
    who = refs(message) if message else None
    if message is None or who is None:
        return
    media: Voice | Audio | None = message.voice or message.audio
    if media is None:
        return
    chat, user = who
    if chat.is_group and addressed_text(message, context.bot.username, context.bot.id) is None:
        return  # in a group, only a voice note that replies to the bot (or mentions it) is ours
    state = context.bot_data
    engine = state.need_engine()
    if not engine.voice.hears_voice:
        await state.notice(update, message, _(VOICE_OFF))
        return
    cfg = state.settings.voice
    limits = VoiceLimits(max_seconds=cfg.max_seconds, max_bytes=cfg.max_bytes)
    refusal = limits.refusal(_seconds(media), media.file_size)
    if refusal is not None:
        await state.notice(update, message, refusal)
        return
    async with typing(message):
        try:
            audio = await _download(media)
        except TelegramError as exc:
            log.warning("voice download failed in chat %s: %s", chat.id, exc)
            reply = Reply(_(DOWNLOAD_FAILED).format(why=exc.message), ok=False)
        else:
            reply = await engine.voice_turn(
                chat,
                user,
                audio,
                _filename(media),
                message_id=message.message_id,
                update_id=update.update_id,
                seconds=float(_seconds(media) or 0),
                unlimited=user.id in state.telegram.admin_ids,
            )
            del audio  # nothing of the recording outlives the turn
    answer = Answer(message, reply, markdown=reply.markdown, quote=chat.is_group)
    await state.answer(update, answer)
    if engine.voice.speaks and reply.stored:
        await _answer_aloud(engine, message, reply, state.need_deliverer(), group=chat.is_group)


async def _answer_aloud(
    engine: Engine, message: Message, reply: Reply, deliverer: Deliverer, *, group: bool
) -> None:
    """The written reply is kept already; the voice note follows it through the outbox (after it
    in the chat's order). A failed speech call costs only the voice note."""
    try:
        await message.get_bot().send_chat_action(message.chat_id, ChatAction.RECORD_VOICE)
    except TelegramError as exc:  # a courtesy
        log.debug("chat action failed in chat %s: %s", message.chat_id, exc)
    speech = await engine.voice.spoken(reply)
    if speech is None:
        return
    user = message.from_user.id if message.from_user else None
    row = Kept(voice_body(message, speech, quote=group), VOICE)
    await deliverer.keep(message.chat_id, user, [row])
