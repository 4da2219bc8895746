"""Processes started by fork + exec from a process whose gRPC is busy (PySpark starts its JVM so) must start: with
gRPC core's fork handlers on, some of them crash before exec (grpc/grpc#43055). Importing rmq_spark turns them off."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import sys, threading
import rmq_spark  # noqa: F401 - before grpc, as in any process that uses our gRPC transport
import grpc

channel = grpc.insecure_channel("127.0.0.1:1")  # nothing listens: gRPC's poller keeps trying
stop = threading.Event()

def busy():
    while not stop.is_set():
        try:
            grpc.channel_ready_future(channel).result(timeout=0.05)
        except grpc.FutureTimeoutError:
            pass

threading.Thread(target=busy, daemon=True).start()
failed = 0
for _ in range(int(sys.argv[1])):
    # preexec_fn makes subprocess fork (not vfork), so fork handlers run, as in PySpark's launch of its JVM
    child = subprocess.run(["/bin/true"], preexec_fn=lambda: None, capture_output=True)
    failed += child.returncode != 0 or bool(child.stderr)
stop.set()
print(failed)
"""


def test_children_of_a_process_using_grpc_start():
    out = subprocess.run(
        [sys.executable, "-c", "import subprocess\n" + CHILD, "300"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "0", f"{out.stdout.strip()} of 300 children failed:\n{out.stderr[-2000:]}"
