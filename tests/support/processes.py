"""Child processes of tests, killed as machines die: a whole process group at once (a Python driver with its Spark
JVM and that JVM's Python workers; a Spark worker with the executors it launched)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def running_in_group(group: int) -> list[int]:
    """The processes of ``group`` that are not yet dead (zombies are: the container's init may never reap them)."""
    running = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[2]) == group and fields[0] not in "ZX":
            running.append(int(stat.parent.name))
    return running


def kill_group(proc: subprocess.Popen, sig: signal.Signals = signal.SIGKILL, timeout: float = 30) -> None:
    """Send ``sig`` to the process group that ``proc`` leads (started with ``start_new_session=True``) and wait
    until none of it runs: killing only a Python driver leaves its JVM running its queries, and writing their
    checkpoints, until the JVM notices its parent is gone."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    proc.wait(timeout=timeout)
    deadline = time.monotonic() + timeout
    while running_in_group(proc.pid):
        assert time.monotonic() < deadline, f"processes of group {proc.pid} outlived signal {sig}"
        time.sleep(0.05)
