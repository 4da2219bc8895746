"""The layers: the transports are siblings, neither imports the other, what they share lives in client/ (model, base,
errors)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "rmq_spark" / "client"


def _imports(package: Path) -> dict[str, set[str]]:
    """The rmq_spark modules each source file of ``package`` imports (generated protobuf modules left out)."""
    return {
        str(path.relative_to(CLIENT)): {n for n in _imported(path) if n.startswith("rmq_spark.")}
        for path in sorted(package.rglob("*.py"))
        if not path.name.endswith("_pb2.py")
    }


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


ROOT = CLIENT.parents[1]
PACKAGE = ROOT / "rmq_spark"


def _design_layers() -> tuple[list[list[str]], set[str]]:
    """The layers docs/DESIGN.md §1 lists, top first (each a list of module paths or folders/), and the modules it
    says import pyspark."""
    text = (ROOT / "docs" / "DESIGN.md").read_text()
    section = text[text.index("Layers, from the top") : text.index("Lint and format: ruff")]
    layers = []
    for number, names in re.findall(r"^(\d)\. ([^:]+):", section, re.MULTILINE):
        assert int(number) == len(layers) + 1, f"layer {number} out of order"
        layers.append([n.strip() for n in names.split(",")])
    spark = section[section.index("pyspark is imported only by:") :].split(". ")[0]
    words = re.findall(r"[a-z_]+(?:/[a-z_]+)?", spark.split(":", 1)[1])
    return layers, {w for w in words if (PACKAGE / f"{w}.py").is_file()}


def _module(path: Path) -> str:
    """``source/stream`` for rmq_spark/source/stream.py."""
    return path.relative_to(PACKAGE).with_suffix("").as_posix()


def _layer_of(module: str, layers: list[list[str]]) -> int:
    """The layer of ``module``: the one naming it, else the one naming its folder."""
    for exact in (True, False):
        for i, names in enumerate(layers):
            for name in names:
                if (module == name) if exact else (name.endswith("/") and module.startswith(name)):
                    return i + 1
    raise AssertionError(f"docs/DESIGN.md §1's layers do not place rmq_spark/{module}.py")


def _sources() -> list[Path]:
    return [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name != "__init__.py" and not p.name.endswith("_pb2.py") and p.suffix == ".py"
    ]


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports (from ... import and import)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _target(name: str) -> str | None:
    """``rmq_spark.source.stream`` as the path of its module (``source/stream``), a package as its ``__init__``; None
    for other packages and the native extension."""
    if not name.startswith("rmq_spark.") or name == "rmq_spark._native":
        return None
    relative = name.removeprefix("rmq_spark.").replace(".", "/")
    return relative + "/__init__" if (PACKAGE / relative).is_dir() else relative


def test_imports_only_run_down_the_layers_design_lists():
    layers, _ = _design_layers()
    assert len(layers) >= 5, layers
    upward = []
    for path in _sources():
        module = _module(path)
        mine = _layer_of(module, layers)
        for name in sorted(_imported(path)):
            target = _target(name)
            if target is None:
                continue
            theirs = _layer_of(target, layers)
            if theirs < mine:
                upward.append(f"{module} (layer {mine}) imports {name} (layer {theirs})")
            sides = {module.split("/")[0], target.split("/")[0]}
            if sides == {"source", "sink"}:
                upward.append(f"{module} imports {name}: the read side and the sink import nothing of each other")
    assert not upward, "imports that run up docs/DESIGN.md §1's layers:\n" + "\n".join(upward)


def test_pyspark_is_imported_only_where_design_says():
    _, named = _design_layers()
    importing = {_module(p) for p in _sources() if any(n.split(".")[0] == "pyspark" for n in _imported(p))}
    assert importing == named, f"modules importing pyspark: {sorted(importing)}; DESIGN §1 names {sorted(named)}"
