"""Voice messages: the real openai SDK uploads a real Ogg/Opus voice note (tests/data) to the fake
OpenAI server's multipart transcription endpoint; the real Application downloads it from the fake
Bot API (getFile + file URL) for real PTB Voice/Audio objects; the words then run a normal turn."""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI
from telegram import Audio, Chat, Message, Update, User, Voice

import bot.telegram.handlers.voice as tg_voice
from bot.telegram import build_application
from memora.commands import CommandContext, run_command
from memora.config import Settings, TelegramConfig, VoiceConfig
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.engine.voice import (
    FAILED,
    HEARD,
    NOTHING_HEARD,
    VOICE_OFF,
    VoiceLimits,
)
from memora.llm import OpenAIAudio, Transcript
from memora.storage import Database
from tests.support.fake_openai import VOICE_FIXTURE, FakeOpenAI, FakeReply, ogg_opus_seconds
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import FakeLLM, outage

OGG = VOICE_FIXTURE.read_bytes()
SAID = "I went to the park yesterday"
ALICE = FakeTelegram.DEFAULT_USER_ID
CHAT = ChatRef(ALICE, "private", "Alice")
USER = UserRef(ALICE, "Alice")


def audio_client(server: FakeOpenAI, model: str = "gpt-4o-mini-transcribe") -> OpenAIAudio:
    client = AsyncOpenAI(api_key="sk-fake", base_url=server.base_url, max_retries=0)
    return OpenAIAudio(client, transcription_model=model, speech_model="gpt-4o-mini-tts")


@pytest.fixture
def voice_engine(
    db: Database, llm: FakeLLM, fake: FakeOpenAI, make_engine: Callable[..., Engine]
) -> Engine:
    audio = audio_client(fake)
    config = EngineConfig(max_input_tokens=2000)
    return make_engine(db=db, llm=llm, config=config, transcriber=audio, speaker=audio)


# -- the fixture is real audio ----------------------------------------------------------------
def test_the_fixture_is_a_real_ogg_opus_voice_note() -> None:
    assert OGG[:4] == b"OggS" and b"OpusHead" in OGG[:64]
    assert 2.0 < ogg_opus_seconds(OGG) < 2.3  # opusinfo says 2.148 s
    with pytest.raises(ValueError):
        ogg_opus_seconds(b"OggS\x00fake-opus")


# -- the client: multipart upload through the real SDK ------------------------------------------
async def test_transcription_uploads_the_ogg_as_is_and_reads_token_usage(
    fake: FakeOpenAI,
) -> None:
    fake.queue_reply(SAID, kind="transcribe")
    audio = audio_client(fake)
    heard = await audio.transcribe(OGG, "voice.ogg")
    await audio.aclose()
    (req,) = fake.requests_of("transcribe")
    assert req.path == "/v1/audio/transcriptions"
    assert req.audio == OGG and req.filename == "voice.ogg"  # the bytes exactly, not re-encoded
    assert req.body["model"] == "gpt-4o-mini-transcribe"
    assert heard.text == SAID
    assert heard.tokens == round(ogg_opus_seconds(OGG) * 10) + len(SAID) // 4 + 1
    assert heard.seconds == 0.0


async def test_duration_billed_models_report_seconds(fake: FakeOpenAI) -> None:
    audio = audio_client(fake, model="whisper-1")
    heard = await audio.transcribe(OGG, "voice.ogg")
    await audio.aclose()
    assert heard.seconds == 3.0 and heard.tokens == 0  # 2.15 s, billed per started second
    assert heard.text == "(fake transcript of 2.1 s of audio)"


async def test_speech_comes_back_as_opus_bytes(fake: FakeOpenAI) -> None:
    audio = audio_client(fake)
    spoken = await audio.speak("Well done!")
    await audio.aclose()
    assert spoken[:4] == b"OggS"
    (req,) = fake.requests_of("speech")
    assert req.body["response_format"] == "opus" and req.body["input"] == "Well done!"


