"""Waiting in tests: poll a condition until it holds, failing early when what it waits on has died."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    condition: Callable[[], object],
    timeout: float,
    what: str,
    alive: Callable[[], None] = lambda: None,
    poll: float = 0.1,
) -> None:
    """Return once ``condition()`` is true; ``alive()`` raises when what the test waits on has stopped; fail after
    ``timeout`` seconds, naming ``what``."""
    deadline = time.monotonic() + timeout
    while not condition():
        alive()
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(poll)
