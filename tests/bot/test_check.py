"""`memora check` (issue 39): one line per capability saying what Memora will do, and a non-zero
exit on a fatal problem. The real command as a subprocess against the fake servers, and each
fatal problem through the same checks in-process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from bot.check import check_telegram
from memora.check import Finding, run_checks, turn_cost
from memora.config import (
    EmbeddingsConfig,
    LLMConfig,
    ModelPrice,
    PricingConfig,
    Settings,
    TelegramConfig,
)
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.terminal import ROOT, memora_env

PRICES = json.dumps({"gpt-5-mini": {"input": 0.25, "cached_input": 0.025, "output": 2.0}})


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as tg:
        yield tg


def check_env(llm: FakeOpenAI, tg: FakeTelegram, tmp: Path, **env: str) -> dict[str, str]:
    """An operator's configuration, in environment variables, for these servers."""
    return memora_env(
        llm,
        tmp,
        **{
            "TELEGRAM_BOT_TOKEN": tg.token,
            "MEMORA_TELEGRAM__BASE_URL": tg.base_url,
            "MEMORA_PRICING__MODELS": PRICES,
            **env,
        },
    )


def memora_check(envs: dict[str, dict[str, str]]) -> dict[str, tuple[int, str]]:
    """`memora check` as an operator runs it, once per configuration, all at once (each its own
    process); exit status and output by name."""
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "check"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, env in envs.items()
    }
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert "Traceback" not in err, f"{name}: {err}"
        done[name] = (proc.returncode, out)
    return done


def lines(out: str) -> dict[str, str]:
    """The checks' lines by capability ("reply" → "ok   reply: answered ...")."""
    found = {}
    for line in out.splitlines():
        mark, _, rest = line.partition(" ")
        capability, sep, _says = rest.strip().partition(":")
        if sep and mark in ("ok", "note", "-", "FAIL"):
            found[capability] = line
    return found


CAPABILITIES = [
    "key and model",
    "reply",
    "structured output",
    "streaming",
    "embeddings",
    "transcription",
    "cost",
    "telegram",
]
PROFILES: dict[str, tuple[Callable[[FakeOpenAI], object], dict[str, str]]] = {
    "openai-responses": (FakeOpenAI.like_openai, {}),
    "openai-chat": (FakeOpenAI.like_openai, {"MEMORA_LLM__API": "chat_completions"}),
    "azure": (FakeOpenAI.like_azure, {"MEMORA_LLM__AZURE_DEPLOYMENT": "gpt-5-mini-tutor"}),
    "deepseek": (
        FakeOpenAI.like_deepseek,
        {
            "MEMORA_LLM__API": "chat_completions",
            "MEMORA_LLM__MODEL": "deepseek-chat",
            "MEMORA_VOICE__ENABLED": "false",
        },
    ),
    "local": (
        FakeOpenAI.like_local_server,
        {
            "MEMORA_LLM__API": "chat_completions",
            "MEMORA_LLM__MODEL": "qwen2.5:7b",
            "MEMORA_EMBEDDINGS__PROVIDER": "openai",
        },
    ),
    "llama.cpp": (
        FakeOpenAI.like_llama_cpp,
        {"MEMORA_LLM__API": "chat_completions", "MEMORA_LLM__MODEL": "smollm2"},
    ),
}


