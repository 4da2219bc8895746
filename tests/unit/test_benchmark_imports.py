"""Every benchmark module imports: the suite runs some benchmark lines (test_benchmarks_smoke), not all, and a
module only the Kafka lines load must not break them unseen."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("module", sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem != "__init__"))
def test_a_benchmark_module_imports(module):
    importlib.import_module(f"benchmarks.{module}")
