"""Every tuned number belongs to its embedder (memora.longterm.calibration): the local model reads
its calibrated profile; an embeddings API nobody calibrated (the real openai SDK against
tests/support/fake_openai.py) gets no score gate and no cosine duplicate thresholds: its memories
are ranked and fill the budget, and only the same normalised text is a duplicate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memora.engine import Engine, EngineConfig
from memora.longterm import MemoryStore, NewMemory
from memora.longterm.calibration import DenseScale, profile_for
from memora.longterm.dedupe import Relation, may_replace, relation
from memora.longterm.embeddings import LocalUSE, OpenAIEmbedder
from memora.longterm.retrieval_policy import ReplyQuery, RetrievalPolicy, retrieve
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fake_openai import FakeOpenAI
from tests.support.fakes import FakeLLM

FACTS = (
    "The user works night shifts at a hospital.",
    "The user likes green apples.",
    "The user likes green apples a lot.",  # a close paraphrase: USE's thresholds would fold it
    "Quantum chromodynamics is the user's hobby.",
)


@pytest.fixture
async def api_store(tmp_path: Path, openai_server: FakeOpenAI) -> AsyncIterator[MemoryStore]:
    embedder = OpenAIEmbedder(
        model="text-embedding-3-small", api_key="sk-fake", base_url=openai_server.base_url
    )
    try:
        async with MemoryStore(tmp_path / "api-chroma", embedder) as store:
            yield store
    finally:
        await embedder.aclose()


def test_the_local_model_reads_its_calibrated_profile() -> None:
    local = profile_for(LocalUSE.name)
    assert local.calibrated and local.dedupe is not None
    assert local.min_score > 0 and local.scale == DenseScale(0.0, 0.6)
    api = profile_for("text-embedding-3-small")
    assert not api.calibrated and api.dedupe is None
    assert api.min_score == 0.0 and api.lexical_gate == 0.0 and api.scale == DenseScale(0, 1)


def test_without_thresholds_only_the_same_text_is_a_duplicate() -> None:
    same = relation("The user likes apples.", "the user likes apples", 0.1, None)
    assert same is Relation.DUPLICATE
    for cosine in (0.5, 0.99, 1.0):
        assert relation("My level is B2", "My level is B1", cosine, None) is Relation.DISTINCT
        assert not may_replace("Moved to Tainan", "Lives in Taipei", cosine, None)
    # the local model's thresholds would call the same pair an update
    assert relation("My level is B2", "My level is B1", 0.95) is Relation.UPDATE


async def test_an_uncalibrated_embedder_ranks_then_fills_the_budget(
    api_store: MemoryStore,
) -> None:
    assert api_store.profile == profile_for("text-embedding-3-small")
    results = await api_store.writer.add_many(
        1, [*map(_new, FACTS), _new("the user LIKES green apples")]
    )
    # no cosine threshold borrowed from USE: the paraphrase stays, the same text does not
    assert [r.action for r in results] == ["added"] * 4 + ["duplicate"]
    assert await api_store.count(1) == 4
    budget = RetrievalPolicy(memory_tokens=500, min_score=api_store.profile.min_score)
    found = await retrieve(api_store, budget, ReplyQuery(1, "Which fruit do I like?"))
    assert len(found.hits) == 4 and found.embedding_tokens > 0  # every memory while they fit
    assert "apples" in found.hits[0].memory.text  # ranked
    # no score gate: without a budget the top_k best, whatever their score
    ranked = RetrievalPolicy(memory_tokens=0, top_k=2, min_score=api_store.profile.min_score)
    assert len((await retrieve(api_store, ranked, ReplyQuery(1, "zzz qqq"))).hits) == 2


async def test_the_engine_takes_min_score_from_the_store_s_embedder(
    tmp_path: Path, api_store: MemoryStore, store: MemoryStore
) -> None:
    db = Database(tmp_path / "memora.sqlite3")
    await db.open()
    try:
        for memories, want in ((api_store, 0.0), (store, profile_for(LocalUSE.name).min_score)):
            engine = Engine(
                db=db, llm=FakeLLM(), counter=LocalTokenCounter(), store=memories,
                config=EngineConfig(memory_tokens=0),
            )  # fmt: skip
            assert engine.retrieval.policy.min_score == want
            configured = Engine(
                db=db, llm=FakeLLM(), counter=LocalTokenCounter(), store=memories,
                config=EngineConfig(min_score=0.3),
            )  # fmt: skip
            assert configured.retrieval.policy.min_score == 0.3
    finally:
        await db.close()


def _new(text: str) -> NewMemory:
    return NewMemory(text)
