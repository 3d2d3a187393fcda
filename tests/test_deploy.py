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

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
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


def _image_users_and_folders() -> tuple[str, dict[str, str]]:
    """The Dockerfile's USER (as its uid) and the folders it creates with their owner's uid."""
    text = (ROOT / "Dockerfile").read_text()
    by_name = {name: uid for uid, name in re.findall(r"useradd .*--uid (\d+) (\w+)", text)}
    owned = {}
    for folders, owner in re.findall(r"mkdir -p ([^&\n]+?) && chown (\w+):", text):
        for folder in folders.split():
            owned[folder] = by_name[owner]
    (user,) = re.findall(r"(?m)^USER (\w+)$", text)
    return by_name.get(user, user), owned


def test_every_service_of_the_image_can_write_its_volumes() -> None:
    """A named volume starts as a copy of the image's folder at its path (owner included), or
    root-owned when the image has none there: a service built from the Dockerfile mounts its
    volumes only on folders the image creates for the user the service runs as."""
    user, owned = _image_users_and_folders()
    assert owned, "the Dockerfile creates no folder for its user"
    built = {n: s for n, s in compose()["services"].items() if "build" in s}
    assert "chroma" in built
    for name, service in built.items():
        runs_as = str(service.get("user", user)).split(":")[0]
        for volume in service.get("volumes", []):
            target = volume.split(":")[1]
            assert owned.get(target) == runs_as, f"{name}: {target} is not {runs_as}'s"
    chroma = built["chroma"]["command"]
    path = chroma[chroma.index("--path") + 1]
    assert any(path.startswith(v.split(":")[1] + "/") for v in built["chroma"]["volumes"])


def test_the_build_context_holds_only_what_the_image_copies() -> None:
    """.dockerignore: everything out (.git, .venv, config.toml, deploy/.env, data), then what
    the Dockerfile's COPY lines name back in."""
    lines = [
        line
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines[0] == "*"
    copied = set()
    for sources in re.findall(r"(?m)^COPY (.+) \S+$", (ROOT / "Dockerfile").read_text()):
        copied.update(sources.split())
    kept = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert kept == copied
