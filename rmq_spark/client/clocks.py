"""The host's clock, and how far the brokers' clocks may run apart from it: a message's store time is the clock of
the broker that stored it, which is compared with times this host took."""

from __future__ import annotations

import time

# How far a broker's clock may run ahead of or behind this host's.
CLOCK_SLACK_MS = 5_000


def now_ms() -> int:
    """Milliseconds since the epoch now, by this host's clock."""
    return int(time.time() * 1000)
