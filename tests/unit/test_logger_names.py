"""The README names every logger of the connector (a module that logs under its own name), so users can find and
configure its lines."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _loggers() -> list[str]:
    """The names of the package's module loggers: ``logging.getLogger(__name__)`` in rmq_spark/**.py."""
    names = []
    for path in sorted((ROOT / "rmq_spark").rglob("*.py")):
        if "getLogger(__name__)" in path.read_text():
            names.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return names


def test_every_logger_of_the_connector_is_named_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"`(rmq_spark(?:\.\w+)+(?:\.\*)?)`", readme))
    loggers = _loggers()
    assert "rmq_spark.source.stream" in loggers
    missing = [
        n for n in loggers if n not in named and not any(w.endswith(".*") and n.startswith(w[:-1]) for w in named)
    ]
    assert not missing, f"README does not name these loggers: {missing}"
