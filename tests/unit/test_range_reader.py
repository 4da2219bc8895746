"""RangeReader's slot logic against a scripted queue that follows the broker's pull rules (short answers, filters
that run past a slot, deleted heads, outages). The real broker is exercised in tests/integration."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from rmq_spark.client.errors import ConnectionLostError, DataLossError
from rmq_spark.client.model import MessageQueue, PullResult, PullStatus
from rmq_spark.client.range_reader import RangeReader, tag_set

MQ = MessageQueue("T", "broker-a", 0)


class Done:
    def __init__(self, result=None, error=None):
        self._result, self._error = result, error

    def result(self):
        if self._error:
            raise self._error
        return self._result


class ScriptedQueue:
    """Offsets [low, high) with a tag each; a pull scans at most `scan` offsets and returns at most max_nums."""

    def __init__(self, tags, low=0, scan=32, outages=0):
        self.tags, self.low, self.scan, self.outages = tags, low, scan, outages
        self.pulls = []

    def pull_async(self, mq, offset, max_nums=32, *, group, expression="*", expression_type="TAG", suspend_ms=0):
        self.pulls.append((offset, max_nums))
        if self.outages:
            self.outages -= 1
            return Done(error=ConnectionLostError("broker restarting"))
        high = len(self.tags)
        if offset < self.low or offset > high:
            return Done(PullResult(PullStatus.OFFSET_ILLEGAL, self.low, self.low, high))
        if offset == high:
            return Done(PullResult(PullStatus.NO_NEW_MSG, offset, self.low, high))
        wanted = tag_set(expression)
        found, o = [], offset
        while o < high and o - offset < self.scan and len(found) < max_nums:
            if wanted is None or self.tags[o] in wanted:
                found.append(o)
            o += 1
        if not found:
            return Done(PullResult(PullStatus.NO_MATCHED_MSG, o, self.low, high))
        return Done(PullResult(PullStatus.FOUND, o, self.low, high, body=json.dumps(found).encode()))


def read(queue, start, end, **kw):
    reader = RangeReader(queue, MQ, start, end, group="g", **kw)
    out = []
    for chunk in reader:
        out.extend(o for o in json.loads(chunk.body) if chunk.low <= o < chunk.high)
    return out, reader


@given(st.lists(st.sampled_from("AB"), min_size=1, max_size=400), st.integers(1, 40), st.integers(1, 12),
       st.integers(1, 40), st.data())
@settings(max_examples=200, deadline=None)
def test_every_matching_offset_once_in_order(tags, scan, depth, slot, data):
    start = data.draw(st.integers(0, len(tags)))
    end = data.draw(st.integers(start, len(tags)))
    expression = data.draw(st.sampled_from(["*", "A", "B", "A || B"]))
    got, _ = read(ScriptedQueue(tags, scan=scan), start, end, depth=depth, slot=slot, expression=expression)
    wanted = tag_set(expression)
    assert got == [o for o in range(start, end) if wanted is None or tags[o] in wanted]


def test_pulls_are_pipelined():
    q = ScriptedQueue(["A"] * 320)
    read(q, 0, 320, depth=4)
    assert q.pulls[:4] == [(0, 32), (32, 32), (64, 32), (96, 32)]
    assert len(q.pulls) == 10


def test_deleted_head_fails_or_is_skipped():
    q = ScriptedQueue(["A"] * 100, low=40)
    with pytest.raises(DataLossError, match="from offset 0 are gone.*first available offset is 40.*failOnDataLoss"):
        read(q, 0, 100)
    got, reader = read(ScriptedQueue(["A"] * 100, low=40), 0, 100, fail_on_data_loss=False)
    assert got == list(range(40, 100)) and reader.lost == 40


def test_outage_is_retried_from_the_first_unread_offset():
    got, _ = read(ScriptedQueue(["A"] * 100, outages=3), 0, 100, depth=4, retry_for=5)
    assert got == list(range(100))


def test_long_outage_gives_up():
    with pytest.raises(ConnectionLostError):
        read(ScriptedQueue(["A"] * 100, outages=10_000), 0, 100, retry_for=0.5)
