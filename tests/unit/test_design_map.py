"""docs/DESIGN.md §1 maps every module of the product and of the harness package: a module added without its line
in the map fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _layers_section() -> str:
    text = (ROOT / "docs" / "DESIGN.md").read_text()
    start = text.index("## 1. Layers")
    return text[start : text.index("\n## ", start + 1)]


def test_every_module_is_on_the_map():
    section = _layers_section()
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", section))
    modules = [
        p
        for package in ("rmq_spark", "rmq_spark_testing")
        for p in sorted((ROOT / package).rglob("*.py"))
        if p.name != "__init__.py" and not p.name.endswith("_pb2.py")
    ]
    assert len(modules) > 50
    missing = [str(p.relative_to(ROOT)) for p in modules if p.stem not in words]
    assert not missing, f"docs/DESIGN.md §1 does not map: {missing}"
    folders = {
        p.parent.relative_to(ROOT / "rmq_spark").as_posix() for p in modules if "rmq_spark_testing" not in str(p)
    }
    unnamed = [f for f in sorted(folders - {"."}) if f"{f.split('/')[-1]}/" not in section]
    assert not unnamed, f"docs/DESIGN.md §1 does not name these packages: {unnamed}"
