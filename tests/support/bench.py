"""The scripts of benchmarks/ as modules, for the tests that run them or share their code."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/<name>.py, imported once per process and registered in sys.modules under its
    name (dataclasses look their module up there; a second load would make other classes)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
