"""A learner's turn and its memory extraction against each provider profile of the fake server
(tests/support/fake_openai.py, from each service's documented rules), through the clients the app
builds from `[llm]` settings and the real SDK: OpenAI on both APIs, Azure OpenAI through the SDK's
Azure client, a DeepSeek-like server (no json_schema, no reasoning effort) and a local server
without the Responses API. The real llama.cpp server's recording is tests/llm/test_llama_cpp.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memora.app import make_audio, make_embedder, model_client
from memora.config import LLMConfig, Settings
from memora.engine import ChatRef, Engine, UserRef
from memora.extraction import ExtractionResult
from memora.llm import CallInfo, ChatMessage, Learned
from memora.longterm import MemoryStore
from memora.longterm.embeddings import OpenAIEmbedder
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fake_openai import VOICE_FIXTURE, FakeOpenAI, FakeRequest, extraction_answer

MEI = UserRef(3101, "Mei")


async def one_turn(settings: Settings, db: Database, store: MemoryStore) -> list[str]:
    """Mei's turn and its extraction, through the app's three clients; her memories after."""
    learned = Learned()
    cfg = settings.llm
    clients = [
        model_client(settings, cfg.model, learned),
        model_client(settings, cfg.model, learned, background=True),
    ]
    engine = Engine(
        db=db,
        llm=clients[0],
        summary_llm=clients[1],
        extraction_llm=clients[1],
        counter=LocalTokenCounter(),
        store=store,
    )
    try:
        reply = await engine.handle_turn(ChatRef(MEI.id), MEI, "I live in Taipei with my cat.")
        assert reply.ok, reply.text
        await engine.drain()
    finally:
        for client in clients:
            await client.aclose()
    return [m.text for m in await store.memories(MEI.id)]


def openai_settings(fake: FakeOpenAI, api: str, model: str = "gpt-5-mini") -> Settings:
    return Settings(llm=LLMConfig(api=api, model=model, api_key="sk-x", base_url=fake.base_url))


def azure_settings(fake: FakeOpenAI, api: str) -> Settings:
    endpoint = f"http://127.0.0.1:{fake.port}"
    return Settings(
        llm=LLMConfig(
            api=api,
            api_key="azure-key",
            azure_endpoint=endpoint,
            azure_deployment="gpt-5-mini-tutor",
        )
    )


Profile = Callable[[FakeOpenAI], Settings]
PROFILES: dict[str, tuple[Callable[[FakeOpenAI], Any], Profile]] = {
    "openai-responses": (FakeOpenAI.like_openai, lambda f: openai_settings(f, "responses")),
    "openai-chat": (FakeOpenAI.like_openai, lambda f: openai_settings(f, "chat_completions")),
    "azure-responses": (FakeOpenAI.like_azure, lambda f: azure_settings(f, "responses")),
    "azure-chat": (FakeOpenAI.like_azure, lambda f: azure_settings(f, "chat_completions")),
    "deepseek": (
        FakeOpenAI.like_deepseek,
        lambda f: openai_settings(f, "chat_completions", "deepseek-chat"),
    ),
    "local": (
        FakeOpenAI.like_local_server,
        lambda f: openai_settings(f, "chat_completions", "qwen2.5:7b"),
    ),
}


def effort(req: FakeRequest) -> str | None:
    if req.api == "responses":
        return (req.body.get("reasoning") or {}).get("effort")
    return req.body.get("reasoning_effort")


@pytest.mark.parametrize("name", list(PROFILES))
async def test_a_turn_and_its_extraction_on_each_provider(
    fake: FakeOpenAI, sqlite_db: Database, store: MemoryStore, name: str
) -> None:
    profile, settings_for = PROFILES[name]
    profile(fake)
    fake.queue_reply(extraction_answer(("Lives in Taipei.", "personal", ["Taipei", "台北"])),
                     kind="structured")  # fmt: skip
    memories = await one_turn(settings_for(fake), sqlite_db, store)
    assert memories == ["Lives in Taipei."]

    replies, structured = fake.requests_of("reply"), fake.requests_of("structured")
    answered = [r for r in replies + structured if fake.provider_refusal(r) is None]
    assert {r.kind for r in answered} == {"reply", "structured"}  # one of each got through
    learner = answered[0].body.get("safety_identifier")
    assert learner and str(MEI.id) not in learner
    assert all(r.body.get("safety_identifier") == learner for r in answered)
    assert [r.body["prompt_cache_key"] for r in answered] == ["memora-reply", "memora-extraction"]
    if name in ("openai-responses", "azure-responses"):
        assert all(r.body["store"] is False for r in replies + structured)
    else:
        assert all("store" not in r.body for r in replies + structured)

    if name.startswith(("openai", "azure")):  # reasoning models: the effort of each call kind
        assert [effort(r) for r in answered] == ["minimal", "low"]
        assert [r.response_format for r in structured] == ["json_schema"]
    if name.startswith("azure"):  # the Azure client's paths: the deployment is the model
        assert {r.model for r in replies + structured} == {"gpt-5-mini-tutor"}
    if name == "deepseek":  # no effort, and JSON mode once json_schema was refused
        assert [effort(r) for r in answered] == [None, None]
        assert [r.response_format for r in structured][-1] == "json_object"
        assert "json_schema" not in [r.response_format for r in structured[1:]]
    if name == "local":
        assert all(r.api == "chat_completions" for r in replies + structured)


async def test_a_server_without_the_responses_api_answers_it_404(fake: FakeOpenAI) -> None:
    """Older Ollama and most local servers: /v1/responses is not there (the app says to set
    api = "chat_completions"; see memora/llm/sdk_errors.py)."""
    fake.like_local_server()
    llm = model_client(openai_settings(fake, "responses", "qwen2.5:7b"), "qwen2.5:7b")
    try:
        with pytest.raises(Exception, match=r"404|chat_completions"):
            await llm.complete("Be brief.", [])
    finally:
        await llm.aclose()


async def test_embeddings_and_voice_go_through_the_azure_client(fake: FakeOpenAI) -> None:
    """On Azure every endpoint Memora uses is the deployment's: not api.openai.com with an Azure
    key."""
    fake.like_azure()
    settings = azure_settings(fake, "responses")
    settings.embeddings.provider = "openai"
    embedder = make_embedder(settings)
    audio = make_audio(settings)
    assert isinstance(embedder, OpenAIEmbedder) and audio is not None
    try:
        assert (await embedder.embed(["lives in Taipei"])).vectors.shape == (1, 1536)
        heard = await audio.transcribe(VOICE_FIXTURE.read_bytes(), "voice.ogg")
    finally:
        await embedder.aclose()
        await audio.aclose()
    assert heard.text.startswith("(fake transcript")
    assert [(r.kind, r.model) for r in fake.requests] == [
        ("embed", "text-embedding-3-small"),
        ("transcribe", "gpt-4o-mini-transcribe"),
    ]


async def test_the_one_reasoning_effort_key_of_before_is_the_replys(fake: FakeOpenAI) -> None:
    fake.like_openai()
    llm = LLMConfig(api_key="sk-x", base_url=fake.base_url, reasoning_effort="high")
    client = model_client(Settings(llm=llm), llm.model)
    try:
        await client.complete("Be brief.", [ChatMessage("user", "Hi")])
        await client.parse("Answer in json.", [ChatMessage("user", "Hi")], ExtractionResult,
                           call=CallInfo("extraction"))  # fmt: skip
    finally:
        await client.aclose()
    assert [effort(r) for r in fake.requests] == ["high", "low"]
