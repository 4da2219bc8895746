"""The pulls that read a task's small ranges whole, sent ahead of their reads: a trickling stream's task reads
thousands of ranges of a message or two, and one after another each waited for its pull's round trip; sent
AHEAD at a time in one burst, they wait for about one round trip a burst."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Protocol

from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.model import SLOT, FilterExpression, MessageQueue
from rmq_spark.client.range_reader import Puller, PullSender, PullSession
from rmq_spark.client.transport import Bursts, Call

# How many pulls are out ahead of the range being read (each answer is at most one pull's worth: SLOT messages).
AHEAD = 64


class PrefetchSource(Puller, PullSender, Bursts, Protocol):
    """What the pulls are sent through: the client's own pull sessions, and its pulls, sent in bursts."""


class RangePrefetch:
    """A ``Puller`` for ``RangeReader`` over ``client`` that sends ahead the one pull of each small range (at most
    SLOT messages, read whole by one pull), in the order given, AHEAD at a time. A prefetched queue's session
    takes its pull when the cursor asks for that one (any other pull is sent then, as the client's shared
    connections send it); every other queue reads through the client's own session. ``close()`` cancels what
    was not taken (a task stopped early)."""

    def __init__(
        self,
        client: PrefetchSource,
        ranges: Iterable[tuple[MessageQueue, int, int]],
        *,
        group: str,
        expression: FilterExpression,
    ) -> None:
        self._client, self._group, self._expression = client, group, expression
        small = [] if expression.filters else [(mq, start, end - start) for mq, start, end in ranges]
        todo = [r for r in small if 0 < r[2] <= SLOT and not r[0].logic]
        queues = [mq for mq, _, _ in todo]
        # one small range gains nothing; a queue read in two ranges is read through its own sessions
        self._queues = set(queues) if len(todo) > 1 and len(set(queues)) == len(queues) else set()
        self._todo = deque(todo if self._queues else ())
        self._sent: dict[tuple[MessageQueue, int], tuple[int, Call]] = {}

    def pull_session(self, mq: MessageQueue, *, group: str, expression: FilterExpression) -> PullSession:
        if mq in self._queues and group == self._group and expression == self._expression:
            self._top_up()
            return _Prefetched(self, mq)
        return self._client.pull_session(mq, group=group, expression=expression)

    def min_offset(self, mq: MessageQueue) -> int:
        return self._client.min_offset(mq)

    def _top_up(self) -> None:
        """Send the next ranges' pulls in one burst once fewer than half of AHEAD are out."""
        if len(self._sent) > AHEAD // 2 or not self._todo:
            return
        with self._client.burst():
            while self._todo and len(self._sent) < AHEAD:
                mq, start, count = self._todo.popleft()
                try:
                    call = self._client.pull_async(mq, start, count, group=self._group, expression=self._expression)
                except RocketMQError:
                    continue  # its read pulls for itself, and meets the failure under its own rules
                self._sent[(mq, start)] = (count, call)

    def take(self, mq: MessageQueue, offset: int, count: int) -> Call | None:
        """The pull sent ahead for ``count`` messages of ``mq`` from ``offset``, if that is the one."""
        sent = self._sent.pop((mq, offset), None)
        if sent is None:
            return None
        if sent[0] != count:
            sent[1].cancel()
            return None
        return sent[1]

    def close(self) -> None:
        for _, call in self._sent.values():
            call.cancel()
        self._sent.clear()
        self._todo.clear()


class _Prefetched:
    """The pull session of a queue whose range's pull was sent ahead: that pull is taken, others sent then."""

    native = False

    def __init__(self, prefetch: RangePrefetch, mq: MessageQueue) -> None:
        self._prefetch, self._mq = prefetch, mq

    def pull_async(self, offset: int, max_nums: int) -> Call:
        p = self._prefetch
        call = p.take(self._mq, offset, max_nums)
        if call is None:
            call = p._client.pull_async(self._mq, offset, max_nums, group=p._group, expression=p._expression)
        return call

    def close(self) -> None:
        pass
