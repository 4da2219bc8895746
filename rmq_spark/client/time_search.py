"""Offsets by store time where the broker's search has no boundary type (RocketMQ 4.x): its answer is the offset of
the message whose store time is nearest the time, on either side of it (the last message for a time past them all),
so the first message stored at or after the time is looked for around it, as Kafka's offsetsForTimes defines it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmq_spark.client.model import SLOT, MessageQueue

if TYPE_CHECKING:
    from rmq_spark.client.base import BaseClient


@dataclass(frozen=True)
class NearOffset:
    """A timestamp search answered without a boundary: an offset stored near the time, not the boundary itself."""

    offset: int


def first_stored_at_or_after(
    client: BaseClient, mq: MessageQueue, timestamp: int, near: int, first: int, end: int
) -> int:
    """The first offset in ``[first, end)`` of ``mq`` whose message was stored at or after ``timestamp`` ms, ``end``
    where none was (store times grow along a queue). Read from ``near`` forward while the messages are older, else
    backward in growing windows until an older one is found."""
    at = min(max(near, first), end)
    while at < end:  # forward from near: past the older messages
        window = min(at + SLOT, end)
        newer = _first_newer(client, mq, at, window, timestamp)
        if newer is None:
            if window == end:
                return end
            at = window
        elif newer > at:
            return newer
        else:
            break  # the message at ``at`` is already new enough: look back
    span = SLOT
    while at > first:
        begin = max(first, at - span)
        newer = _first_newer(client, mq, begin, at, timestamp)
        if newer is not None and newer > begin:
            return newer
        if newer is None:  # the whole window is older
            return at
        at, span = begin, span * 2
    return at


def _first_newer(client: BaseClient, mq: MessageQueue, begin: int, end: int, timestamp: int) -> int | None:
    """The first offset in ``[begin, end)`` stored at or after ``timestamp``; None where every message is older."""
    for m in client.read_range(mq, begin, end, fail_on_data_loss=False):
        if m.store_timestamp >= timestamp:
            return m.queue_offset
    return None