# -- the core turn ------------------------------------------------------------------------------
async def test_a_voice_turn_runs_like_a_typed_message(
    voice_engine: Engine, fake: FakeOpenAI, llm: FakeLLM
) -> None:
    fake.queue_reply(f"  {SAID} ", kind="transcribe")
    llm.replies.append("Nice! Which park did you go to?")
    reply = await voice_engine.voice_turn(CHAT, USER, OGG, "voice.ogg", message_id=7)
    assert reply.ok and reply.stored
    assert reply.text == "Nice! Which park did you go to?" and reply.markdown
    assert reply.note == HEARD.format(text=SAID) == f"🎤 I heard: {SAID}"
    assert llm.calls[-1].messages[-1].content == SAID  # the model sees the words, no prefix
    await voice_engine.drain()
    stored = [(m.role, m.content) for m in await voice_engine.db.chats.messages(CHAT.id)]
    assert stored == [("user", SAID), ("assistant", "Nice! Which park did you go to?")]
    usage = await voice_engine.db.turns.last_usage(CHAT.id)
    assert usage.transcription_tokens > 0
    status = await run_command(voice_engine, "status", CommandContext(CHAT, USER, ""))
    assert f"{usage.transcription_tokens} tokens, 0 s" in status.text
    total = await voice_engine.db.turns.total_usage(CHAT.id)
    assert total.total >= usage.transcription_tokens + usage.output_tokens


@pytest.mark.parametrize("said", ["", "   \n  "])
async def test_an_empty_transcript_stores_nothing(
    voice_engine: Engine, fake: FakeOpenAI, llm: FakeLLM, said: str
) -> None:
    fake.queue_reply(FakeReply(text=said), kind="transcribe")
    reply = await voice_engine.voice_turn(CHAT, USER, OGG, "voice.ogg")
    assert reply == type(reply)(NOTHING_HEARD, ok=False)
    assert llm.calls == [] and await voice_engine.db.chats.messages(CHAT.id) == []


async def test_a_transcription_failure_gets_a_clear_answer_and_stores_nothing(
    voice_engine: Engine, fake: FakeOpenAI, llm: FakeLLM
) -> None:
    fake.fail_next(1, 503, kind="transcribe")
    reply = await voice_engine.voice_turn(CHAT, USER, OGG, "voice.ogg")
    assert not reply.ok
    assert reply.text == FAILED.format(why="the transcription service answered HTTP 503")
    # A file that is not what its name says is refused by the server, like OpenAI does.
    broken = await voice_engine.voice_turn(CHAT, USER, b"OggS\x00fake-opus", "voice.ogg")
    assert not broken.ok and "HTTP 400" in broken.text
    assert llm.calls == [] and await voice_engine.db.chats.messages(CHAT.id) == []


async def test_a_model_failure_after_hearing_says_what_was_heard(
    voice_engine: Engine, fake: FakeOpenAI, llm: FakeLLM
) -> None:
    fake.queue_reply(SAID, kind="transcribe")
    llm.replies.append(outage())
    reply = await voice_engine.voice_turn(CHAT, USER, OGG, "voice.ogg")
    assert not reply.ok and reply.note == HEARD.format(text=SAID)
    assert reply.plain.startswith(HEARD.format(text=SAID) + "\n\nSorry")
    assert await voice_engine.db.chats.messages(CHAT.id) == []


async def test_voice_off_answers_without_calling_anything(engine: Engine, llm: FakeLLM) -> None:
    reply = await engine.voice_turn(CHAT, USER, OGG, "voice.ogg")
    assert reply.text == VOICE_OFF and not reply.ok and llm.calls == []


def test_limits_are_refused_with_the_figures() -> None:
    limits = VoiceLimits(max_seconds=60, max_bytes=1_000_000)
    assert limits.refusal(60, 1_000_000) is None
    assert limits.refusal(None, None) is None
    too_long = limits.refusal(61, 10)
    assert too_long is not None and "61 s" in too_long and "60 s" in too_long
    too_big = limits.refusal(5, 2_500_000)
    assert too_big is not None and "2.5 MB" in too_big and "1.0 MB" in too_big


def test_a_transcript_defaults_to_no_usage() -> None:
    assert Transcript("hi") == Transcript("hi", 0, 0.0)


