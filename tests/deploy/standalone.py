"""A Spark standalone cluster of separate processes, started with the ``spark-class`` of a node's virtualenv: one
master and workers, each in its own process group (a worker and the executors it launched die together)."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

from tests.deploy.node import NodeVenv
from tests.support.ports import server_port
from tests.support.processes import kill_group
from tests.support.sessions import JVM_OPTIONS
from tests.support.waiting import wait_until


class StandaloneCluster:
    """A master on 127.0.0.1 and ``workers`` workers of ``cores`` cores each, their logs and work dirs in ``home``."""

    def __init__(self, venv: NodeVenv, home: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.venv, self.home = venv, home
        self.port, self.ui_port = server_port(), server_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.killed: set[str] = set()
        self.workers = workers
        self._worker_args = ["--cores", str(cores), "--memory", memory]

    def start(self) -> None:
        """Start the master, then the workers; return once every worker is registered (``close`` stops what
        started, also when this fails)."""
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
        )
        wait_until(lambda: self._state() is not None, 60, "the Spark master's status page", self.alive)
        for i in range(self.workers):
            self._start(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                *self._worker_args,
                "--webui-port",
                "0",
                "--work-dir",
                str(self.home / f"worker-{i}"),
                self.url,
            )
        wait_until(
            lambda: len(self.alive_workers()) == self.workers, 90, f"{self.workers} workers registered", self.alive
        )

    def _start(self, name: str, main_class: str, *args: str) -> None:
        env = self.venv.env(
            SPARK_DAEMON_MEMORY="384m", SPARK_DAEMON_JAVA_OPTS=JVM_OPTIONS, SPARK_LOCAL_DIRS=str(self.home / "local")
        )
        with open(self.home / f"{name}.log", "w") as log:
            self.procs[name] = subprocess.Popen(
                [str(self.venv.bin("spark-class")), main_class, *args],
                cwd=self.home,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self) -> None:
        """Raise if a process of the cluster that was not killed has exited."""
        for name, proc in self.procs.items():
            if name not in self.killed and proc.poll() is not None:
                raise AssertionError(f"the Spark {name} exited ({proc.returncode}): {self.log(name)[-3000:]}")

    def log(self, name: str) -> str:
        return (self.home / f"{name}.log").read_text(errors="replace")

    def _state(self) -> dict | None:
        """The master's state from its status page, or None while the page is not up. The master's web server
        accepts requests while it is still adding its pages, so for a moment its "/" page answers "/json/" in
        HTML."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                return json.load(r)
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> list[dict]:
        state = self._state() or {}
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def kill_worker(self, name: str) -> None:
        """SIGKILL a worker and the executors it launched, as when its machine dies."""
        self.killed.add(name)
        kill_group(self.procs[name])

    def close(self) -> None:
        for proc in reversed(list(self.procs.values())):
            kill_group(proc)
