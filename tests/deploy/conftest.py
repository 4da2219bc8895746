"""The deployment tests: rmq-spark as users install and run it. One release wheel (scripts/wheel.sh) is built per
session and installed into a fresh virtualenv that has no cargo on PATH and no checkout on sys.path; the tests run
Spark from that virtualenv, as a cluster node would."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items):
    for item in items:
        if "/deploy/" in str(item.fspath):
            item.add_marker(pytest.mark.deploy)


def node_env(**extra: str) -> dict[str, str]:
    """The environment of a machine that has Java but not this checkout or a Rust toolchain: PATH without cargo's
    folders, nothing of ours on PYTHONPATH."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc", "maturin"))]
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
           and not k.startswith(("CARGO", "RUSTUP"))}
    return {**env, "PATH": os.pathsep.join(path), "SPARK_LOCAL_IP": "127.0.0.1", **extra}


@pytest.fixture(scope="session")
def release_wheel(tmp_path_factory) -> Path:
    """The release wheel, built and checked by scripts/wheel.sh."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "wheel.sh"), str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, f"scripts/wheel.sh failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
    return Path(proc.stdout.strip().splitlines()[-1])


class NodeVenv:
    """A virtualenv holding the release wheel and what pip resolves for it, as on every node of a cluster."""

    def __init__(self, root: Path):
        self.root = root
        self.python = root / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.root / "bin" / name

    def env(self, **extra: str) -> dict[str, str]:
        """The node's environment with this virtualenv activated: its python3 first on PATH, where Spark looks for
        its Python workers' interpreter."""
        env = node_env(VIRTUAL_ENV=str(self.root), **extra)
        return {**env, "PATH": os.pathsep.join([str(self.root / "bin"), env["PATH"]])}

    def run(self, *args: str | os.PathLike, cwd: Path, timeout: float = 300, env: dict | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        """``args`` run in the node's environment with this virtualenv activated (``env`` added), from ``cwd``
        (never the checkout)."""
        proc = subprocess.run([str(a) for a in args], cwd=cwd, env=self.env(**(env or {})), capture_output=True,
                              text=True, timeout=timeout)
        if check:
            assert proc.returncode == 0, (f"{args[0]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                                          f"{proc.stderr[-6000:]}")
        return proc


@pytest.fixture(scope="session")
def node_venv(release_wheel, tmp_path_factory) -> Iterator[NodeVenv]:
    """A fresh virtualenv with the release wheel (and its connect extra) installed by pip, from outside the
    checkout."""
    home = tmp_path_factory.mktemp("node")
    venv = NodeVenv(home / "venv")
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv.root)], check=True)
    venv.run(venv.python, "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{release_wheel}[connect]",
             cwd=home, timeout=900)
    yield venv
    shutil.rmtree(home, ignore_errors=True)
