"""/roleplay end to end (issue 30): the real `memora run` process against the fake Telegram and
OpenAI servers. A scene started with /roleplay survives a kill -9: after the restart the
learner's next message is still answered inside the scene (its block is in the reply request).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fake_openai import FakeOpenAI
from tests.fake_telegram import FakeTelegram
from tests.test_e2e_telegram import BotProcess, ask

pytestmark = pytest.mark.slow


def test_a_scene_survives_a_kill(tmp_path: Path) -> None:
    with FakeTelegram() as tg, FakeOpenAI() as llm:
        bot = BotProcess(tg, llm, tmp_path / "data", tmp_path / "bot.log")
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
            assert "role-play: Airport check-in" in ask(tg, "/status")
            ended = ask(tg, "/roleplay end")
            assert "Scene over" in ended
        finally:
            assert bot.stop() == 0, bot.output()
