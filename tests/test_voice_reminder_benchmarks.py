"""The voice and reminder benchmarks still run against today's code (tiny sizes; figures are
printed by the scripts themselves, never asserted here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


async def test_voice_overhead_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    await load("voice_overhead").run(1, 0.0, 0.0, tmp_path)
    out = capsys.readouterr().out
    assert "1 pairs" in out and "overhead" in out


async def test_reminders_burst_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    await load("reminders_burst").run(5, tmp_path)
    out = capsys.readouterr().out
    assert "distinct learners reached: 5" in out
    assert "sent again when re-run the same day: 0 of 5" in out
    assert "reminder rows in the outbox: 5 sent" in out  # through the outbox, each once
