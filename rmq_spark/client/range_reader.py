"""Read one queue's offset range ``[start, end)`` exactly, with several pulls in flight.

Queue offsets are dense, so the range is cut into slots of ``slot`` offsets and a pull is sent for each of the next
``depth`` slots at once. A pull answers from its slot's first offset; it may stop short (broker size limits, disk
reads) — the rest of the slot is pulled again before the next slot is used — or, with a filter, run past the slot —
messages past the slot are dropped because the next slot's pull returns them. Each slot's messages therefore come
exactly once and in order. A second pull for a slot waits for the first, so slots are sized to what the broker
serves in one pull: a short answer (its byte limit: 256 KiB from memory; its limits from disk: 8 messages, 64 KiB)
shrinks the slot to what came (the same short count twice caps it there for the rest of the read); within the cap
the slot follows the messages' size (larger messages, smaller slots) and grows back after a run of full answers.

Every answer is judged by the fault model (DESIGN.md §10). A broker that does not answer, asks to back off or
asks to pull the same offset again (PULL_RETRY_IMMEDIATELY that is not a filter span) is retried with backoff until
``retry_timeout``. Data is lost only when the broker proves it: its first held offset is past the one asked for,
or its last offset fell below it. A gap in an unfiltered read (the first record returned lies past the offset asked
for) is never accepted as it stands: it is data loss when the queue's first offset moved past it, else the offset
is pulled again (a commit-log file being deleted under the consume queue answers that way until the broker
corrects the queue). Compaction topics (``sparse``) have gaps by design.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Protocol

from rmq_spark.client.errors import RETRYABLE, BrokerUnavailableError, DataLossError, RocketMQError
from rmq_spark.client.model import Message, MessageQueue, PullResult, PullStatus

log = logging.getLogger(__name__)

SLOT = 32  # the broker's default maximum messages per pull
# What a slot's messages may weigh: most of the broker's 256 KiB per pull from memory (maxTransferBytesOnMessage-
# InMemory), the rest a margin for messages of uneven size.
SLOT_BYTES = (256 << 10) * 9 // 10
# How long a task waits for a broker that went away (restart, commit-log recovery, fail-over) before it fails.
DEFAULT_RETRY_TIMEOUT = 600.0
_FIRST_BACKOFF_S, _MAX_BACKOFF_S = 0.05, 2.0


def tag_set(expression: str) -> frozenset[str] | None:
    """The tags of a TAG expression (``TagA || TagB``); None for ``*`` (every message)."""
    tags = frozenset(t.strip() for t in (expression or "*").split("||") if t.strip())
    return None if not tags or "*" in tags else tags


class _Pending(Protocol):
    def result(self) -> PullResult: ...

    def cancel(self) -> None: ...


class PullSession(Protocol):
    """The pulls of one range read: of one queue, with one subscription."""

    def pull_async(self, offset: int, max_nums: int) -> _Pending: ...

    def close(self) -> None: ...


class Puller(Protocol):
    def pull_session(self, mq: MessageQueue, *, group: str, expression: str,
                     expression_type: str) -> PullSession: ...

    def min_offset(self, mq: MessageQueue) -> int: ...


class SharedPulls:
    """A PullSession over the client's shared connections (its ``pull_async``)."""

    def __init__(self, client, mq: MessageQueue, pull_kw: dict) -> None:
        self._client, self._mq, self._kw = client, mq, pull_kw

    def pull_async(self, offset: int, max_nums: int) -> _Pending:
        return self._client.pull_async(self._mq, offset, max_nums, **self._kw)

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class RangeChunk:
    """What one pull brought (the raw message block, or the decoded ``messages`` of a transport that delivers
    them decoded) and the offsets ``[low, high)`` of it that belong to the range."""

    body: bytes
    low: int
    high: int
    messages: tuple[Message, ...] | None = None

    def append_to(self, builder: "ChunkBuilder") -> None:
        """Add what belongs to the range to ``builder``: a raw block through its record scan, decoded messages as
        they are."""
        if self.messages is None:
            builder.add(self.body, self.low, self.high)
        else:
            builder.add_messages(self.messages, self.low, self.high)


class ChunkBuilder(Protocol):
    """What collects pulled chunks (``arrow_decoder.ArrowBatchDecoder``)."""

    def add(self, block: bytes, low: int, high: int) -> None: ...

    def add_messages(self, messages: tuple[Message, ...], low: int, high: int) -> None: ...


class _Verdict(NamedTuple):
    chunk: RangeChunk | None  # what to yield
    covered: int | None  # the slot is read up to here; None: pull the slot's first offset again
    why: str = ""  # for None: what the broker answered


