"""Loopback ports for servers that must come back on the same port after a restart."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_HANDED_OUT: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a Java server socket binds
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def server_port(*offsets: int) -> int:
    """A free loopback port ``p`` such that every ``p + d`` for ``d`` in ``offsets`` is free too, below the kernel's
    ephemeral range (no outgoing connection can take it while its server is down) and not handed out before by
    this process."""
    low, high = 10000, _ephemeral_low() - 4
    if high - low < 2000:
        high = 65000
    for _ in range(2000):
        p = random.randrange(low, high)
        wanted = [p, *(p + d for d in offsets)]
        if not _HANDED_OUT.intersection(wanted) and all(_free(q) for q in wanted):
            _HANDED_OUT.update(wanted)
            return p
    raise OSError(f"no free loopback port with free neighbours {offsets} between {low} and {high}")
