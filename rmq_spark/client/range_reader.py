"""Read one queue's offset range ``[start, end)`` exactly, with several pulls in flight.

Queue offsets are dense, so the range is cut into slots of ``slot`` offsets and a pull is sent for each of the next
``depth`` slots at once. A pull answers from its slot's first offset; it may stop short (broker size limits, disk
reads) — the rest of the slot is pulled again before the next slot is used — or, with a filter, run past the slot —
messages past the slot are dropped because the next slot's pull returns them. Each slot's messages therefore come
exactly once and in order.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Iterator, Protocol

from rmq_spark.client.errors import ConnectionLostError, DataLossError, RequestTimeoutError, RocketMQError
from rmq_spark.client.model import Message, MessageQueue, PullResult, PullStatus

log = logging.getLogger(__name__)

SLOT = 32  # the broker's default maximum messages per pull


def tag_set(expression: str) -> frozenset[str] | None:
    """The tags of a TAG expression (``TagA || TagB``); None for ``*`` (every message)."""
    tags = frozenset(t.strip() for t in (expression or "*").split("||") if t.strip())
    return None if not tags or "*" in tags else tags


class _Pending(Protocol):
    def result(self) -> PullResult: ...


class Puller(Protocol):
    def pull_async(self, mq: MessageQueue, offset: int, max_nums: int = SLOT, *, group: str = ...,
                   expression: str = ..., expression_type: str = ..., suspend_ms: int = ...) -> _Pending: ...


@dataclass(frozen=True)
class RangeChunk:
    """What one pull brought (the raw message block, or the decoded ``messages`` of a transport that delivers
    them decoded) and the offsets ``[low, high)`` of it that belong to the range."""

    body: bytes
    low: int
    high: int
    messages: tuple[Message, ...] | None = None


class RangeReader:
    """Iterate the pulled blocks of ``[start, end)``; ``lost`` counts offsets skipped for data loss."""

    def __init__(self, client: Puller, mq: MessageQueue, start: int, end: int, *, depth: int = 8,
                 slot: int = SLOT, group: str, expression: str = "*", expression_type: str = "TAG",
                 fail_on_data_loss: bool = True, max_empty_wait: float = 10.0, retry_for: float = 60.0) -> None:
        if start < 0 or end < start:
            raise ValueError(f"bad range [{start}, {end}) for {mq}")
        self.client, self.mq, self.start, self.end = client, mq, start, end
        self.depth, self.slot = max(1, depth), max(1, slot)
        self.pull_kw = {"group": group, "expression": expression, "expression_type": expression_type}
        self.fail_on_data_loss = fail_on_data_loss
        self.max_empty_wait = max_empty_wait
        self.retry_for = retry_for
        self.lost = 0

    def _send(self, offset: int, until: int) -> tuple[int, int, _Pending]:
        n = min(self.slot, until - offset)
        return offset, offset + n, self.client.pull_async(self.mq, offset, n, **self.pull_kw)

    def __iter__(self) -> Iterator[RangeChunk]:
        inflight: deque[tuple[int, int, _Pending]] = deque()
        next_slot = self.start
        empty_since: float | None = None
        broken_since: float | None = None
        while inflight or next_slot < self.end:
            try:
                while len(inflight) < self.depth and next_slot < self.end:
                    entry = self._send(next_slot, self.end)
                    inflight.append(entry)
                    next_slot = entry[1]
                low, high, pending = inflight[0]
                result = pending.result()
            except (ConnectionLostError, RequestTimeoutError) as e:
                # The broker went away (restart, network): pull again from the first unread offset until it is
                # back, for at most `retry_for` seconds.
                now = time.monotonic()
                broken_since = broken_since or now
                if now - broken_since > self.retry_for:
                    raise
                resume = inflight[0][0] if inflight else next_slot
                log.warning("%s: pull at offset %d failed (%s); retrying", self.mq, resume, e)
                time.sleep(min(1.0, 0.1 + (now - broken_since) / 4))
                inflight.clear()
                next_slot = resume
                continue
            inflight.popleft()
            broken_since = None
            status = result.status
            if status is PullStatus.FOUND:
                covered = result.next_begin_offset
                yield RangeChunk(result.body, low, min(high, covered), result.messages)
            elif status is PullStatus.NO_MATCHED_MSG:
                covered = result.next_begin_offset
            elif status is PullStatus.NO_NEW_MSG:
                # The broker has nothing at `low` yet, though the plan said it had: wait briefly, then fail.
                now = time.monotonic()
                empty_since = empty_since or now
                if now - empty_since > self.max_empty_wait:
                    raise RocketMQError(f"{self.mq}: offset {low} is not on the broker (max offset "
                                        f"{result.max_offset}), though the planned range ends at {self.end}")
                time.sleep(0.05)
                covered = low
            else:  # OFFSET_ILLEGAL
                covered = self._offset_moved(low, high, result)
            if covered <= low and status is not PullStatus.NO_NEW_MSG:
                raise RocketMQError(f"{self.mq}: the broker answered a pull at offset {low} with next offset "
                                    f"{covered} ({status.value}); the queue does not advance")
            if status is not PullStatus.NO_NEW_MSG:
                empty_since = None
            if covered < high:
                inflight.appendleft(self._send(covered, high))

    def _offset_moved(self, low: int, high: int, result: PullResult) -> int:
        if result.min_offset > low:
            available = result.min_offset
            what = (f"{self.mq}: messages from offset {low} are gone from the broker (its first available offset "
                    f"is {available})")
            if self.fail_on_data_loss:
                raise DataLossError(what + "; they were deleted before they were read. Set failOnDataLoss=false "
                                           "to skip to the first available offset instead.")
            covered = min(available, high)
            self.lost += covered - low
            log.warning("%s; skipping offsets [%d, %d) (failOnDataLoss=false)", what, low, covered)
            return covered
        raise RocketMQError(f"{self.mq}: offset {low} is beyond what the broker holds "
                            f"[{result.min_offset}, {result.max_offset}); the queue may have been reset")
