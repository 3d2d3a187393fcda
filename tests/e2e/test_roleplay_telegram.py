"""/roleplay end to end (issue 30): the real `memora run` process against the fake Telegram and
OpenAI servers. A scene started with /roleplay survives a kill -9: after the restart the
learner's next message is still answered inside the scene (its block is in the reply request).
A suggested scene starts with a tap on its button; a stale or forged tap is refused.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.bot import WAIT, ask, bot_over_fakes, keyboard

pytestmark = pytest.mark.slow


def test_a_scene_survives_a_kill(tmp_path: Path) -> None:
    with bot_over_fakes(tmp_path) as (tg, llm, bot):
        bot.start()
        try:
            opened = ask(tg, "/roleplay airport")
            assert "Airport check-in" in opened and "/roleplay end" in opened
            assert "check-in agent" in str(llm.requests_of("reply")[-1].body)
            time.sleep(1)
            assert bot.proc is not None
            bot.proc.kill()  # SIGKILL in the middle of the scene: no shutdown
            bot.proc.wait()
            bot.proc = None
            bot.start()
            before = len(llm.requests_of("reply"))
            assert ask(tg, "Here is my passport.")
            request = llm.requests_of("reply")[before:][-1]
            assert "check-in agent" in str(request.body) and "exchange 1" in str(request.body)
            assert "Role-play: Airport check-in" in ask(tg, "/status")
            ended = ask(tg, "/roleplay end")
            assert "Scene over" in ended
        finally:
            assert bot.stop() == 0, bot.output()


def test_a_suggested_scene_starts_with_a_tap(tmp_path: Path) -> None:
    with bot_over_fakes(tmp_path) as (tg, llm, bot):
        bot.start()
        try:
            assert "goal" in ask(tg, "/profile set goal pass a job interview next month")
            asked = tg.user_sends("/roleplay")
            (menu,) = tg.wait_messages(count=1, after=asked, timeout=WAIT)
            buttons = keyboard(menu)
            assert len(buttons) == 3 and "🎭 Job interview" in buttons, buttons
            calls = len(llm.requests_of("reply"))
            tg.user_taps(menu, buttons["🎭 Job interview"])
            opened = tg.wait_messages(count=2, after=asked, timeout=WAIT)  # the menu, the scene
            assert "Stay in the scene" in str(opened[-1].get("text")), opened
            assert [a["text"] for a in tg.callback_answers] == ["🎭 Job interview"]
            assert len(llm.requests_of("reply")) == calls + 1  # the opening line: one turn
            assert "interviewer" in str(llm.requests_of("reply")[-1].body)
            edited = tg.wait_for(
                lambda: [
                    m
                    for m in tg.sent_messages()
                    if m["message_id"] == menu["message_id"]
                    and not keyboard(m)
                    and "Job interview" in m["text"]
                ],
                WAIT,
                "the menu edited to the choice",
            )
            assert edited[0]["text"] == "🎭 Role-play: Job interview"
            assert "Role-play: Job interview" in ask(tg, "/status")

            tg.user_taps(menu, buttons["🎭 Job interview"])  # the old menu, mid-scene
            tg.wait_for(lambda: len(tg.callback_answers) >= 2, WAIT, "the stale tap's answer")
            stale = tg.callback_answers[-1]
            assert stale["show_alert"] and "A lesson is running here" in stale["text"], stale
            tg.user_taps(menu, "scene:space_station")  # forged
            tg.wait_for(lambda: len(tg.callback_answers) >= 3, WAIT, "the forged tap's answer")
            assert "isn't one I can use" in tg.callback_answers[-1]["text"]
            assert len(llm.requests_of("reply")) == calls + 1  # /status and taps cost no call
        finally:
            assert bot.stop() == 0, bot.output()