# -- the Telegram handler: real PTB Voice / Audio objects, real Bot over HTTP ------------------
class VoiceHarness:
    """The real Application over the fake Bot API; updates built from PTB's own classes."""

    def __init__(self, app: Any, tg: FakeTelegram) -> None:
        self.app, self.tg = app, tg
        self.next_id = 0

    def _message(self, group: bool = False, to_bot: bool = False, **media: Any) -> Message:
        """A message from Alice; in a group, `to_bot` makes it a reply to one of the bot's."""
        self.next_id += 1
        user = User(ALICE, "Alice", is_bot=False)
        chat = (
            Chat(-100777, Chat.SUPERGROUP, title="Study group")
            if group
            else Chat(ALICE, Chat.PRIVATE, first_name="Alice")
        )
        now = dt.datetime.now(dt.UTC)
        earlier = None
        if to_bot:
            me = User(self.app.bot.id, "Memora", is_bot=True, username=self.app.bot.username)
            earlier = Message(1, now, chat, from_user=me, text="Tell me about your weekend.")
        message = Message(
            self.next_id, now, chat, from_user=user, reply_to_message=earlier, **media
        )
        message.set_bot(self.app.bot)
        for item in media.values():
            item.set_bot(self.app.bot)
        return message

    def voice(
        self, content: bytes = OGG, seconds: int = 2, size: int | None = None, **where: Any
    ) -> Message:
        entry = self.tg.add_user_file(content, None, "audio/ogg")
        voice = Voice(
            entry["file_id"],
            entry["file_unique_id"],
            duration=dt.timedelta(seconds=seconds),
            mime_type="audio/ogg",
            file_size=entry["file_size"] if size is None else size,
        )
        return self._message(voice=voice, **where)

    def audio(self, content: bytes, filename: str, seconds: int = 2) -> Message:
        entry = self.tg.add_user_file(content, filename, "audio/ogg")
        audio = Audio(
            entry["file_id"],
            entry["file_unique_id"],
            duration=dt.timedelta(seconds=seconds),
            file_name=filename,
            mime_type="audio/ogg",
            file_size=entry["file_size"],
        )
        return self._message(audio=audio)

    async def push(self, message: Message) -> list[str]:
        before = len(self.tg.sent_messages())
        self.next_id += 1
        await self.app.process_update(Update(self.next_id, message=message))
        return [str(m.get("text", "")) for m in self.tg.sent_messages()[before:]]


@pytest.fixture
async def harness(
    tg: FakeTelegram, voice_engine: Engine, tmp_path: Path
) -> AsyncIterator[VoiceHarness]:
    voice_engine.voice.speaker = None
    settings = Settings(
        telegram=TelegramConfig(
            token=tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url
        ),
        voice=VoiceConfig(max_seconds=60, max_bytes=100_000),
    )
    app = build_application(settings, voice_engine)
    await app.initialize()
    assert app.post_init is not None and app.post_shutdown is not None
    await app.post_init(app)  # opens the inbox and the outbox on the engine's store
    yield VoiceHarness(app, tg)
    await app.shutdown()
    await app.post_shutdown(app)


async def test_a_voice_note_is_downloaded_heard_and_answered(
    harness: VoiceHarness, fake: FakeOpenAI, llm: FakeLLM, voice_engine: Engine
) -> None:
    fake.queue_reply(SAID, kind="transcribe")
    llm.replies.append("Great — tell me more about the park.")
    texts = await harness.push(harness.voice())
    assert texts == [f"🎤 I heard: {SAID}\n\nGreat — tell me more about the park."]
    assert len(harness.tg.calls_to("getFile")) == 1
    (req,) = fake.requests_of("transcribe")
    assert req.audio == OGG and req.filename == "voice.ogg"
    assert "typing" in [a for _, a in harness.tg.chat_actions]
    await voice_engine.drain()
    stored = await voice_engine.db.chats.messages(ALICE)
    assert stored[0].content == SAID


async def test_an_audio_file_keeps_its_name_for_the_endpoint(
    harness: VoiceHarness, fake: FakeOpenAI
) -> None:
    fake.queue_reply(SAID, kind="transcribe")
    texts = await harness.push(harness.audio(OGG, "lesson 3.oga"))
    assert texts[0].startswith(f"🎤 I heard: {SAID}")
    assert fake.requests_of("transcribe")[0].filename == "lesson 3.oga"