def test_memora_check_on_each_provider_profile(telegram: FakeTelegram, tmp_path: Path) -> None:
    """The real command against the fake server in each provider profile
    (tests/support/fake_openai.py, from each service's documented rules; llama.cpp's as recorded
    from its server), and one configuration with fatal problems."""
    with ExitStack() as stack:
        envs = {}
        for name, (profile, env) in PROFILES.items():
            server = stack.enter_context(FakeOpenAI())
            profile(server)
            envs[name] = check_env(server, telegram, tmp_path / name, **env)
            if name == "azure":  # the SDK's Azure client: the endpoint, not a /v1 base URL
                del envs[name]["MEMORA_LLM__BASE_URL"]
                envs[name]["MEMORA_LLM__AZURE_ENDPOINT"] = f"http://127.0.0.1:{server.port}"
        down = stack.enter_context(FakeOpenAI())
        down.down = True
        envs["fatal"] = check_env(down, telegram, tmp_path / "fatal", TELEGRAM_BOT_TOKEN="1:NO")
        results = memora_check(envs)
    said = {name: lines(out) for name, (_code, out) in results.items()}
    for name in PROFILES:
        code, out = results[name]
        assert code == 0 and list(said[name]) == CAPABILITIES, f"{name}:\n{out}"
        assert "@memora_test_bot" in said[name]["telegram"], out
    openai = said["openai-responses"]
    assert all(line.startswith(("ok ", "- ")) for line in openai.values()), openai
    assert "Responses API" in openai["key and model"]
    assert "strict json_schema" in openai["structured output"]
    assert "streamed" in openai["streaming"]
    assert "local model" in openai["embeddings"]  # the default: no provider call
    assert "1,000 learner turns ≈ " in openai["cost"] and "USD" in openai["cost"]
    assert "Chat Completions API" in said["openai-chat"]["key and model"]
    azure = said["azure"]
    assert "gpt-5-mini-tutor answers at http://127.0.0.1" in azure["key and model"], azure
    assert "strict json_schema" in azure["structured output"]  # no schema sends a `default`
    assert "strict json_schema" in said["openai-chat"]["structured output"]
    for name in ("deepseek", "llama.cpp"):  # no json_schema: Memora works around it
        assert said[name]["structured output"].startswith("note"), said[name]
        assert (
            "your server refuses json_schema: extraction will use JSON mode"
            in said[name]["structured output"]
        )
    assert "voice is off" in said["deepseek"]["transcription"]
    assert "no price in [pricing] for deepseek-chat" in said["deepseek"]["cost"]
    assert (
        said["local"]["embeddings"].startswith("ok") and "dimensions" in said["local"]["embeddings"]
    )
    assert "streamed" in said["llama.cpp"]["streaming"]

    code, out = results["fatal"]
    assert code == 1, out
    assert said["fatal"]["key and model"].startswith("FAIL")
    assert said["fatal"]["telegram"].startswith("FAIL") and "refuses the token" in out
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


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
async def test_an_unknown_model_is_fatal(api: str) -> None:
    with FakeOpenAI() as llm:
        said = "The model `gpt-5-mini` does not exist or you do not have access to it."
        llm.fail_next(status=404, message=said, code="model_not_found")  # OpenAI's answer
        found = await run_checks(settings_for(llm.base_url, api=api))
    assert first(found).fatal and "does not know the model 'gpt-5-mini'" in found[0].says


async def test_a_server_without_the_responses_api_names_the_setting() -> None:
    with FakeOpenAI() as llm:
        llm.like_local_server()  # 404 to /v1/responses, as Ollama and most local servers answer
        found = await run_checks(settings_for(llm.base_url, model="qwen2.5:7b"))
    assert first(found).fatal and 'set [llm] api = "chat_completions"' in found[0].says


async def test_an_unreachable_server_is_fatal() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    found = await run_checks(settings_for(f"http://127.0.0.1:{port}/v1", max_retries="0"))
    assert first(found).fatal and "cannot be reached" in found[0].says


async def test_failing_embeddings_are_a_note_replies_go_on() -> None:
    with FakeOpenAI() as llm:
        llm.fail_next(3, status=500, kind="embed")
        settings = settings_for(llm.base_url, max_retries="0")
        settings = settings.model_copy(update={"embeddings": EmbeddingsConfig(provider="openai")})
        found = {f.capability: f for f in await run_checks(settings)}
    assert found["embeddings"].status == "note" and "no memory is kept" in found["embeddings"].says
    assert not any(f.fatal for f in found.values())


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
