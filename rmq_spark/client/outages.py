"""Log each outage once: a warning when a broker or name server first stops answering, a line when it is back,
and nothing for the polls in between (the streaming driver asks every few milliseconds); and pace the calls to what
is down, so that a caller that runs every few milliseconds retries it on a clock, not on every call."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

# How often a call to something that is down is tried again by callers that ask ``due`` first.
RETRY_DOWN_S = 5.0


def broker_group(name: str) -> str:
    """How the outage log names broker group ``name`` (any member answering reads)."""
    return f"broker {name}"


def master_of(name: str) -> str:
    """How the outage log names the master of broker group ``name``."""
    return f"the master of broker {name}"


class OutageLog:
    """What is down now, by name (``broker broker-b``, ``the name servers``), since when."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._down: dict[str, float] = {}
        self._tried: dict[str, float] = {}  # the last try of each thing down
        self._lock = threading.Lock()

    def down(self, who: str, consequence: str, error: BaseException | str) -> None:
        """``who`` failed; logged only when it was not already down."""
        with self._lock:
            if who in self._down:
                return
            self._down[who] = self._tried[who] = time.monotonic()
        self._log.warning("%s did not answer (%s); %s", who, error, consequence)

    def up(self, who: str) -> None:
        """``who`` answered; logged when it had been down."""
        with self._lock:
            since = self._down.pop(who, None)
            self._tried.pop(who, None)
        if since is not None:
            self._log.warning("%s answers again after %.1f s", who, time.monotonic() - since)

    def report(
        self,
        brokers: Iterable[str],
        failed: Mapping[str, BaseException | str],
        who: Callable[[str], str],
        consequence: str,
    ) -> None:
        """The outcome of asking each of ``brokers`` (named in the log by ``who``): down with its error for those in
        ``failed``, up for the others."""
        for broker in sorted(set(brokers)):
            if broker in failed:
                self.down(who(broker), consequence, failed[broker])
            else:
                self.up(who(broker))

    def is_down(self, who: str) -> bool:
        """Whether ``who`` failed and has not answered since."""
        with self._lock:
            return who in self._down

    def due(self, who: str, every: float = RETRY_DOWN_S) -> bool:
        """Whether ``who`` may be asked now: always while it is up; while it is down, once per ``every`` seconds
        (this call counts as the try)."""
        with self._lock:
            if who not in self._down:
                return True
            now = time.monotonic()
            if now - self._tried[who] < every:
                return False
            self._tried[who] = now
            return True
