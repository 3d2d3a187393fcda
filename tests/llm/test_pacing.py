"""The background calls' time limit follows what the endpoint has shown (issue 31)."""

from __future__ import annotations

import pytest

from memora.errors import LLMError
from memora.extraction import ExtractionResult
from memora.llm import TIMED_OUT, OpenAILLM
from memora.llm.pacing import AdaptiveTimeout
from memora.types import ChatMessage
from tests.support.fake_openai import FakeOpenAI


def test_a_slow_local_model_gets_the_time_it_shows_within_the_cap() -> None:
    limit = AdaptiveTimeout(floor=30, cap=300)
    assert limit.current == 30  # a fast hosted model keeps the configured limit
    limit.timed_out(30)
    assert limit.current == 60 and limit.last_timeout == 30
    limit.timed_out(60)
    assert limit.current == 120
    limit.took(100)  # SmolLM2 on two cores: ~100 s for the extraction call
    assert limit.current == 300 and limit.last_timeout is None
    limit.timed_out(300)
    assert limit.current == 300  # never past the cap


def test_the_limit_comes_back_down_when_the_endpoint_is_fast_again() -> None:
    limit = AdaptiveTimeout(floor=30, cap=300, window=3)
    limit.took(40)
    assert limit.current == 120
    for _ in range(3):
        limit.took(2)
    assert limit.current == 30


async def test_a_slow_endpoint_times_out_once_then_gets_the_time_it_needs() -> None:
    """The real SDK against the fake server: a 1.5 s extraction with a 1 s limit times out,
    says so with both limits, and the next call (2 s allowed) goes through."""
    with FakeOpenAI() as server:
        server.kind_latency["structured"] = 1.5
        llm = OpenAILLM.for_api(
            "chat_completions",
            model="m",
            api_key="k",
            base_url=server.base_url,
            max_retries=0,
            pacing=AdaptiveTimeout(floor=1.0, cap=5.0),
        )
        messages = [ChatMessage("user", "I am a nurse.")]
        with pytest.raises(LLMError) as failed:
            await llm.parse("Extract.", messages, ExtractionResult)
        assert failed.value.code == TIMED_OUT
        assert "timed out after 1 s" in str(failed.value) and "may take 2 s" in str(failed.value)
        answer = await llm.parse("Extract.", messages, ExtractionResult)
        assert answer.parsed is not None
        assert llm.pacing is not None and 4.5 <= llm.pacing.current <= 5.0  # 3 × what it took
        await llm.aclose()