class Backoff:
    """Waits between attempts that made no progress, doubling up to 2 s, until ``timeout`` seconds have passed
    since the first of them; ``reset()`` after progress."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._since: float | None = None
        self._attempts = 0

    def reset(self) -> None:
        self._since, self._attempts = None, 0

    def wait(self) -> float | None:
        """Sleep before the next attempt; return the seconds waited so far when the deadline has passed instead."""
        now = time.monotonic()
        if self._since is None:
            self._since = now
        elapsed = now - self._since
        if elapsed >= self.timeout:
            return elapsed
        time.sleep(min(_MAX_BACKOFF_S, _FIRST_BACKOFF_S * 2 ** self._attempts, self.timeout - elapsed))
        self._attempts += 1
        return None


class RangeReader:
    """Iterate the pulled blocks of ``[start, end)``; ``lost`` counts offsets skipped for data loss."""

    def __init__(self, client: Puller, mq: MessageQueue, start: int, end: int, *, depth: int = 8,
                 slot: int = SLOT, group: str, expression: str = "*", expression_type: str = "TAG",
                 fail_on_data_loss: bool = True, retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
                 sparse: bool = False) -> None:
        if start < 0 or end < start:
            raise ValueError(f"bad range [{start}, {end}) for {mq}")
        self.client, self.mq, self.start, self.end = client, mq, start, end
        self.depth, self.slot = max(1, depth), max(1, slot)
        self._max_slot = self.slot
        self._full_answers = 0
        self._last_short = 0
        self.pull_kw = {"group": group, "expression": expression, "expression_type": expression_type}
        self.filtered = expression_type.upper() != "TAG" or tag_set(expression) is not None
        self.sparse = sparse
        self.fail_on_data_loss = fail_on_data_loss
        self.retry_timeout = retry_timeout
        self.lost = 0
        self._backoff = Backoff(retry_timeout)

    def _send(self, pulls: PullSession, low: int, high: int) -> tuple[int, int, int, _Pending]:
        """A pull for ``[low, high)``: at most a slot's worth is asked; what the answer leaves is pulled next."""
        asked = min(self.slot, high - low)
        return low, high, asked, pulls.pull_async(low, asked)

    def __iter__(self) -> Iterator[RangeChunk]:
        pulls = self.client.pull_session(self.mq, **self.pull_kw)
        try:
            yield from self._read(pulls)
        finally:
            pulls.close()

    def _read(self, pulls: PullSession) -> Iterator[RangeChunk]:
        inflight: deque[tuple[int, int, int, _Pending]] = deque()
        next_slot = self.start
        rest: tuple[int, int] | None = None  # the unread end of the slot just answered, pulled before any other
        while inflight or next_slot < self.end or rest:
            try:
                if rest is not None:
                    inflight.appendleft(self._send(pulls, *rest))
                    rest = None
                while len(inflight) < self.depth and next_slot < self.end:
                    high = min(next_slot + self.slot, self.end)
                    inflight.append(self._send(pulls, next_slot, high))
                    next_slot = high
                low, high, asked, pending = inflight[0]
                verdict = self._judge(low, high, pending.result())
            except RETRYABLE as e:
                first = rest or (inflight[0] if inflight else (next_slot,))
                verdict, low, rest = _Verdict(None, None, str(e)), first[0], None
            if verdict.covered is None:
                # Pull again from the first unread offset (maybe from another member of the broker group), after
                # a pause; the pulls in flight behind it are sent again too.
                self._wait(low, verdict.why)
                for *_, pending in inflight:
                    pending.cancel()
                inflight.clear()
                next_slot = low
                continue
            inflight.popleft()
            self._backoff.reset()
            chunk = verdict.chunk
            if chunk is not None:
                if chunk.body and not (self.filtered or self.sparse) and chunk.high > chunk.low:
                    self._fit(asked, chunk.high - chunk.low, len(chunk.body))
                yield chunk
            if verdict.covered < high:
                rest = (verdict.covered, high)

    def _fit(self, asked: int, got: int, nbytes: int) -> None:
        """Size the next slots after an answer of ``got`` of ``asked`` offsets in ``nbytes``."""
        fits = max(1, int(SLOT_BYTES * got // nbytes))
        if got < asked:  # the broker stopped short: by bytes, or by count (a read from disk)
            if got == self._last_short:  # the same count twice: the broker's limit, not a one-off (a file's end)
                self._max_slot = got
            self._last_short = got
            self.slot, self._full_answers = max(1, min(got, fits)), 0
            return
        self._full_answers += 1
        if self._full_answers >= self.depth:  # a run of full answers: try a larger slot again
            self.slot, self._full_answers = min(self._max_slot, fits, self.slot + max(1, self.slot // 4)), 0
        else:
            self.slot = min(self.slot, fits)

    def _judge(self, low: int, high: int, r: PullResult) -> _Verdict:
        """What the answer to a pull of ``[low, high)`` means for the range."""
        status = r.status
        if status is PullStatus.OFFSET_ILLEGAL:
            if r.min_offset > low:
                return _Verdict(None, self._lose(low, min(r.min_offset, high), r.min_offset))
            if 0 <= r.max_offset < low:
                what = (f"{self.mq}: the broker's last offset is {r.max_offset}, below offset {low} of the range "
                        f"[{self.start}, {self.end}): the queue was reset (the topic deleted and recreated?), so "
                        f"messages [{low}, {high}) are gone")
                return _Verdict(None, self._lose(low, high, what=what))
            raise RocketMQError(f"{self.mq}: the broker refuses offset {low} (it holds [{r.min_offset}, "
                                f"{r.max_offset})); the queue may have been reset")
        if r.min_offset > low:  # any other answer: the head of the slot was deleted meanwhile
            low = self._lose(low, min(r.min_offset, high), r.min_offset)
            if low >= high:
                return _Verdict(None, high)
        if status is PullStatus.FOUND:
            if r.next_begin_offset <= low:
                raise RocketMQError(f"{self.mq}: the broker answered a pull at offset {low} with next offset "
                                    f"{r.next_begin_offset}; the queue does not advance")
            gap = None
            if r.first_offset >= r.next_begin_offset:
                # a healthy broker returns records of [low, next) only: these come from another commit-log file,
                # because the one under the consume queue is being deleted
                gap = self._gap(low, high, f"the broker answered offsets [{low}, {r.next_begin_offset}) with a "
                                           f"record of offset {r.first_offset}")
            elif r.first_offset > low and not (self.filtered or self.sparse):
                gap = self._gap(low, high, f"the broker returned offsets from {r.first_offset}, not from {low}")
            if gap is not None:
                if gap.covered is None or gap.covered >= high:
                    return gap
                low = gap.covered
            return _Verdict(RangeChunk(r.body, low, min(high, r.next_begin_offset), r.messages),
                            max(low, min(high, r.next_begin_offset)))
        if status is PullStatus.NO_MATCHED_MSG and r.next_begin_offset > low:
            if self.filtered or self.sparse:
                return _Verdict(None, min(high, r.next_begin_offset))
            return self._gap(low, high, f"the broker skipped offsets [{low}, {r.next_begin_offset}) of an "
                                        "unfiltered read")
        # NO_NEW_MSG, RETRY_IMMEDIATELY (a slave that cannot serve the offset, a commit-log file being deleted):
        # the same offset again, until the broker serves it or proves it gone.
        return _Verdict(None, None, f"{status.value} at offset {low} (broker max offset {r.max_offset})")

    def _gap(self, low: int, high: int, what: str) -> _Verdict:
        """A gap where an unfiltered read must find offset ``low``: lost if the queue's first offset is past
        ``low`` now, else pull ``low`` again."""
        first = self.client.min_offset(self.mq)
        if first > low:
            return _Verdict(None, self._lose(low, min(first, high), first))
        return _Verdict(None, None, f"{what}, while its first offset is {first}")

    def _lose(self, low: int, upto: int, available: int = -1, *, what: str = "") -> int:
        """Offsets ``[low, upto)`` are gone: raise DataLossError under failOnDataLoss, else count, log, skip."""
        what = what or (f"{self.mq}: messages [{low}, {upto}) are gone from the broker (its first available offset "
                        f"is {available}); they were deleted before they were read")
        if self.fail_on_data_loss:
            raise DataLossError(what + ". Set failOnDataLoss=false to skip them (they are counted and logged).")
        self.lost += upto - low
        log.warning("%s; skipping %d offsets (failOnDataLoss=false)", what, upto - low)
        return upto

    def _wait(self, offset: int, why: str) -> None:
        waited = self._backoff.wait()
        if waited is None:
            return
        raise BrokerUnavailableError(
            f"{self.mq}: broker {self.mq.broker_name} did not serve offset {offset} for {waited:.0f} s (last: {why}); "
            f"gave up after brokerRetryTimeoutMs={self.retry_timeout * 1000:.0f}. Spark retries the task; raise that "
            "option to wait longer for a broker restart or fail-over")
