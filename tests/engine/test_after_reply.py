"""After-reply work never delays the next reply (issue 7 item 3): extraction runs per user in
the background, one after another; only the fold of the window is waited for by the next turn;
the background calls get their own, shorter limits from the config."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from memora.app import model_client
from memora.blocking import BACKGROUND_THREAD, background, in_background, run_blocking
from memora.config import LLMConfig, Settings
from memora.engine import ChatRef, Engine, UserRef
from memora.llm import ChatMessage, Parsed
from memora.longterm import MemoryStore, NewMemory
from memora.longterm.embeddings import Embedded, Kind, LocalUSE
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fakes import FakeLLM

ALICE = UserRef(1, "Alice")


class StuckExtractor(FakeLLM):
    """An extraction model that answers only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def parse(
        self, instructions: str, messages: list[ChatMessage], schema: Any, **kw: Any
    ) -> Parsed:
        await self.release.wait()
        return await super().parse(instructions, messages, schema, **kw)


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
    main, background = model_client(settings, "m"), model_client(settings, "m", background=True)
    assert (main._client.timeout, main._client.max_retries) == (60.0, 2)
    assert (background._client.timeout, background._client.max_retries) == (7.0, 0)


class FactExtractor(FakeLLM):
    """An extraction model that keeps each learner message as one memory."""

    async def parse(
        self, instructions: str, messages: list[ChatMessage], schema: Any, **kw: Any
    ) -> Parsed:
        said = next(m.content for m in messages if "nurse" in m.content)
        line = next(ln for ln in said.splitlines() if "nurse" in ln and "Echo" not in ln)
        self.parsed.append({"memories": [{"text": line, "category": "personal"}]})
        return await super().parse(instructions, messages, schema)


class GatedEmbedder:
    """The real local model; embedding a memory to store it (a passage, which only extraction
    does here) waits in its worker thread until the test opens the gate."""

    def __init__(self, model: LocalUSE) -> None:
        self.model, self.name, self.dim = model, model.name, model.dim
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = self.most_waiting = 0
        self.threads: set[str] = set()  # where gated calls ran
        self.stuck = asyncio.Event()  # a call waits at the closed gate
        self._lock = threading.Lock()

    async def embed(self, texts: list[str], kind: Kind = "passage") -> Embedded:
        if kind != "passage":
            return await self.model.embed(texts, kind)
        loop = asyncio.get_running_loop()
        return Embedded(await run_blocking(self._gated, texts, loop))

    def _gated(self, texts: list[str], loop: asyncio.AbstractEventLoop) -> Any:
        if self.gate.is_set():
            return self.model._encode(texts)
        with self._lock:
            self.waiting += 1
            self.most_waiting = max(self.most_waiting, self.waiting)
            self.threads.add(threading.current_thread().name)
        loop.call_soon_threadsafe(self.stuck.set)
        try:
            self.gate.wait(60)
            return self.model._encode(texts)
        finally:
            with self._lock:
                self.waiting -= 1


async def test_after_reply_work_never_takes_the_threads_a_reply_needs(
    db: Database, counter: LocalTokenCounter, tmp_path: Any, embedder: LocalUSE
) -> None:
    """A burst leaves many extractions storing memories at once; they run one at a time on the
    background lane, so the next reply's memory search (a blocking embedding) still gets a
    thread while they are all stuck (before: they filled asyncio's default pool)."""
    gated = GatedEmbedder(embedder)
    store = await MemoryStore.create(tmp_path / "chroma", gated)
    extractor = FactExtractor()
    engine = Engine(db=db, llm=FakeLLM(), counter=counter, store=store, extraction_llm=extractor)
    try:
        await store.writer.add(ALICE.id, NewMemory("Alice is a nurse in Kaohsiung.", "manual"))
        gated.gate.clear()
        others = [UserRef(100 + i, f"U{i}") for i in range(12)]  # more than the default pool
        for user in others:
            await engine.handle_turn(ChatRef(user.id), user, f"{user.name} is a nurse in Tainan.")
        await asyncio.wait_for(gated.stuck.wait(), 60)
        await asyncio.sleep(0.2)  # the other extractions get as far as they can
        # a hang guard only: the reply needs the thread pool for its search's embedding
        reply = await asyncio.wait_for(
            engine.handle_turn(ChatRef(ALICE.id), ALICE, "Where do I work as a nurse?"), 60
        )
        assert reply.ok and reply.stats is not None and reply.stats.usage.memories_used == 1
        assert gated.waiting == 1  # the background lane: one call at a time
        gated.gate.set()
        await engine.drain()
        assert gated.most_waiting == 1
        assert all(t.startswith(BACKGROUND_THREAD) for t in gated.threads)
        for user in others:  # nothing lost: every extraction stored its memory
            stored = [m.text for m in await store.memories(user.id)]
            assert stored == [f"{user.name} is a nurse in Tainan."]
    finally:
        gated.gate.set()
        await engine.drain()
        await store.close()


async def test_the_background_lane_is_one_thread_and_replies_keep_the_pool() -> None:
    def where() -> str:
        return threading.current_thread().name

    assert not in_background()
    with background():
        assert in_background()
        lanes = await asyncio.gather(*(run_blocking(where) for _ in range(4)))
        inner = await asyncio.create_task(run_blocking(where))  # tasks started inside inherit it
    assert set(lanes) == {inner} and inner.startswith(BACKGROUND_THREAD)
    assert not in_background()
    assert not (await run_blocking(where)).startswith(BACKGROUND_THREAD)
