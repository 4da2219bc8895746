"""Peak resident memory of a process tree, sampled from /proc while a benchmark line runs.

Every ``interval`` seconds the sampler walks the tree under ``root`` (the harness itself: its multiprocessing
children, the JVM of the embedded RocketMQ, Spark's JVM and Spark's Python daemon and workers), reads each
process's ``statm`` and keeps the peaks:

- ``python_total_mb``: the sum over all Python processes at one moment (driver + workers), its peak;
- ``python_worker_mb``: the largest single Python process other than the harness itself (a Spark Python worker,
  a client child process), its peak; for lines that read in the harness process this is 0 and
  ``python_driver_mb`` is the reader's memory;
- ``python_driver_mb``: the harness process;
- per JVM (labelled by the caller, e.g. ``shim`` and ``spark``): peak RSS, and peak anonymous RSS (RSS minus
  file-backed pages; the broker maps its commit log, so its RSS also counts page-cache pages it touched);
- ``cpu_seconds``: CPU (user + system) used during the run by the Python processes together (``python``), by those
  other than the harness (``python_workers``: Spark's Python workers, client child processes) and by each JVM (a
  process that ends between two samples loses at most its last interval).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

_PAGE = os.sysconf("SC_PAGE_SIZE")
_MB = 1024 * 1024


_TICK = os.sysconf("SC_CLK_TCK")


def _scan() -> tuple[dict[int, list[int]], dict[int, float]]:
    """Children of every process, and every process's CPU seconds (user + system)."""
    kids: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ... utime stime ...; comm may hold spaces and parentheses: split after the last ')'
        rest = data[data.rfind(b")") + 2 :].split(b" ")
        try:
            pid = int(name)
            kids.setdefault(int(rest[1]), []).append(pid)
            cpu[pid] = (int(rest[11]) + int(rest[12])) / _TICK
        except (IndexError, ValueError):
            continue
    return kids, cpu


def _tree(root: int, kids: dict[int, list[int]]) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, ()))
    return out


def _statm(pid: int) -> tuple[int, int] | None:
    """(rss bytes, file-backed+shmem resident bytes) or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            parts = f.read().split()
        return int(parts[1]) * _PAGE, int(parts[2]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


def _comm(pid: int) -> str:
    """The process name; "" for multiprocessing's resource tracker (a helper, not a reader: not counted)."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            comm = f.read().decode(errors="replace").strip()
        if comm.startswith("python"):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"multiprocessing.resource_tracker" in f.read():
                    return ""
        return comm
    except OSError:
        return ""


@dataclass
class Peaks:
    python_total_mb: float = 0.0
    python_worker_mb: float = 0.0
    python_driver_mb: float = 0.0
    python_processes: int = 0
    jvm_mb: dict[str, float] = field(default_factory=dict)
    jvm_anon_mb: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    samples: int = 0

    def as_dict(self) -> dict:
        return {
            "python_total_mb": round(self.python_total_mb, 1),
            "python_worker_mb": round(self.python_worker_mb, 1),
            "python_driver_mb": round(self.python_driver_mb, 1),
            "python_processes_max": self.python_processes,
            "jvm_mb": {k: round(v, 1) for k, v in sorted(self.jvm_mb.items())},
            "jvm_anon_mb": {k: round(v, 1) for k, v in sorted(self.jvm_anon_mb.items())},
            "cpu_seconds": {k: round(v, 2) for k, v in sorted(self.cpu_seconds.items())},
            "samples": self.samples,
        }


class TreeSampler:
    """``with TreeSampler(jvm_labels={pid: "shim"}) as s: ...`` then ``s.peaks``."""

    def __init__(
        self, root: int | None = None, *, interval: float = 0.2, jvm_labels: dict[int, str] | None = None
    ) -> None:
        self.root = root if root is not None else os.getpid()
        self.interval = interval
        self.jvm_labels = dict(jvm_labels or {})
        self.peaks = Peaks()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._comms: dict[int, str] = {}
        self._cpu0: dict[int, float] | None = None  # CPU seconds of each process at the start
        self._cpu: dict[int, float] = {}  # last seen CPU seconds of each process of the tree
        self._kind: dict[int, str] = {}

    def _label(self, pid: int, comm: str) -> str | None:
        if comm.startswith("python") or comm.startswith("pyspark"):
            return "python"
        if comm == "java":
            return self.jvm_labels.get(pid, "spark" if pid != self.root else "java")
        return None

    def sample(self) -> None:
        p = self.peaks
        total = 0.0
        count = 0
        kids, cpu = _scan()
        if self._cpu0 is None:
            self._cpu0 = cpu
        for pid in _tree(self.root, kids):
            comm = self._comms.get(pid)
            if comm is None:
                comm = self._comms[pid] = _comm(pid)
            label = self._label(pid, comm)
            if label is not None and pid in cpu:
                self._cpu[pid] = cpu[pid]
                self._kind[pid] = label
            m = _statm(pid)
            if m is None:
                continue
            rss, shared = m[0] / _MB, m[1] / _MB
            if comm.startswith("python") or comm.startswith("pyspark"):
                total += rss
                count += 1
                if pid == self.root:
                    p.python_driver_mb = max(p.python_driver_mb, rss)
                else:
                    p.python_worker_mb = max(p.python_worker_mb, rss)
            elif comm == "java":
                label = self.jvm_labels.get(pid, "spark" if pid != self.root else "java")
                p.jvm_mb[label] = max(p.jvm_mb.get(label, 0.0), rss)
                p.jvm_anon_mb[label] = max(p.jvm_anon_mb.get(label, 0.0), rss - shared)
        p.python_total_mb = max(p.python_total_mb, total)
        p.python_processes = max(p.python_processes, count)
        p.samples += 1
        used: dict[str, float] = {}
        for pid, seconds in self._cpu.items():
            kind = self._kind[pid]
            spent = seconds - self._cpu0.get(pid, 0.0)
            used[kind] = used.get(kind, 0.0) + spent
            if kind == "python" and pid != self.root:
                used["python_workers"] = used.get("python_workers", 0.0) + spent
        p.cpu_seconds = used

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:  # never let a /proc race kill the measurement
                pass
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        try:
            self.sample()
        except Exception:
            pass


def now() -> float:
    return time.perf_counter()
