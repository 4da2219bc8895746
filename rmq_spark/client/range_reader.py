"""Read one queue's offset range ``[start, end)`` exactly, with several pulls in flight, into a chunk builder.

The rules of the read are the native core's range cursor (``native/src/cursor.rs``; docs/DESIGN.md §2, §10): which
pulls to send (slots of dense offsets, ``depth`` in flight, sized to what one pull serves), what each answer means
for the range (a short answer's rest pulled next, a filter's span skipped), when data is lost (only when the broker
proves it: its first held offset is past the one asked for, its last offset fell below it, or a gap in an
unfiltered read while the queue's first offset moved past it), and how long a broker that does not serve is
waited for (backoff up to ``retry_timeout``). This module drives the cursor over a transport:

- a pull session with a native loop (remoting over plain TCP, unsigned) pulls, judges and gathers in the core
  until the builder holds a batch or a step needs Python (a gap to check, a wait, another member of the broker
  group, a block the gatherer does not take, an error response);
- any other session (gRPC, TLS, signed requests) sends each pull through Python and hands each answer to the same
  cursor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from rmq_spark.client.core_errors import package_error
from rmq_spark.client.defaults import DEFAULT_PULL_DEPTH, DEFAULT_RETRY_TIMEOUT
from rmq_spark.client.errors import RETRYABLE
from rmq_spark.client.model import EVERY_MESSAGE, SLOT, FilterExpression, MessageQueue, PullResult
from rmq_spark.client.transport import Call
from rmq_spark.compiled import BlockGatherer, DataLostError, RangeCursor, RefusedError, Step, UnavailableError

_NO_LIMIT = 1 << 62


class _PullCall(Protocol):
    """A pull in flight."""

    def result(self) -> PullResult: ...

    def cancel(self) -> None: ...


class PullSession(Protocol):
    """The pulls of one range read: of one queue, with one subscription. ``native`` is true for a session whose
    pulls the core sends itself (then it has ``run``, ``forget``, ``suggest`` and ``answer``, as ``DirectPulls``)."""

    native: bool

    def pull_async(self, offset: int, max_nums: int) -> _PullCall: ...

    def close(self) -> None: ...


class Puller(Protocol):
    def pull_session(self, mq: MessageQueue, *, group: str, expression: FilterExpression) -> PullSession: ...

    def min_offset(self, mq: MessageQueue) -> int: ...


class PullSender(Protocol):
    """What sends a pull of one queue and returns at once (a transport's ``pull_async``)."""

    def pull_async(
        self, mq: MessageQueue, offset: int, max_nums: int, *, group: str, expression: FilterExpression
    ) -> Call: ...


class SharedPulls:
    """A PullSession over the client's shared connections (its ``pull_async``)."""

    native = False

    def __init__(self, client: PullSender, mq: MessageQueue, *, group: str, expression: FilterExpression) -> None:
        self._client, self._mq, self._group, self._expression = client, mq, group, expression

    def pull_async(self, offset: int, max_nums: int) -> _PullCall:
        return self._client.pull_async(self._mq, offset, max_nums, group=self._group, expression=self._expression)

    def close(self) -> None:
        pass


class ChunkBuilder(Protocol):
    """What collects pulled chunks (``arrow_decoder.ArrowBatchDecoder``): blocks of stored records (remoting), or
    the answer frames of a v2 pull (gRPC), each with the window of queue offsets ``[low, high)`` that belongs to
    the range."""

    @property
    def rows(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def add(self, block: bytes, low: int, high: int, offset_delta: int = 0) -> None: ...

    def add_frames(self, frames: tuple[bytes, ...], low: int, high: int) -> None: ...

    def native_target(self) -> BlockGatherer | None:
        """The gatherer a native loop may add plain blocks to directly (None: every block through ``add``)."""


@dataclass(frozen=True)
class RangeChunk:
    """What one pull brought (the raw message block, or a v2 pull's answer ``frames``) and the offsets
    ``[low, high)`` of it that belong to the range; ``offset_delta`` as PullResult's."""

    body: bytes
    low: int
    high: int
    frames: tuple[bytes, ...] | None = None
    offset_delta: int = 0

    def append_to(self, builder: ChunkBuilder) -> None:
        """Add what belongs to the range to ``builder``."""
        if self.frames is None:
            builder.add(self.body, self.low, self.high, self.offset_delta)
        else:
            builder.add_frames(self.frames, self.low, self.high)


class RangeReader:
    """Reads ``[start, end)`` of ``mq`` into a builder (``fill``); ``lost`` counts offsets skipped for data loss."""

    def __init__(
        self,
        client: Puller,
        mq: MessageQueue,
        start: int,
        end: int,
        *,
        depth: int = DEFAULT_PULL_DEPTH,
        slot: int = SLOT,
        group: str,
        expression: FilterExpression = EVERY_MESSAGE,
        fail_on_data_loss: bool = True,
        retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
        sparse: bool = False,
    ) -> None:
        if start < 0 or end < start:
            raise ValueError(f"bad range [{start}, {end}) for {mq}")
        self.client, self.mq, self.start, self.end = client, mq, start, end
        self.group, self.expression = group, expression
        self._cursor = RangeCursor(
            str(mq),
            mq.broker_name,
            start,
            end,
            depth=depth,
            slot=slot,
            filtered=expression.filters,
            sparse=sparse,
            fail_on_data_loss=fail_on_data_loss,
            retry_timeout=retry_timeout,
        )

    @property
    def lost(self) -> int:
        return self._cursor.lost

    def fill(self, builder: ChunkBuilder, rows: int = 1, nbytes: int = _NO_LIMIT) -> Iterator[None]:
        """Add every message of the range to ``builder``, in order; yield whenever it holds ``rows`` rows or
        ``nbytes`` bytes (the caller takes them out), and return when the range is read."""
        pulls = self.client.pull_session(self.mq, group=self.group, expression=self.expression)
        try:
            step = self._native_step if pulls.native else self._python_step()
            while step(pulls, builder, rows, nbytes):
                if builder.rows >= rows or builder.nbytes >= nbytes:
                    yield
        except (DataLostError, RefusedError, UnavailableError) as e:  # the cursor's faults: the read cannot go on
            raise package_error(e) from None
        finally:
            pulls.close()

    # -- the two drivers: each call takes one step of the read and says whether there is more ---------------------
    def _native_step(self, pulls, builder: ChunkBuilder, rows: int, nbytes: int) -> bool:
        """One run of the core's pull loop, and what it hands back."""
        cursor, result = self._cursor, None
        try:
            step = pulls.run(
                cursor, builder.native_target(), max(1, rows - builder.rows), max(1, nbytes - builder.nbytes)
            )
            match step:
                case Step.Done():
                    return False
                case Step.Full():
                    return True
                case Step.Suggest(broker_id=broker_id):
                    pulls.suggest(broker_id)
                    pulls.forget(cursor.rewind())
                    return True
                case Step.Answer(offset=offset, frame=frame):
                    result = pulls.answer(offset, frame)
                    step = self._judge(result)
        except RETRYABLE as e:
            step = cursor.failed(str(e))
        self._take(self._settle(step, pulls.forget), result, builder)
        return True

    def _python_step(self):
        """A step function over a transport's own calls: one answer a call."""
        cursor = self._cursor
        pending: dict[int, _PullCall] = {}

        def cancel(tags: list[int]) -> None:
            for tag in tags:
                call = pending.pop(tag, None)
                if call is not None:
                    call.cancel()

        def step(pulls: PullSession, builder: ChunkBuilder, rows: int, nbytes: int) -> bool:
            result = None
            try:
                for tag, offset, count in cursor.next_pulls():
                    pending[tag] = pulls.pull_async(offset, count)
                head = cursor.head
                if head is None:
                    return False
                result = pending.pop(head).result()
                verdict = self._judge(result)
            except RETRYABLE as e:
                verdict = cursor.failed(str(e))
            self._take(self._settle(verdict, cancel), result, builder)
            return True

        return step

    # -- shared by both ------------------------------------------------------------------------------------------
    def _judge(self, r: PullResult) -> Step:
        return self._cursor.judge(
            r.status, r.next_begin_offset, r.min_offset, r.max_offset, r.first_offset, len(r.body)
        )

    def _settle(self, step: Step, cancel: Callable[[list[int]], None]) -> Step:
        """Follow ``step`` through the gap check and the wait it may ask for. Returns a ``Take`` or a ``Skip``."""
        cursor = self._cursor
        while True:
            match step:
                case Step.Gap():
                    try:
                        step = cursor.gap(self.client.min_offset(self.mq))
                    except RETRYABLE as e:
                        step = cursor.failed(str(e))
                case Step.Retry():
                    wait, dropped = cursor.retry()
                    cancel(dropped)
                    time.sleep(wait)
                    return Step.Skip()
                case _:
                    return step

    @staticmethod
    def _take(step: Step, result: PullResult | None, builder: ChunkBuilder) -> None:
        """Add what a ``Take`` step keeps of the answer (its block from the core, or ``result``) to ``builder``."""
        match step:
            case Step.Take(low=low, high=high, body=body) if body is not None:
                builder.add(body, low, high)
            case Step.Take(low=low, high=high):
                assert result is not None, "a Take without the core's block keeps a judged answer"
                RangeChunk(result.body, low, high, result.frames, result.offset_delta).append_to(builder)