async def test_over_the_limits_is_refused_before_downloading(
    harness: VoiceHarness, fake: FakeOpenAI, voice_engine: Engine
) -> None:
    long_one = await harness.push(harness.voice(seconds=61))
    big_one = await harness.push(harness.voice(size=150_000))
    assert "61 s" in long_one[0] and "60 s" in long_one[0]
    assert "0.1 MB" in big_one[0]  # 150 kB against 100 kB, in MB with one decimal
    assert harness.tg.calls_to("getFile") == []  # nothing was downloaded
    assert fake.requests_of("transcribe") == []
    assert await voice_engine.db.chats.messages(ALICE) == []


async def test_a_failed_download_is_a_clear_answer(
    harness: VoiceHarness, fake: FakeOpenAI
) -> None:
    harness.tg.fail_next("getFile", status=400)
    texts = await harness.push(harness.voice())
    assert texts == [tg_voice.DOWNLOAD_FAILED.format(why="Error 400")]
    assert fake.requests_of("transcribe") == []


async def test_the_recording_never_reaches_the_disk(
    harness: VoiceHarness, fake: FakeOpenAI, tmp_path: Path, voice_engine: Engine
) -> None:
    fake.queue_reply(SAID, kind="transcribe")
    started = time.time()
    await harness.push(harness.voice())
    await voice_engine.drain()
    # PTB's download_to_drive() would write into the working directory; a temp file would land
    # in the temp dir; the data dir is where everything else of the bot lives.
    assert _recordings_written_since(started, tmp_path) == []


def _recordings_written_since(started: float, data_dir: Path) -> list[Path]:
    places = [*data_dir.rglob("*"), *Path.cwd().iterdir(), *Path(tempfile.gettempdir()).iterdir()]
    written = [p for p in places if p.is_file() and p.stat().st_mtime >= started]
    return [p for p in written if b"OpusHead" in p.read_bytes()]


async def test_a_spoken_answer_goes_out_as_a_voice_note(
    harness: VoiceHarness, fake: FakeOpenAI, llm: FakeLLM, voice_engine: Engine
) -> None:
    voice_engine.voice.speaker = voice_engine.voice.transcriber  # type: ignore[assignment]
    fake.queue_reply(SAID, kind="transcribe")
    llm.replies.append("Lovely. What did you see there?")
    # Flood control beyond the rate limiter's retries: kept in the outbox, sent by its sender.
    harness.tg.fail_next("sendVoice", 5, retry_after=1)
    await harness.push(harness.voice())
    (voice,) = await harness.tg.await_for(lambda: harness.tg.voices(ALICE), 30, "the voice note")
    assert [s for m, _, s, _ in harness.tg.errors if m == "sendVoice"] == [429] * 5
    assert voice["content"][:4] == b"OggS"
    (req,) = fake.requests_of("speech")
    assert req.body["input"] == "Lovely. What did you see there?"  # not the "I heard" line
    # "recording…" is a courtesy that the ReplyFirstRateLimiter skips when the reply just spent
    # the budget (bot/telegram/limits.py), so it may or may not reach the wire; nothing else may.
    assert {a for _, a in harness.tg.chat_actions} <= {"typing", "record_voice"}


async def test_in_a_group_only_a_voice_note_that_replies_to_me_is_heard(
    harness: VoiceHarness, fake: FakeOpenAI, voice_engine: Engine
) -> None:
    assert await harness.push(harness.voice(group=True)) == []  # people talking to each other
    assert fake.requests_of("transcribe") == [] and harness.tg.calls_to("getFile") == []
    fake.queue_reply(SAID, kind="transcribe")
    texts = await harness.push(harness.voice(group=True, to_bot=True))
    assert texts[0].startswith(f"🎤 I heard: {SAID}")
    await voice_engine.drain()
    stored = await voice_engine.db.chats.messages(-100777)
    assert stored[0].content == SAID and stored[0].user_id == ALICE
