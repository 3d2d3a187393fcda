"""The voice and reminder benchmarks still run against today's code (tiny sizes; figures are
printed by the scripts themselves, never asserted here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import load_benchmark


async def test_voice_overhead_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    await load_benchmark("voice_overhead").run(1, 0.0, 0.0, tmp_path)
    out = capsys.readouterr().out
    assert "1 pairs" in out and "overhead" in out


async def test_reminders_burst_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    await load_benchmark("reminders_burst").run(5, tmp_path)
    out = capsys.readouterr().out
    assert "distinct learners reached: 5" in out
    assert "sent again when re-run the same day: 0 of 5" in out
    assert "reminder rows in the outbox: 5 sent" in out  # through the outbox, each once
