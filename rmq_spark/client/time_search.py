"""Offsets by store time: per queue, the first (or last) message stored at or after (at or before) a time, asked of
the brokers in one fan-out. Where the broker's search has no boundary type (RocketMQ 4.x) its answer is the offset of
the message whose store time is nearest the time, on either side of it (the last message for a time past them all),
so the first message stored at or after the time is looked for around it by reading the queue there, as Kafka's
offsetsForTimes defines it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from rmq_spark.client.defaults import DEFAULT_RETRY_TIMEOUT
from rmq_spark.client.errors import RETRYABLE, AuthError
from rmq_spark.client.fan_out import Answers, gather
from rmq_spark.client.model import SLOT, Boundary, Message, MessageQueue
from rmq_spark.client.transport import Bursts, Call


@dataclass(frozen=True)
class NearOffset:
    """A timestamp search answered without a boundary: an offset stored near the time, not the boundary itself."""

    offset: int


class RangeReads(Protocol):
    """What reads the messages around a near offset."""

    def read_range(
        self, mq: MessageQueue, start: int, end: int, *, fail_on_data_loss: bool, retry_timeout: float
    ) -> Iterator[Message]: ...


class TimeSearcher(RangeReads, Bursts, Protocol):
    """What a time search asks: the brokers' search, the queues' first and end offsets, their messages."""

    def _search_offset_call(self, mq: MessageQueue, timestamp: int, boundary: Boundary) -> Call: ...

    def refuses_permission(self, e: AuthError) -> bool: ...

    def min_offsets(self, mqs: Iterable[MessageQueue], *, partial: bool) -> Answers: ...

    def max_offsets(self, mqs: Iterable[MessageQueue], *, partial: bool) -> Answers: ...


def search_offsets(
    client: TimeSearcher,
    mqs: Iterable[MessageQueue],
    timestamp: int,
    boundary: Boundary = Boundary.LOWER,
    *,
    partial: bool = False,
) -> Answers:
    """Per queue, the offset of the first (``LOWER``) or last (``UPPER``) message stored at or after / at or
    before ``timestamp`` ms, as the broker's SEARCH_OFFSET_BY_TIMESTAMP defines it."""
    boundary = Boundary(boundary)
    mqs = list(mqs)
    try:
        answers = gather(
            client,
            "offsets by timestamp",
            mqs,
            lambda mq: client._search_offset_call(mq, int(timestamp), boundary),
            partial=partial,
        )
    except AuthError as e:
        if not client.refuses_permission(e):
            raise
        grants = " and ".join(f"`Get` on `Topic:{t}`" for t in sorted({mq.topic for mq in mqs}))
        raise AuthError(
            f"a start or end by timestamp searches the queues by time, which needs permission {grants} "
            f"({e}): grant it (mqadmin createAcl or updateAcl with -a Get), or start by offsets "
            "(startingOffsets earliest, latest or committed need only `Sub`)",
            code=e.code,
            remark=e.remark,
        ) from e
    near = sorted(mq for mq, v in answers.items() if isinstance(v, NearOffset))
    if not near:
        return answers
    out = answers.merge(_boundaries(client, answers, near, int(timestamp), boundary, partial))
    for mq in out.failed:
        out.pop(mq, None)
    return out


def _boundaries(
    client: TimeSearcher,
    near: Mapping[MessageQueue, NearOffset],
    mqs: list[MessageQueue],
    timestamp: int,
    boundary: Boundary,
    partial: bool,
) -> Answers:
    """The boundary offsets of ``mqs``, whose broker answered an offset near the time (a NearOffset)."""
    firsts = client.min_offsets(mqs, partial=partial)
    ends = client.max_offsets([mq for mq in mqs if mq in firsts], partial=partial)
    out = Answers(failed={**firsts.failed, **ends.failed})
    # the last message stored at or before the time is the one before the first stored after it
    after = timestamp if boundary is Boundary.LOWER else timestamp + 1
    for mq in ends:
        try:
            found = first_stored_at_or_after(client, mq, after, near[mq].offset, firsts[mq], ends[mq])
        except RETRYABLE as e:
            if not partial:
                raise
            out.failed[mq] = e
            continue
        out[mq] = found if boundary is Boundary.LOWER else max(found - 1, firsts[mq])
    return out


def first_stored_at_or_after(
    client: RangeReads,
    mq: MessageQueue,
    timestamp: int,
    near: int,
    first: int,
    end: int,
    retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
) -> int:
    """The first offset in ``[first, end)`` of ``mq`` whose message was stored at or after ``timestamp`` ms, ``end``
    where none was (store times grow along a queue). Read from ``near`` forward while the messages are older, else
    backward in growing windows until an older one is found; a read waits up to ``retry_timeout`` seconds for a
    broker that goes away."""
    at = min(max(near, first), end)
    while at < end:  # forward from near: past the older messages
        window = min(at + SLOT, end)
        newer = _first_newer(client, mq, at, window, timestamp, retry_timeout)
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
        newer = _first_newer(client, mq, begin, at, timestamp, retry_timeout)
        if newer is not None and newer > begin:
            return newer
        if newer is None:  # the whole window is older
            return at
        at, span = begin, span * 2
    return at


def _first_newer(
    client: RangeReads, mq: MessageQueue, begin: int, end: int, timestamp: int, retry_timeout: float
) -> int | None:
    """The first offset in ``[begin, end)`` stored at or after ``timestamp``; None where every message is older."""
    for m in client.read_range(mq, begin, end, fail_on_data_loss=False, retry_timeout=retry_timeout):
        if m.store_timestamp >= timestamp:
            return m.queue_offset
    return None
