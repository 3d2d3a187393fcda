"""A forwarded message is someone else's words: the real `memora run` answers it, keeps it in
the history marked as forwarded, and never extracts the forwarder's memories from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bot import BotProcess, ask, bot_over_fakes
from tests.support.fake_openai import FakeRequest, default_responder

pytestmark = pytest.mark.slow

ZED = {
    "type": "user",
    "date": 1764540000,
    "sender_user": {"id": 777, "is_bot": False, "first_name": "Zed"},
}


def _extracting(req: FakeRequest) -> object:
    """An eager extractor: it would keep whatever a message says about a name."""
    if req.kind == "structured" and "My name is" in req.last_user_message:
        name = req.last_user_message.split("My name is ")[1].split(" ")[0]
        text = f"The user's name is {name}."
        return {"memories": [{"text": text, "category": "personal", "replaces": None}]}
    return default_responder(req)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[BotProcess]:
    with bot_over_fakes(tmp_path) as (_tg, llm, process):
        llm.responder = _extracting  # type: ignore[assignment]
        process.start()
        yield process
        assert process.stop() == 0, process.output()


def test_a_forwarded_message_is_answered_but_never_remembered(bot: BotProcess) -> None:
    tg, llm = bot.tg, bot.llm
    forwarded = "My name is Zed and my English level is C2."
    answer = ask(tg, forwarded, forward_origin=ZED)
    assert answer.startswith("Echo: [forwarded message") and answer.endswith(forwarded)
    own = "My name is Alice and I study every evening."
    assert ask(tg, own) == f"Echo: {own}"  # its after-reply work ran before this turn
    assert "The user's name is Alice." in ask(tg, "/memories")
    mined = [r for r in llm.requests_of("structured") if "Zed" in str(r.body)]
    assert mined == []  # no extraction call ever saw the forwarded text
    memories = ask(tg, "/memories")
    assert "Zed" not in memories and "C2" not in memories
    history = ask(tg, "/history")
    assert f"[forwarded message, not the learner's own words] {forwarded}" in history
