"""A cluster node as the deployment tests make it: a virtualenv holding the release wheel, in an environment with
no cargo and nothing of the checkout; and the checks of what node_job.py reports."""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def job_in(work: Path) -> Path:
    """A copy of node_job.py in ``work``, so that nothing of the checkout is on the job's sys.path."""
    return Path(shutil.copy(Path(__file__).resolve().parent / "node_job.py", work))


def node_env(**extra: str) -> dict[str, str]:
    """The environment of a machine that has Java but not this checkout or a Rust toolchain: PATH without cargo's
    folders, nothing of ours on PYTHONPATH."""
    path = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc", "maturin"))
    ]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
        and not k.startswith(("CARGO", "RUSTUP"))
    }
    return {**env, "PATH": os.pathsep.join(path), "SPARK_LOCAL_IP": "127.0.0.1", **extra}


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

    def run(self, *args: str | os.PathLike, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        """``args`` run to their end in the node's environment, from ``cwd`` (never the checkout)."""
        proc = subprocess.run(
            [str(a) for a in args], cwd=cwd, env=self.env(), capture_output=True, text=True, timeout=timeout
        )
        assert proc.returncode == 0, (
            f"{args[0]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )
        return proc


def job_result(output: str) -> dict:
    """node_job.py's report: the last line of its output."""
    return json.loads(output.strip().splitlines()[-1])


def assert_loaded_from(result: dict, venv: NodeVenv) -> None:
    """The driver and every executor imported rmq-spark and its compiled core from ``venv``, with no cargo."""
    assert result["cargo"] is None
    assert result["executors"], result
    for module, core, python in [result["driver"], *result["executors"]]:
        for path in (module, core, python):
            assert path.startswith(str(venv.root)), (module, core, python)


def topic_keys(rocketmq, topic: str) -> list[tuple[str, int, int]]:
    """The (broker, queue, offset) of every message of ``topic``, as the Java consumer reads them."""
    return sorted((m["brokerName"], m["queueId"], m["queueOffset"]) for m in rocketmq.consume(topic))


def assert_read_and_written_once(result: dict, rocketmq, keys: list[tuple[str, int, int]], target: str) -> None:
    """The batch read saw the messages ``keys`` (of the source when the job ran); ``target`` holds each of them
    exactly once."""
    assert sorted(map(tuple, result["keys"])) == keys
    written = collections.Counter(m["properties"].get("src") for m in rocketmq.consume(target))
    assert written == collections.Counter(f"{b}/{q}/{o}" for b, q, o in keys)
