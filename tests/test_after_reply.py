"""After-reply work never delays the next reply (issue 7 item 3): extraction runs per user in
the background, one after another; only the fold of the window is waited for by the next turn;
the background calls get their own, shorter limits from the config."""

from __future__ import annotations

import asyncio
from typing import Any

from memora.app import _llm
from memora.config import LLMConfig, Settings
from memora.engine import ChatRef, Engine, UserRef
from memora.llm import ChatMessage, Parsed
from memora.longterm import MemoryStore
from memora.storage import Database
from memora.tokens import LocalTokenCounter
from tests.fakes import FakeLLM

ALICE = UserRef(1, "Alice")


class StuckExtractor(FakeLLM):
    """An extraction model that answers only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def parse(self, instructions: str, messages: list[ChatMessage], schema: Any) -> Parsed:
        await self.release.wait()
        return await super().parse(instructions, messages, schema)


async def test_a_stuck_extraction_never_delays_the_next_reply(
    db: Database, counter: LocalTokenCounter, store: MemoryStore
) -> None:
    extractor = StuckExtractor()
    engine = Engine(db=db, llm=FakeLLM(), counter=counter, store=store, extraction_llm=extractor)
    first = await engine.handle_turn(ChatRef(1), ALICE, "I am a nurse in Kaohsiung.")
    # The first extraction hangs; the same chat's next reply comes anyway (a hang guard only).
    second = await asyncio.wait_for(
        engine.handle_turn(ChatRef(1), ALICE, "What should I practise today?"), timeout=60
    )
    assert first.ok and second.ok and second.text == "Echo: What should I practise today?"
    assert not extractor.release.is_set()
    assert len([c for c in extractor.calls if c.kind == "parse"]) == 0  # still waiting
    extractor.release.set()
    await engine.drain()
    parses = [c for c in extractor.calls if c.kind == "parse"]
    assert len(parses) == 2  # both messages extracted, in order, one after the other
    assert "nurse" in str(parses[0].messages) and "practise" in str(parses[1].messages)


def test_background_calls_have_their_own_shorter_limits() -> None:
    settings = Settings(
        llm=LLMConfig(api_key="k", background_timeout=7.0, background_max_retries=0)
    )
    main, background = _llm(settings, "m"), _llm(settings, "m", background=True)
    assert (main._client.timeout, main._client.max_retries) == (60.0, 2)
    assert (background._client.timeout, background._client.max_retries) == (7.0, 0)
