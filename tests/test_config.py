"""Configuration: precedence, env overrides, and one clear line for every mistake."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from memora.config import ConfigError, load_settings, require_llm, require_telegram
from memora.engine import ChatRef, Engine, EngineConfig, UserRef
from memora.shortterm.instructions import TUTOR_INSTRUCTIONS
from memora.shortterm.tokens import LocalTokenCounter
from memora.storage import Database
from tests.support.fakes import FakeLLM

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_match_the_design() -> None:
    s = load_settings()
    assert s.llm.model == "gpt-5-mini"
    assert s.llm.api == "responses"
    # the seeds' 1000 for the conversation plus the memory budget (memora.config)
    assert s.memory.max_input_tokens == 1000 + s.retrieval.memory_tokens == 1500
    assert s.memory.max_recent_turns == 3
    assert s.retrieval.top_k == 3
    assert s.embeddings.provider == "local"


def test_example_config_is_valid_and_documents_every_key(tmp_path: Path) -> None:
    example = ROOT / "config.example.toml"
    s = load_settings(example)
    text = example.read_text()
    for section, model in s:
        assert f"[{section}]" in text, section
        for key in type(model).model_fields:
            assert f"\n{key} =" in text or f"\n# {key} =" in text, f"{section}.{key}"


def test_precedence_toml_then_usual_env_then_memora_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[llm]\napi_key = "from-file"\nmodel = "file-model"\n[memory]\nmax_recent_turns = 5\n'
    )
    assert load_settings(cfg).llm.api_key == "from-file"
    monkeypatch.setenv("OPENAI_API_KEY", "from-usual-env")
    assert load_settings(cfg).llm.api_key == "from-usual-env"
    monkeypatch.setenv("MEMORA_LLM__API_KEY", "from-memora-env")
    monkeypatch.setenv("MEMORA_TELEGRAM__ADMIN_IDS", "[1, 2]")
    s = load_settings(cfg)
    assert s.llm.api_key == "from-memora-env"
    assert s.llm.model == "file-model"
    assert s.memory.max_recent_turns == 5
    assert s.telegram.admin_ids == [1, 2]


def test_memora_config_env_picks_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[storage]\ndata_dir = "/tmp/somewhere"\n')
    monkeypatch.setenv("MEMORA_CONFIG", str(cfg))
    assert load_settings().storage.data_dir == Path("/tmp/somewhere")


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"MEMORA_LLM__API": "grpc"}, "'llm.api'"),
        ({"MEMORA_MEMORY__MAX_INPUT_TOKENS": "lots"}, "'memory.max_input_tokens'"),
        ({"MEMORA_MEMORY__MAX_RECENT_TURNS": "-1"}, "'memory.max_recent_turns'"),
        ({"MEMORA_TELEGRAM__ADMIN_IDS": "1,2"}, "MEMORA_TELEGRAM__ADMIN_IDS"),
        ({"MEMORA_LLM__MODLE": "x"}, "'llm.modle'"),
    ],
)
def test_bad_values_name_the_key(
    env: dict[str, str], needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_broken_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm\nmodel = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml")


def test_required_keys() -> None:
    s = load_settings()
    with pytest.raises(ConfigError, match=r"llm\.api_key"):
        require_llm(s)
    with pytest.raises(ConfigError, match=r"telegram\.token"):
        require_telegram(s)


def test_cli_prints_one_line_not_a_traceback(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MEMORA_LLM__API": "nope"}
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "chat"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert "llm.api" in proc.stderr


def test_a_budget_smaller_than_the_system_prompt_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memora.app import check_budget

    monkeypatch.setenv("MEMORA_MEMORY__MAX_INPUT_TOKENS", "150")
    with pytest.raises(ConfigError, match=r"memory\.max_input_tokens.*at least \d+"):
        check_budget(load_settings())
    monkeypatch.setenv("MEMORA_MEMORY__MAX_INPUT_TOKENS", "1000")
    check_budget(load_settings())


def test_data_dir_defaults_to_one_folder_per_user_and_expands_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert load_settings().storage.data_dir == platformdirs.user_data_path("memora")
    monkeypatch.setenv("MEMORA_STORAGE__DATA_DIR", "~/lessons")
    assert load_settings().storage.data_dir == tmp_path / "lessons"


def test_start_up_says_where_the_data_is_wherever_it_is_started(tmp_path: Path) -> None:
    """Started from any folder, memora finds the same per-user data dir and logs its full path."""
    elsewhere = tmp_path / "some" / "folder"
    elsewhere.mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "export", "--chat-id", "7", "-o", "-"],
        cwd=elsewhere,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    expected = tmp_path / ".local" / "share" / "memora"  # the Linux default (XDG)
    assert f"data_dir={expected}" in proc.stderr, proc.stderr
    assert (expected / "memora.sqlite3").is_file()
    assert proc.returncode == 1 and "no data for chat 7" in proc.stderr
    assert not any(elsewhere.iterdir())  # nothing written where it was started


def test_shared_stores_default_to_the_embedded_ones_and_refuse_other_schemes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = load_settings()
    assert s.storage.database_url == ""
    monkeypatch.setenv("MEMORA_STORAGE__DATABASE_URL", "postgresql://u:p@db:5432/memora")
    s = load_settings()
    assert s.storage.database_url == "postgresql://u:p@db:5432/memora"
    monkeypatch.setenv("MEMORA_STORAGE__DATABASE_URL", "mysql://db/memora")
    with pytest.raises(ConfigError, match=r"storage\.database_url.*postgresql://"):
        load_settings()
    monkeypatch.delenv("MEMORA_STORAGE__DATABASE_URL")
    assert load_settings().longterm.chroma_url == ""
    monkeypatch.setenv("MEMORA_LONGTERM__CHROMA_URL", "http://chroma:8000/")
    assert load_settings().longterm.chroma_url == "http://chroma:8000"
    monkeypatch.setenv("MEMORA_LONGTERM__CHROMA_URL", "chroma:8000")
    with pytest.raises(ConfigError, match=r"longterm\.chroma_url.*http"):
        load_settings()


def test_example_provider_blocks_load_and_name_the_api_their_server_has(tmp_path: Path) -> None:
    """The [llm] section's ready blocks (commented out): each loads as it is once uncommented,
    and only OpenAI's and Azure's use the Responses API (the others answer it with 404)."""
    text = (ROOT / "config.example.toml").read_text()
    llm_section = text.split("\n[llm]\n", 1)[1].split("\n[", 1)[0]
    blocks = re.findall(r"(?m)^# ([^\n(]+?) \([^\n]*\):\n((?:#   [^\n]+\n)+)", llm_section)
    names = {name: body for name, body in blocks}
    assert set(names) == {
        "Azure OpenAI",
        "DeepSeek",
        "Ollama on this machine",
        "A llama.cpp server",
    }
    for name, body in names.items():
        cfg = tmp_path / "provider.toml"
        lines = [line.removeprefix("#   ") for line in body.splitlines()]
        cfg.write_text("[llm]\n" + "\n".join(lines) + "\n")
        llm = load_settings(cfg).llm
        assert llm.base_url.startswith(("https://", "http://localhost:")), name
        assert llm.api == ("responses" if name == "Azure OpenAI" else "chat_completions"), name


async def test_the_tutor_instructions_are_the_configs_in_every_reply(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[tutor]\ninstructions = """\nYou are Ms. Lin, a teacher for nurses.\n"""\n')
    assert EngineConfig.from_settings(load_settings()).instructions == TUTOR_INSTRUCTIONS
    config = EngineConfig.from_settings(load_settings(cfg))
    db = Database(tmp_path / "memora.sqlite3")
    await db.open()
    llm = FakeLLM()
    engine = Engine(db=db, llm=llm, counter=LocalTokenCounter(), config=config)
    assert (await engine.handle_turn(ChatRef(1), UserRef(1), "Hello")).ok
    await engine.drain()
    await db.close()
    assert llm.calls[0].kind == "complete"
    assert llm.calls[0].instructions == "You are Ms. Lin, a teacher for nurses."
