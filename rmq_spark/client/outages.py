"""Log each outage once: a warning when a broker or name server first stops answering, a line when it is back,
and nothing for the polls in between (the streaming driver asks every few milliseconds)."""
from __future__ import annotations

import logging
import threading
import time


class OutageLog:
    """What is down now, by name (``broker broker-b``, ``the name servers``), since when."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._down: dict[str, float] = {}
        self._lock = threading.Lock()

    def down(self, who: str, consequence: str, error: BaseException | str) -> None:
        """``who`` failed; logged only when it was not already down."""
        with self._lock:
            if who in self._down:
                return
            self._down[who] = time.monotonic()
        self._log.warning("%s did not answer (%s); %s", who, error, consequence)

    def up(self, who: str) -> None:
        """``who`` answered; logged when it had been down."""
        with self._lock:
            since = self._down.pop(who, None)
        if since is not None:
            self._log.warning("%s answers again after %.1f s", who, time.monotonic() - since)

    def is_down(self, who: str) -> bool:
        with self._lock:
            return who in self._down
