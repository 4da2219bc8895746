"""Client-side message ids (the UNIQ_KEY property), in the layout of the Java client's MessageClientIDSetter."""

from __future__ import annotations

import datetime
import os
import threading

from rmq_spark.client.clocks import now_ms


def month_bounds(at_ms: int) -> tuple[int, int]:
    """When the month (local time) of ``at_ms`` began and when the next begins, in ms since the epoch."""
    now = datetime.datetime.fromtimestamp(at_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


def new_prefix() -> str:
    """A new id prefix: a random fake IP, this process's pid and a random int, as 20 upper-case hex digits."""
    return (os.urandom(4) + (os.getpid() & 0xFFFF).to_bytes(2, "big") + os.urandom(4)).hex().upper()


class _UniqueIds:
    """MessageClientIDSetter layout: 4-byte IP | int16 pid | int32 random | int32 ms since month start |
    int16 counter, as 32 upper-case hex chars. The IP is a random per-process "fake IP" (Java's fallback),
    so no DNS look-up. The (ms, counter) pair only moves forward within a process, and the random part is
    redrawn at each month start and in a forked child, so ids never repeat within a process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._prefix = new_prefix()
        self._month_start_ms, self._next_month_ms = month_bounds(self._now_ms())
        self._last_diff = -1
        self._counter = 0

    _now_ms = staticmethod(now_ms)  # the clock (tests set their own)

    def next(self) -> str:
        with self._lock:
            now = self._now_ms()
            if now >= self._next_month_ms:
                self._reset()
            diff = max(now - self._month_start_ms, self._last_diff, 0)
            counter = self._counter
            if diff == self._last_diff and counter == 0:
                diff += 1  # the counter wrapped within one millisecond: move time forward instead
            self._counter = (counter + 1) & 0xFFFF
            self._last_diff = diff
        return f"{self._prefix}{diff & 0xFFFFFFFF:08X}{counter:04X}"

    def after_fork(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._reset()


_ids = _UniqueIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ids.after_fork)


def new_unique_id() -> str:
    """A new UNIQ_KEY: 32 upper-case hex chars, unique within this process (MessageClientIDSetter format)."""
    return _ids.next()
