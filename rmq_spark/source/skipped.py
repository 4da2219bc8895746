"""The messages a stream skipped under failOnDataLoss=false (deleted by retention before they were read, or cut from a
queue's tail by an election after they were read), counted by
the driver when it plans a batch: logged, and reported with the brokers' latest offsets, so they reach the query's
progress (``rmq_spark.source.progress.query_skipped``)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence

from rmq_spark.client.model import MessageQueue
from rmq_spark.source.offsets import QueueRange, offsets_to_json

log = logging.getLogger(__name__)

# the key of the counts in the reported latest offsets (no topic name starts with "$")
SKIPPED_KEY = "$skipped"


class SkippedMessages:
    """Per queue, the messages skipped at planning since this stream reader started; ``version`` changes with
    them."""

    def __init__(self) -> None:
        self._counts: dict[MessageQueue, int] = {}
        self.version = 0

    def count(
        self,
        begin: Mapping[MessageQueue, int],
        ends: Mapping[MessageQueue, int],
        ranges: Iterable[QueueRange],
        gaps: Mapping[MessageQueue, Sequence[tuple[int, int]]] | None = None,
        recreated: Collection[MessageQueue] = (),
    ) -> int:
        """Add what planning skipped of a batch: per queue of ``ends`` read from ``begin``, the offsets before its
        planned range's start (all of them when no range is left). A cut queue (end below its start) read on from
        its end skips the cut offsets [end, start), one read on from the messages stored after the cut skips
        [their first offset, start); one of ``recreated``, read again from its first offset, skips nothing known.
        ``gaps`` (a remapped logic queue's offsets that hold no message) are not skipped messages.
        Returns the batch's count, logged when not 0."""
        starts: dict[MessageQueue, int] = {}
        for r in ranges:
            starts[r.queue] = min(r.start, starts.get(r.queue, r.start))
        skipped = 0
        for mq, end in ends.items():
            b = begin.get(mq)
            if b is None or mq in recreated:
                continue
            if end < b:
                n = b - min(starts.get(mq, end), end)
            else:
                first = min(starts.get(mq, end), end)
                n = first - b - sum(max(0, min(high, first) - max(low, b)) for low, high in (gaps or {}).get(mq, ()))
            if n > 0:
                self._counts[mq] = self._counts.get(mq, 0) + n
                skipped += n
        if skipped:
            self.version += 1
            log.warning(
                "rocketmq source: %d messages were skipped planning this batch (deleted before they were "
                "read, or cut by an election, failOnDataLoss=false), %d since the query started",
                skipped,
                sum(self._counts.values()),
            )
        return skipped

    def report(self) -> dict[str, dict]:
        """The counts for reportLatestOffset: ``{SKIPPED_KEY: {topic: {"broker/queue": n}}}``, or nothing."""
        return {SKIPPED_KEY: offsets_to_json(self._counts)} if self._counts else {}
