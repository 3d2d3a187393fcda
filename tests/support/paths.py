"""Where things are, wherever a test module sits: the repository, the tests' data files and the
benchmarks' data."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
BENCHMARK_DATA = ROOT / "benchmarks" / "data"
