"""What the benchmarks print about the machine they ran on (figures here are read beside it)."""

from __future__ import annotations

import os


def load() -> str:
    """The load average, so a figure taken on a busy machine says so."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) {five:.1f} (5 min) on {os.cpu_count()} CPUs"
