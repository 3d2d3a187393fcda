"""deploy/: the compose example's bot replicas start with a configuration Memora accepts.

`docker compose config` (which needs no engine) was run on it when it was written; this test
checks what no compose tool does: that every MEMORA_* variable the replicas get is a real key
with a valid value, that the replicas share PostgreSQL and the Chroma server in webhook mode,
and that the proxy sends Telegram's calls to every replica on the port it listens on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.telegram import check_config
from memora.config import ConfigError, load_settings

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
_VAR = re.compile(r"\$\{(\w+)(?::[?-]([^}]*))?\}")


def env_file() -> dict[str, str]:
    values = {}
    for line in (DEPLOY / ".env.example").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key] = value or f"test-{key.lower()}"
    return values


def interpolate(value: str, env: dict[str, str]) -> str:
    return _VAR.sub(lambda m: env.get(m.group(1), ""), value)


def compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_three_replicas_share_postgres_and_chroma_in_webhook_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services = compose()["services"]
    bots = sorted(name for name in services if name.startswith("bot"))
    assert bots == ["bot1", "bot2", "bot3"]
    assert {"postgres", "chroma", "proxy"} <= set(services)
    env = env_file()
    for name in bots:
        for key, value in services[name]["environment"].items():
            monkeypatch.setenv(key, interpolate(str(value), env))
        settings = load_settings()  # every MEMORA_* key exists and its value is valid
        check_config(settings)  # and `memora run` starts with it
        assert settings.telegram.mode == "webhook"
        assert settings.telegram.webhook_listen == "0.0.0.0"
        assert settings.storage.database_url.startswith("postgresql://memora:")
        assert settings.storage.database_url.endswith("@postgres:5432/memora")
        assert settings.longterm.chroma_url == "http://chroma:8000"
        assert services[name]["build"]["args"]["EXTRAS"] == "postgres,webhooks"
    chroma = services["chroma"]["command"]
    assert chroma[:1] == ["run"] and "8000" in chroma
    upstreams = re.findall(r"(bot\d):(\d+)", (DEPLOY / "Caddyfile").read_text())
    settings = load_settings()
    hook, page = str(settings.telegram.webhook_port), str(settings.webapp.port)
    assert settings.webapp.enabled and settings.webapp.public_url.endswith("/app/")
    assert sorted(upstreams) == sorted([(b, hook) for b in bots] + [(b, page) for b in bots])


def test_the_replicas_need_no_webhook_secret_and_refuse_a_placeholder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No secret in deploy/.env: the replicas share the one the first makes (in PostgreSQL).
    One set to a placeholder (what .env.example once suggested) stops them at start."""
    env = env_file()
    assert "WEBHOOK_SECRET" not in env
    bot = compose()["services"]["bot1"]["environment"]
    for placeholder, refused in (("", False), ("change-me-to-a-long-random-string", True)):
        env["WEBHOOK_SECRET"] = placeholder
        for key, value in bot.items():
            monkeypatch.setenv(key, interpolate(str(value), env))
        settings = load_settings()
        assert settings.telegram.webhook_secret == placeholder
        if refused:
            with pytest.raises(ConfigError, match="webhook_secret': it is a placeholder"):
                check_config(settings)
        else:
            check_config(settings)
