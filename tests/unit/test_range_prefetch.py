"""RangePrefetch: which ranges' pulls are sent ahead and in what bursts, which pull a range's read takes, and what a
read that asks otherwise, or stops early, does. The reads over the real broker are the integration tests'."""

from __future__ import annotations

import contextlib

import rmq_spark.client.range_prefetch as range_prefetch
from rmq_spark.client.errors import ConnectionLostError
from rmq_spark.client.model import EVERY_MESSAGE, SLOT, FilterExpression, MessageQueue
from rmq_spark.client.range_prefetch import RangePrefetch

QUEUES = [MessageQueue("T", "broker-a", i) for i in range(10)]


class _Call:
    def __init__(self, mq: MessageQueue, offset: int, count: int) -> None:
        self.mq, self.offset, self.count, self.cancelled = mq, offset, count, False

    def result(self):
        return (self.mq, self.offset, self.count)

    def cancel(self) -> None:
        self.cancelled = True


class _Client:
    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.bursts: list[int] = []  # how many pulls each burst sent
        self.sessions: list[MessageQueue] = []
        self.refuse: set[MessageQueue] = set()

    @contextlib.contextmanager
    def burst(self):
        first = len(self.calls)
        yield
        self.bursts.append(len(self.calls) - first)

    def pull_async(self, mq, offset, max_nums, *, group, expression):
        if mq in self.refuse:
            raise ConnectionLostError("gone")
        call = _Call(mq, offset, max_nums)
        self.calls.append(call)
        return call

    def pull_session(self, mq, *, group, expression):
        self.sessions.append(mq)
        return "own session"

    def min_offset(self, mq):
        return 0


def _prefetch(client: _Client, ranges, expression: FilterExpression = EVERY_MESSAGE) -> RangePrefetch:
    return RangePrefetch(client, ranges, group="g", expression=expression)


def test_the_pulls_of_small_ranges_go_out_ahead_in_one_burst_and_each_read_takes_its_own():
    client = _Client()
    ahead = _prefetch(client, [(mq, 5, 6) for mq in QUEUES])
    for mq in QUEUES:
        session = ahead.pull_session(mq, group="g", expression=EVERY_MESSAGE)
        assert not session.native
        assert session.pull_async(5, 1).result() == (mq, 5, 1)
    assert client.bursts == [10]  # all of them at the first read
    assert len(client.calls) == 10 and client.sessions == []


def test_ahead_of_the_read_at_most_AHEAD_pulls_are_out(monkeypatch):
    monkeypatch.setattr(range_prefetch, "AHEAD", 4)
    client = _Client()
    ahead = _prefetch(client, [(mq, 0, 2) for mq in QUEUES])
    for mq in QUEUES:
        ahead.pull_session(mq, group="g", expression=EVERY_MESSAGE).pull_async(0, 2)
    assert client.bursts == [4, 2, 2, 2] and len(client.calls) == 10


def test_a_read_that_asks_another_pull_sends_it_and_the_one_sent_ahead_is_cancelled():
    client = _Client()
    ahead = _prefetch(client, [(QUEUES[0], 5, 9), (QUEUES[1], 5, 6)])
    session = ahead.pull_session(QUEUES[0], group="g", expression=EVERY_MESSAGE)
    assert session.pull_async(5, 2).result() == (QUEUES[0], 5, 2)  # not the 4 sent ahead
    assert client.calls[0].cancelled and len(client.calls) == 3
    assert session.pull_async(7, 2).result() == (QUEUES[0], 7, 2)  # the rest of a short answer


def test_only_unfiltered_small_ranges_of_queues_read_once_go_ahead_and_never_one_alone():
    tags = FilterExpression("a", "TAG")
    cases = [
        ([(QUEUES[0], 0, SLOT + 1), (QUEUES[1], 0, 1)], EVERY_MESSAGE),  # one small range left
        ([(QUEUES[0], 0, 1), (QUEUES[0], 5, 6)], EVERY_MESSAGE),  # one queue, two ranges
        ([(QUEUES[0], 0, 1), (QUEUES[1], 0, 1)], tags),  # the broker's filter may skip: a cursor's own pulls
    ]
    for ranges, expression in cases:
        client = _Client()
        ahead = _prefetch(client, ranges, expression)
        assert ahead.pull_session(ranges[0][0], group="g", expression=expression) == "own session"
        assert client.calls == []


def test_a_pull_that_cannot_be_sent_ahead_is_left_to_its_read_and_close_cancels_the_rest():
    client = _Client()
    client.refuse = {QUEUES[1]}
    ahead = _prefetch(client, [(mq, 0, 1) for mq in QUEUES[:3]])
    ahead.pull_session(QUEUES[0], group="g", expression=EVERY_MESSAGE)
    assert [c.mq for c in client.calls] == [QUEUES[0], QUEUES[2]]
    client.refuse = set()
    assert ahead.pull_session(QUEUES[1], group="g", expression=EVERY_MESSAGE).pull_async(0, 1).result()[0] == QUEUES[1]
    ahead.close()
    assert [c.cancelled for c in client.calls] == [True, True, False]  # the two never taken


def test_a_session_of_another_group_is_the_clients_own():
    client = _Client()
    ahead = _prefetch(client, [(mq, 0, 1) for mq in QUEUES[:2]])
    assert ahead.pull_session(QUEUES[0], group="other", expression=EVERY_MESSAGE) == "own session"
