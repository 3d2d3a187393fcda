"""What a voice note costs beyond the models: download, upload, transcription round trip.

Run from the repository root::

    .venv/bin/python benchmarks/voice_overhead.py [--runs 30] [--reply-latency 0.2]
                                                  [--transcribe-latency 0.2]

Prints figures, passes or fails nothing. The real python-telegram-bot Application built by
``bot.telegram.build_application`` long-polls the fake Bot API (tests/fake_telegram.py); the real
engine over real SQLite answers with the real openai SDK against the fake OpenAI server
(tests/fake_openai.py), whose reply "model" takes --reply-latency seconds and whose transcription
"model" takes --transcribe-latency seconds. Each run sends the same words twice, alternating:
typed, then as the real 2-second Ogg/Opus voice note in tests/data. The overhead of one pair is

    voice reply time − typed reply time − transcribe latency

i.e. everything the voice path adds that is not the transcription model itself: getFile, the
download into memory, the multipart upload, parsing the answer, the extra reply text. Median and
p95 over the runs; the typed and voice medians are printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openai import AsyncOpenAI

from bot.telegram import build_application
from memora.config import Settings, TelegramConfig
from memora.engine import Engine, EngineConfig
from memora.llm import OpenAIAudio, ResponsesLLM
from memora.storage import Database
from memora.tokens import LocalTokenCounter
from tests.fake_openai import VOICE_FIXTURE, FakeOpenAI
from tests.fake_telegram import FakeTelegram

SAID = "I went to the park yesterday"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def timed_reply(tg: FakeTelegram, send: Callable[[], dict[str, Any]]) -> float:
    """Seconds from the user's message reaching Telegram to the bot's first answer."""
    start = time.perf_counter()
    update = send()
    chat, after = update["message"]["chat"]["id"], update["message"]["message_id"]
    await tg.await_for(
        lambda: [m for m in tg.sent_messages(chat) if m["message_id"] > after], 30, "the reply"
    )
    return time.perf_counter() - start


async def run(runs: int, reply_latency: float, transcribe_latency: float, tmp: Path) -> None:
    ogg = VOICE_FIXTURE.read_bytes()
    with FakeTelegram() as tg, FakeOpenAI() as oa:
        oa.kind_latency = {"reply": reply_latency, "transcribe": transcribe_latency}
        oa.transcriber = lambda req: SAID
        db = Database(tmp / "bench.sqlite3")
        await db.open()
        llm = ResponsesLLM(model="gpt-fake", api_key="sk-fake", base_url=oa.base_url, max_retries=0)
        audio = OpenAIAudio(
            AsyncOpenAI(api_key="sk-fake", base_url=oa.base_url, max_retries=0),
            transcription_model="gpt-4o-mini-transcribe",
        )
        engine = Engine(
            db=db,
            llm=llm,
            counter=LocalTokenCounter(),
            config=EngineConfig(max_input_tokens=100_000, max_recent_turns=1000),
            transcriber=audio,
        )
        settings = Settings(
            telegram=TelegramConfig(
                token=tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url
            )
        )
        app = build_application(settings, engine)
        typed: list[float] = []
        spoken: list[float] = []
        async with app:
            await app.post_init(app)  # opens the inbox and the outbox on the engine's store
            await app.start()
            assert app.updater is not None
            await app.updater.start_polling(timeout=1, poll_interval=0)
            await tg.await_calls("getMe")
            for i in range(runs + 2):  # two warm-up pairs, not counted
                t = await timed_reply(tg, lambda: tg.user_sends(SAID))
                v = await timed_reply(tg, lambda: tg.user_sends_voice(content=ogg, duration=2))
                if i >= 2:
                    typed.append(t)
                    spoken.append(v)
            await app.updater.stop()
            await app.stop()
            await app.post_shutdown(app)
        await engine.drain()
        await llm.aclose()
        await audio.aclose()
        await db.close()
    heard = [t for t in tg.texts() if t.startswith("🎤")]
    assert len(heard) == runs + 2, "every voice note must have been heard"
    overhead = [v - t - transcribe_latency for t, v in zip(typed, spoken, strict=True)]
    print(
        f"{runs} pairs; reply model {reply_latency:.2f} s, transcription model "
        f"{transcribe_latency:.2f} s; voice note {len(ogg)} bytes Ogg/Opus, 2.1 s"
    )
    for label, values in (("typed reply", typed), ("voice reply", spoken), ("overhead", overhead)):
        print(f"{label:12} median {ms(statistics.median(values))} ms  p95 {ms(p95(values))} ms")
    print("overhead = voice − typed − transcription model time: what voice adds beyond the model")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--reply-latency", type=float, default=0.2)
    p.add_argument("--transcribe-latency", type=float, default=0.2)
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args.runs, args.reply_latency, args.transcribe_latency, Path(tmp)))


if __name__ == "__main__":
    main()
