"""A coarser timer slack for the suite's processes (Linux's per-thread PR_SET_TIMERSLACK, 50 us by default).

The brokers' idle loops wake on timeouts of 1-10 ms (RocketMQ's ReputMessageService sleeps 1 ms between looks at
the commit log; pop, timer and fast-failure services 5-100 ms), and an idle two-broker embedded cluster spent 0.2
of a core on them alone, through the whole run. With 2 ms of slack the kernel may join such a wake-up to another
within 2 ms: the same cluster idles at 0.13 of a core. A thread's slack is inherited by the threads and processes
it starts, so setting it in pytest's main thread, before any starts, reaches every JVM (brokers, Spark's) and
Python worker of the run. A wait that is woken (a notified pull, a message that arrives) is not delayed; only a
timeout may end up to 2 ms late, which no test measures. The benchmarks run without it."""

from __future__ import annotations

import ctypes
import sys

PR_SET_TIMERSLACK = 29
SLACK_NS = 2_000_000


def coarsen(slack_ns: int = SLACK_NS) -> None:
    """Set the calling thread's timer slack (a no-op off Linux, or where prctl refuses)."""
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(slack_ns), 0, 0, 0)
