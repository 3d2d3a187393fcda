"""Streamed replies under a class's burst: Bot API calls and 429s per reply, edits vs drafts.

Run from the repository root::

    .venv/bin/python -m benchmarks.streaming [--chats 40] [--words 60] [--word-delay 0.05]

The real `memora run` process streams its replies (`stream_replies = true`) to the fake Bot API
with Telegram's flood limits on (tests/support/fake_telegram.py, `limits=True`: ~30 messages a
second for the bot, one a second in a chat with a short burst; drafts are not messages and are
assumed to allow 4 a second in a chat, since Telegram documents no limit for them). N learners
ask at the same moment in their private chats; the model streams each answer word by word.
The same burst runs twice in one invocation: previews as an edited message (the old way,
`stream_drafts = false`) and as drafts (`stream_drafts = true`, the default).

Prints per way: Bot API calls per reply by method, 429 answers per reply, and the seconds from
the burst to the first visible text and to the final reply (median and p95 over the chats).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.bot import BotProcess
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram

METHODS = ("sendMessage", "editMessageText", "sendMessageDraft", "sendChatAction")


@dataclass
class Way:
    name: str
    calls: dict[str, float]  # per reply
    errors_429: float  # per reply
    first_text: list[float]
    final: list[float]


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def run_way(name: str, drafts: bool, chats: int, words: int, delay: float, tmp: Path) -> Way:
    answer = " ".join(f"word{n}" for n in range(words)) + "."
    with FakeTelegram(limits=True) as tg, FakeOpenAI() as llm:
        bot = BotProcess(tg, llm, tmp / name, tmp / f"{name}.log")
        bot.env["MEMORA_TELEGRAM__STREAM_REPLIES"] = "true"
        bot.env["MEMORA_TELEGRAM__STREAM_DRAFTS"] = "true" if drafts else "false"
        bot.env["MEMORA_LOGGING__LEVEL"] = "WARNING"
        bot.start()
        try:
            llm.responder = lambda req: answer if req.kind == "reply" else {}
            llm.stream_delay = delay
            users = list(range(5000, 5000 + chats))
            tg.wait_for(lambda: tg.calls_to("setMyCommands"), 60, "the command menu")
            before = {m: len(tg.calls_to(m)) for m in METHODS}
            errors_before = len(tg.errors)
            start = time.monotonic()
            for user in users:
                tg.user_sends(f"Explain something, please ({user})", user_id=user)
            first: dict[int, float] = {}
            final: dict[int, float] = {}
            deadline = start + 300
            while len(final) < chats and time.monotonic() < deadline:
                now = time.monotonic() - start
                for user in users:
                    if user not in first and (tg.draft(user) or tg.sent_messages(user)):
                        first[user] = now
                    if user not in final and answer in tg.texts(user):
                        final[user] = now
                time.sleep(0.02)
            calls = {m: (len(tg.calls_to(m)) - before[m]) / chats for m in METHODS}
            too_many = [e for e in tg.errors[errors_before:] if e[2] == 429]
        finally:
            bot.stop()
    if len(final) < chats:
        raise SystemExit(f"{name}: only {len(final)} of {chats} replies arrived")
    return Way(name, calls, len(too_many) / chats, list(first.values()), list(final.values()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chats", type=int, default=40)
    p.add_argument("--words", type=int, default=60)
    p.add_argument("--word-delay", type=float, default=0.05)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ways = [
            run_way(name, drafts, args.chats, args.words, args.word_delay, Path(tmp))
            for name, drafts in (("edits", False), ("drafts", True))
        ]
    print(
        f"{args.chats} private chats at once, {args.words} words streamed "
        f"{args.word_delay:.2f} s apart; Bot API calls and 429s per reply"
    )
    head = " ".join(f"{m:>17}" for m in METHODS)
    print(f"{'way':>7} {head} {'429s':>6} {'first text s':>14} {'final reply s':>15}")
    for w in ways:
        cells = " ".join(f"{w.calls[m]:>17.2f}" for m in METHODS)
        print(
            f"{w.name:>7} {cells} {w.errors_429:>6.2f} "
            f"{statistics.median(w.first_text):>6.1f} / {p95(w.first_text):<5.1f} "
            f"{statistics.median(w.final):>7.1f} / {p95(w.final):<5.1f}"
        )
    print("(first text and final reply: median / p95 seconds from the burst)")


if __name__ == "__main__":
    main()
