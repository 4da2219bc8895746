"""The layers: the transports are siblings, neither imports the other, what they share lives in client/ (model, base,
errors)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "rmq_spark" / "client"


def _imports(package: Path) -> dict[str, set[str]]:
    """The rmq_spark modules each source file of ``package`` imports (generated protobuf modules left out)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        if path.name.endswith("_pb2.py"):
            continue
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[str(path.relative_to(CLIENT))] = {n for n in names if n.startswith("rmq_spark.")}
    return found


@pytest.mark.parametrize("package, other", [("grpc", "remoting"), ("remoting", "grpc")])
def test_a_transport_does_not_import_the_other(package, other):
    imports = _imports(CLIENT / package)
    assert imports, f"no sources found under {CLIENT / package}"
    crossing = {
        f: sorted(n for n in names if n.startswith(f"rmq_spark.client.{other}")) for f, names in imports.items()
    }
    assert not {f: n for f, n in crossing.items() if n}, f"client/{package} imports client/{other}"


def test_the_client_imports_nothing_above_itself():
    """The client stands on its own: rmq_spark.errors re-exports its errors, never the other way round."""
    above = {
        f: sorted(n for n in names if not n.startswith(("rmq_spark.client", "rmq_spark.compiled")))
        for f, names in _imports(CLIENT).items()
    }
    assert not {f: n for f, n in above.items() if n}, "client/ imports modules above it"
