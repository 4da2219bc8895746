"""A queue whose end fell below the offset a query had reached: cut or recreated (docs/DESIGN.md §10).

An election cuts a queue's tail when the replica elected lagged behind the master that died (asynchronous
replication; a DLedger leader change or a slave promoted by hand does the same): the queue keeps its first messages,
which the query read, and stores new ones from the cut on, at offsets the query had read before. By the time the
query sees the queue's end again, producers may have stored new messages there: the end is then above the cut, and
the new messages below it look like messages read. A topic deleted and recreated starts its queues again at offset 0
with messages stored after the deletion.

The brokers answer what tells them apart: when and by which broker each message was stored. Every message a query
delivered from a queue was stored before the query planned the batch that read it (the bound); a message stored
after the bound by the queue's master now (the elected one, as the route names it), or well after it
(CLOCK_SLACK_MS) by any broker, is new. A queue keeps its messages in store order, so the first new message is found
by bisection, a few single-message pulls: the query reads on from there, and the cut range is reported as lost. A
queue whose first message is new was recreated (or cut to nothing): it is read again from its first offset. When a
message cannot be read, the queue is read on from its end: nothing is delivered twice, and the cut is reported."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from rmq_spark.client.base import BaseClient
from rmq_spark.client.clocks import CLOCK_SLACK_MS, now_ms
from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.model import MASTER_ID, Message, MessageQueue

log = logging.getLogger(__name__)

# How long the read of a queue's first message waits for a broker that goes away, in seconds.
READ_WAIT_S = 10.0


class ReadTimes:
    """Per queue, when (ms) the last batch that read it was committed in this process (its tasks had read every
    message they delivered by then, even those that read on through an election), else when the batch before the
    one being planned was planned (its end's ``PLANNED_AT_KEY``, kept in Spark's checkpoint), else when the reader
    was made: every message the query delivered from the queue was stored before then. One int per queue that
    moved."""

    def __init__(self) -> None:
        self._made = now_ms()
        self._at: dict[MessageQueue, int] = {}
        self._reading: set[MessageQueue] = set()  # the queues the batch planned last reads
        self.last: int | None = None  # when the last batch was planned

    def note(self, begin: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> None:
        """A batch from ``begin`` to ``end`` was planned now."""
        self.last = now_ms()
        self._reading = {mq for mq, e in end.items() if e > begin.get(mq, e)}

    def committed(self) -> None:
        """The batch planned last was committed now."""
        at = now_ms()
        for mq in self._reading:
            self._at[mq] = at
        self._reading = set()

    def bound(self, mq: MessageQueue, recorded: int | None = None) -> int:
        """The bound for ``mq``; ``recorded``: when the batch that ends at the start was planned, if known."""
        at = self._at.get(mq)
        if at is not None:
            return at
        return self._made if recorded is None else min(recorded, self._made)


def _stored(client: BaseClient, mq: MessageQueue, offset: int) -> Message | None:
    """The message at ``offset`` of ``mq``, read from its broker; None when none is there."""
    return next(iter(client.read_range(mq, offset, offset + 1, retry_timeout=READ_WAIT_S)), None)


def _master_address(client: BaseClient, mq: MessageQueue) -> str | None:
    """The address the route gives ``mq``'s master now, if it can be read."""
    try:
        data = client.route(mq.topic).broker(mq.broker_name)
    except RocketMQError:
        return None
    return None if data is None else data.addresses.get(MASTER_ID)


def first_new(client: BaseClient, mq: MessageQueue, first: int, end: int, bound: int) -> int | None:
    """The first offset in ``[first, end)`` of ``mq`` whose message was stored after the cut (see the module's
    rule, ``bound`` the time of the query's last read of the queue), or None when none was or a message cannot be
    read now (logged)."""
    if first >= end:
        return None
    elected = _master_address(client, mq)

    def new(m: Message | None) -> bool:
        if m is None:
            raise RocketMQError("a message the search read is not there")
        return m.store_timestamp > bound + CLOCK_SLACK_MS or (
            m.store_timestamp > bound and elected is not None and m.store_host == elected
        )

    try:
        if not new(_stored(client, mq, end - 1)):
            return None
        low, high = first, end - 1  # the answer is in [low, high]: the newest message is new
        while low < high:
            middle = (low + high) // 2
            if new(_stored(client, mq, middle)):
                high = middle
            else:
                low = middle + 1
        return low
    except RocketMQError as e:
        log.warning(
            "rocketmq source: the messages of %s cannot be read now (%s): it is read on from its end, and messages "
            "stored after the cut below that end, if any, are skipped without being counted",
            mq,
            e,
        )
        return None


def all_new(resume: int | None, first: int | None) -> bool:
    """Whether a cut queue whose messages stored after the cut begin at ``resume`` holds only such messages (from
    its first offset ``first``): recreated, or cut to nothing, it is read again from its first offset."""
    return resume is not None and first is not None and resume <= first


def new_messages(
    client: BaseClient,
    cut: Iterable[MessageQueue],
    firsts: Mapping[MessageQueue, int],
    ends: Mapping[MessageQueue, int],
    times: ReadTimes | None,
    recorded: int | None = None,
) -> dict[MessageQueue, int]:
    """Of ``cut`` (queues whose end fell below the query's offset), those holding messages stored after the cut,
    with the first offset of those (``first_new``); one at its first offset in ``firsts`` was recreated.
    ``recorded``: when the batch that ends at the query's offsets was planned (``ReadTimes.bound``). Without
    ``times`` (a batch query, which read nothing before) or a first offset, none is."""
    found: dict[MessageQueue, int] = {}
    if times is None:
        return found
    for mq in sorted(cut):
        first = firsts.get(mq)
        if first is None:
            continue
        offset = first_new(client, mq, first, ends[mq], times.bound(mq, recorded))
        if offset is not None:
            found[mq] = offset
    return found
