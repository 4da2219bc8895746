"""The deployment tests: rmq-spark as users install and run it. One release wheel (scripts/wheel.sh) is built per
session and installed into a fresh virtualenv that has no cargo on PATH and no checkout on sys.path; the tests run
Spark from that virtualenv, as a cluster node would."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.node import ROOT, NodeVenv


def pytest_collection_modifyitems(items):
    for item in items:
        if "/deploy/" in str(item.fspath):
            item.add_marker(pytest.mark.deploy)


@pytest.fixture(scope="session")
def release_wheel(tmp_path_factory) -> Path:
    """The release wheel, built and checked by scripts/wheel.sh."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "wheel.sh"), str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, f"scripts/wheel.sh failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def node_venv(release_wheel, tmp_path_factory) -> Iterator[NodeVenv]:
    """A fresh virtualenv with the release wheel and its pipelines extra (Spark Connect included), installed by pip
    from outside the checkout."""
    home = tmp_path_factory.mktemp("node")
    venv = NodeVenv(home / "venv")
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv.root)], check=True)
    venv.run(
        venv.python,
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        f"{release_wheel}[pipelines]",
        cwd=home,
        timeout=900,
    )
    yield venv
    shutil.rmtree(home, ignore_errors=True)
