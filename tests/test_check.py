"""`memora check` (issue 39): one line per capability saying what Memora will do, and a non-zero
exit on a fatal problem. The real command as a subprocess against the fake servers, and each
fatal problem through the same checks in-process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.check import check_telegram
from memora.check import Finding, run_checks, turn_cost
from memora.config import LLMConfig, ModelPrice, PricingConfig, Settings, TelegramConfig
from tests.fake_openai import FakeOpenAI
from tests.fake_telegram import FakeTelegram
from tests.test_terminal import ROOT, memora_env

PRICES = json.dumps({"gpt-5-mini": {"input": 0.25, "cached_input": 0.025, "output": 2.0}})


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as tg:
        yield tg


def memora_check(llm: FakeOpenAI, tg: FakeTelegram, tmp: Path, **env: str) -> tuple[int, str]:
    """`memora check` as an operator runs it, configured by environment variables."""
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "check"],
        cwd=ROOT,
        env=memora_env(
            llm,
            tmp,
            **{
                "TELEGRAM_BOT_TOKEN": tg.token,
                "MEMORA_TELEGRAM__BASE_URL": tg.base_url,
                "MEMORA_PRICING__MODELS": PRICES,
                **env,
            },
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout


def lines(out: str) -> dict[str, str]:
    """The checks' lines by capability ("reply" → "ok   reply: answered ...")."""
    found = {}
    for line in out.splitlines():
        mark, _, rest = line.partition(" ")
        capability, sep, _says = rest.strip().partition(":")
        if sep and mark in ("ok", "note", "-", "FAIL"):
            found[capability] = line
    return found


def test_an_openai_like_server_passes_every_check(telegram: FakeTelegram, tmp_path: Path) -> None:
    with FakeOpenAI() as llm:
        code, out = memora_check(llm, telegram, tmp_path)
    said = lines(out)
    assert code == 0, out
    assert list(said) == [
        "key and model",
        "reply",
        "structured output",
        "streaming",
        "embeddings",
        "transcription",
        "cost",
        "telegram",
    ]
    assert all(line.startswith(("ok ", "- ")) for line in said.values()), out
    assert "Responses API" in said["key and model"]
    assert "strict json_schema" in said["structured output"]
    assert "streamed" in said["streaming"]
    assert "local model" in said["embeddings"]  # the default: no provider call
    assert "@memora_test_bot" in said["telegram"]
    assert "1,000 learner turns ≈ " in said["cost"] and "USD" in said["cost"]
    kinds = {r.kind for r in llm.requests}
    assert {"reply", "structured", "transcribe"} <= kinds


def test_a_server_without_json_schema_or_streams_is_told_what_memora_does(
    telegram: FakeTelegram, tmp_path: Path
) -> None:
    with FakeOpenAI() as llm:
        llm.refused_formats = frozenset({"json_schema"})
        llm.refused_format_status = 400
        llm.refuse_streams = True
        code, out = memora_check(
            llm,
            telegram,
            tmp_path,
            MEMORA_LLM__API="chat_completions",
            MEMORA_EMBEDDINGS__PROVIDER="openai",
            MEMORA_VOICE__ENABLED="false",
        )
    said = lines(out)
    assert code == 0, out  # Memora works around both
    assert said["structured output"].startswith("note") and (
        "your server refuses json_schema: extraction will use JSON mode"
        in said["structured output"]
    )
    assert "replies arrive whole" in said["streaming"]
    assert said["embeddings"].startswith("ok") and "1536 dimensions" in said["embeddings"]
    assert said["transcription"].startswith("-") and "voice is off" in said["transcription"]


def test_fatal_problems_exit_non_zero(telegram: FakeTelegram, tmp_path: Path) -> None:
    with FakeOpenAI() as llm:
        llm.down = True
        code, out = memora_check(llm, telegram, tmp_path, TELEGRAM_BOT_TOKEN="123:WRONG")
    said = lines(out)
    assert code == 1, out
    assert said["key and model"].startswith("FAIL")
    assert said["telegram"].startswith("FAIL") and "refuses the token" in said["telegram"]
    assert "cannot run until this is fixed: key and model, reply, telegram" in out


# -- each fatal problem ----------------------------------------------------------------------------
def settings_for(base_url: str, **llm: str) -> Settings:
    return Settings(llm=LLMConfig(base_url=base_url, api_key="sk-fake", **llm))  # type: ignore[arg-type]


def first(found: list[Finding]) -> Finding:
    assert found and found[0].capability == "key and model"
    return found[0]


async def test_a_refused_key_is_fatal() -> None:
    with FakeOpenAI() as llm:
        llm.fail_next(status=401)
        found = await run_checks(settings_for(llm.base_url))
    assert first(found).fatal and "refuses the key (HTTP 401)" in found[0].says
    assert [f.capability for f in found] == ["key and model", "reply"]  # nothing else tried


async def test_an_unknown_model_is_fatal() -> None:
    with FakeOpenAI() as llm:
        llm.fail_next(status=404, message="The model `gpt-nope` does not exist.")
        found = await run_checks(settings_for(llm.base_url, api="chat_completions"))
    assert first(found).fatal and "does not know the model 'gpt-5-mini'" in found[0].says


async def test_a_server_without_the_responses_api_names_the_setting() -> None:
    with FakeOpenAI() as llm:
        llm.fail_next(status=404)  # 404 to /v1/responses, as Ollama and DeepSeek answer
        found = await run_checks(settings_for(llm.base_url))
    assert first(found).fatal and 'set [llm] api = "chat_completions"' in found[0].says


async def test_an_unreachable_server_is_fatal() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    found = await run_checks(settings_for(f"http://127.0.0.1:{port}/v1", max_retries="0"))
    assert first(found).fatal and "cannot be reached" in found[0].says


async def test_a_bad_or_missing_telegram_token_is_fatal(telegram: FakeTelegram) -> None:
    good = await check_telegram(TelegramConfig(token=telegram.token, base_url=telegram.base_url))
    bad = await check_telegram(TelegramConfig(token="123:WRONG", base_url=telegram.base_url))
    missing = await check_telegram(TelegramConfig(base_url=telegram.base_url))
    assert not good.fatal and "@memora_test_bot" in good.says
    assert bad.fatal and "refuses the token" in bad.says
    assert missing.fatal and "TELEGRAM_BOT_TOKEN" in missing.says


def test_the_cost_of_1000_turns_needs_every_model_priced() -> None:
    models = {"reply": "gpt-5-mini", "extraction": "gpt-5-mini", "summary": "gpt-5-mini"}
    priced = PricingConfig(
        models={"gpt-5-mini": ModelPrice(input=0.25, cached_input=0.025, output=2.0)}
    )
    said = turn_cost(priced, models)
    assert said.status == "ok" and "1,000 learner turns ≈ " in said.says
    cheaper = turn_cost(priced, models, turns=100)
    assert float(cheaper.says.split("≈ ")[1].split()[0]) < float(
        said.says.split("≈ ")[1].split()[0]
    )
    unpriced = turn_cost(priced, {**models, "summary": "gpt-4.1-nano"})
    assert unpriced.status == "off" and "gpt-4.1-nano" in unpriced.says
