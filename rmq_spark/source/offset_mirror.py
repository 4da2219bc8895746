"""The consumer-group mirror on a thread of its own, off Spark's batch path: Spark calls the source's ``commit`` inside
its ``walCommit`` timer, between the offset-log write and the next batch, so the brokers' round trips
(QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET) are made here instead. Only ends Spark handed over are mirrored;
when several queue up, the newest wins."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from rmq_spark.client.model import MessageQueue
from rmq_spark.client.outages import RETRY_DOWN_S
from rmq_spark.source.offset_store import OffsetStore

log = logging.getLogger(__name__)


class OffsetMirror:
    """Mirrors each submitted batch end to ``store``'s group in the background. ``close`` flushes what is pending
    within ``flush_timeout`` seconds; an outage is tried again every ``retry_every`` seconds (the store paces each
    broker that is away on the outage clock)."""

    def __init__(self, store: OffsetStore, *, flush_timeout: float, retry_every: float = RETRY_DOWN_S) -> None:
        self.store = store
        self.flush_timeout = flush_timeout
        self.retry_every = retry_every
        self._wake = threading.Condition()
        self._pending: dict[MessageQueue, int] | None = None  # the newest end handed over, not yet in the store
        self._current: dict[MessageQueue, int] = {}  # the end the store was last fed (tried again after an outage)
        self._busy = False
        self._handed = 0  # ends handed over so far
        self._tried = 0  # of those, the ones a finished round has sent (or found their broker away)
        self._closing = False
        self._thread: threading.Thread | None = None

    def submit(self, committed: Mapping[MessageQueue, int]) -> None:
        """Mirror ``committed``, the end of a batch Spark has committed, soon. Ends that queue up merge queue by
        queue into the highest offset: the store only moves offsets forward, so this is what mirroring them one
        after the other would leave, without the round trips of the ones in between."""
        with self._wake:
            if self._closing:
                return
            merged = dict(self._pending or {})
            for mq, offset in committed.items():
                merged[mq] = max(offset, merged.get(mq, offset))
            self._pending = merged
            self._handed += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"rmq-spark-mirror-{self.store.group}", daemon=True
                )
                self._thread.start()
            self._wake.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, until every end handed over has been sent; an end whose broker is
        away stays pending for the retries. False at the deadline."""
        deadline = time.monotonic() + timeout
        with self._wake:
            while self._tried < self._handed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(left)
        return True

    def settled(self) -> bool:
        """Whether every end handed over is stored on the brokers."""
        with self._wake:
            idle = self._pending is None and not self._busy
        return idle and self.store.settled()

    def close(self) -> bool:
        """Flush what is pending, waiting at most ``flush_timeout`` seconds; True when everything is stored, else
        a warning says what was not mirrored."""
        with self._wake:
            self._closing = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(self.flush_timeout)
        if self.settled():
            return True
        with self._wake:
            pending = set(self._pending or ()) | set(self.store.unstored())
        log.warning(
            "rocketmq source: the offsets of %d queue(s) of consumer group %r were not mirrored to the "
            "brokers within %.1f s of stop (%s); the group shows them behind the checkpoint until the "
            "query runs again, which mirrors its last committed batch when it starts",
            len(pending),
            self.store.group,
            self.flush_timeout,
            ", ".join(map(str, sorted(pending)[:5])) + (" ..." if len(pending) > 5 else ""),
        )
        return False

    def _run(self) -> None:
        while True:
            with self._wake:
                if self._pending is None and not self._closing:
                    self._wake.wait(None if self.store.settled() else self.retry_every)
                closing = self._closing
                if self._pending is not None:
                    self._current, self._pending = self._pending, None
                taken = self._handed
                end = self._current
                self._busy = True
            try:
                self._mirror(end)
            finally:
                with self._wake:
                    self._busy = False
                    self._tried = taken
                    self._wake.notify_all()
            if closing:
                return

    def _mirror(self, end: dict[MessageQueue, int]) -> None:
        """One round: read the stored offsets of queues seen first (so that none is moved back), then send what
        changed. The store never raises for a broker that is away; anything else is logged, and the round is
        tried again."""
        if not end:
            return
        try:
            self.store.load(end)
            self.store.update_all(end)
            self.store.persist_all()
        except Exception:  # noqa: BLE001 - the thread must outlive a bug; the next round tries again
            log.exception("rocketmq source: mirroring offsets to consumer group %r failed", self.store.group)
            time.sleep(self.retry_every)
