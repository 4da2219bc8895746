"""A queue whose end fell below the offset a query had reached: cut or recreated (docs/DESIGN.md §10).

An election cuts a queue's tail when the replica elected lagged behind the master that died (asynchronous
replication; a DLedger leader change or a slave promoted by hand does the same): the queue keeps its first messages,
which the query read, and stores new ones from its new end on. A topic deleted and recreated starts its queues again
at offset 0 with messages stored after the deletion. The brokers answer what tells them apart: the store time of the
queue's first held message. Every message a query delivered from a queue was stored before the query planned the
batch that read it; a queue whose first message was stored after the last such batch holds nothing the query
delivered, so it is read again from its first offset. Any other is read on from its new end: when in doubt, nothing
is delivered twice, and the cut is reported as lost."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.model import MessageQueue

log = logging.getLogger(__name__)

# How far the brokers' clocks may run ahead of the driver's: a first message stored within this of the bound is not
# taken for a recreated queue's.
CLOCK_SLACK_MS = 5_000
# How long the read of a queue's first message waits for a broker that goes away, in seconds.
READ_WAIT_S = 10.0


def now_ms() -> int:
    return int(time.time() * 1000)


class ReadTimes:
    """Per queue, when (ms) this reader last planned a batch that read it, else when the reader was made: every
    message the query delivered from the queue, in this process or an earlier one, was stored before then. One int
    per queue that moved."""

    def __init__(self) -> None:
        self._made = now_ms()
        self._at: dict[MessageQueue, int] = {}

    def note(self, begin: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> None:
        """A batch from ``begin`` to ``end`` was planned now."""
        at = now_ms()
        for mq, e in end.items():
            if e > begin.get(mq, e):
                self._at[mq] = at

    def bound(self, mq: MessageQueue) -> int:
        return self._at.get(mq, self._made)


def recreated(
    client: BaseClient,
    cut: Iterable[MessageQueue],
    firsts: Mapping[MessageQueue, int],
    ends: Mapping[MessageQueue, int],
    times: ReadTimes | None,
) -> set[MessageQueue]:
    """Those of ``cut`` (queues whose end fell below the query's offset) proven recreated: their first message
    (at ``firsts``, below ``ends``) was stored after ``times``' bound. Without ``times`` (a batch query, which
    read nothing before) or a first message that cannot be read now, none is."""
    found: set[MessageQueue] = set()
    if times is None:
        return found
    for mq in sorted(cut):
        first, end = firsts.get(mq), ends[mq]
        if first is None or first >= end:
            continue  # nothing held: read on from the end, which is its first offset too
        try:
            message = next(iter(client.read_range(mq, first, first + 1, retry_timeout=READ_WAIT_S)), None)
        except RocketMQError as e:
            log.info("rocketmq source: the first message of %s cannot be read now (%s); reading on from its end", mq, e)
            continue
        if message is not None and message.store_timestamp > times.bound(mq) + CLOCK_SLACK_MS:
            found.add(mq)
    return found
