"""RangeReader's slot logic and fault rules (the native core's range cursor) against a scripted queue that follows
the broker's pull rules (short answers, filters that run past a slot, deleted heads, commit-log files removed under
the consume queue, slaves that redirect, outages), through both drivers: the Python one over a transport's own
calls, and the native pull loop of a RemotingClient over a scripted remoting peer serving the same queue. The real
broker is exercised in tests/integration."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq_spark.client.errors import BrokerBusyError, BrokerUnavailableError, ConnectionLostError, DataLossError
from rmq_spark.client.model import EVERY_MESSAGE, FilterExpression, MessageQueue, PullResult
from rmq_spark.client.range_reader import RangeReader, SharedPulls
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.compiled import PullStatus
from tests.support.calls import Done
from tests.support.reference_codec import decode_messages
from tests.support.scripted_remoting import ScriptedRemoting
from tests.support.stored_messages import encode_stored_message

MQ = MessageQueue("T", "broker-a", 0)
DRIVERS = ("python", "native")


@cache
def _record(offset: int, tag: str, size: int) -> bytes:
    """A stored record of queue offset ``offset`` with tag ``tag``, of ``size`` bytes in all (at least its
    header's)."""
    empty = encode_stored_message(queue_offset=offset, body=b"", properties={"TAGS": tag})
    return encode_stored_message(queue_offset=offset, body=b"x" * max(0, size - len(empty)), properties={"TAGS": tag})


class ScriptedQueue:
    """Offsets [low, len(tags)) with a tag each; a pull scans at most `scan` offsets and returns at most max_nums.

    `removed`: offsets [low, removed) point into a deleted commit-log file while the consume queue still starts at
    `low` (the broker answers PULL_RETRY_IMMEDIATELY / MESSAGE_WAS_REMOVING, or FOUND from the first record it still
    has); after `correct_after` pulls the broker corrects its min offset to `removed`. `faults`: errors or statuses
    answered (in order) before the broker serves normally."""

    def __init__(self, tags, low=0, scan=32, faults=(), removed=0, correct_after=None, sparse=(), record_bytes=0):
        self.tags, self.low, self.scan = tags, low, scan
        self.record_bytes = record_bytes  # a record's size, when the broker's 256 KiB per pull is to bind
        self.faults = list(faults)
        self.removed, self.correct_after = removed, correct_after
        self.sparse = set(sparse)  # offsets missing by design (a compacted queue)
        self.pulls = []
        self.min_queries = 0

    def min_offset(self, mq):
        self.min_queries += 1
        return self.low

    def pull_session(self, mq, **kw):
        return SharedPulls(self, mq, **kw)

    def pull_async(self, mq, offset, max_nums=32, *, group, expression=EVERY_MESSAGE, suspend_ms=0):
        self.pulls.append((offset, max_nums))
        if self.correct_after is not None and len(self.pulls) > self.correct_after:
            self.low = max(self.low, self.removed)
        high = len(self.tags)
        if self.faults:
            fault = self.faults.pop(0)
            if isinstance(fault, Exception):
                return Done(error=fault)
            return Done(PullResult(fault, offset + 5, self.low, high))  # e.g. a slave's redirect, "next" ahead
        if offset < self.low or offset > high:
            return Done(PullResult(PullStatus.OFFSET_ILLEGAL, self.low, self.low, high))
        if offset == high:
            return Done(PullResult(PullStatus.NO_NEW_MSG, offset, self.low, high))
        wanted = expression.tags
        found, o = [], offset
        if self.record_bytes:
            max_nums = min(max_nums, (256 << 10) // self.record_bytes)
        while o < high and o - offset < self.scan and len(found) < max_nums:
            if o >= self.removed and o not in self.sparse and (wanted is None or self.tags[o] in wanted):
                found.append(o)
            o += 1
        if not found:
            status = PullStatus.RETRY_IMMEDIATELY if offset < self.removed else PullStatus.NO_MATCHED_MSG
            return Done(PullResult(status, o, self.low, high))
        body = b"".join(_record(f, self.tags[f], self.record_bytes) for f in found)
        return Done(PullResult(PullStatus.FOUND, o, self.low, high, body=body, first_offset=found[0]))


class Offsets:
    """A chunk builder that keeps the queue offsets of the records in each chunk's window."""

    nbytes = 0

    def __init__(self):
        self.got = []

    @property
    def rows(self):
        return len(self.got)

    def native_target(self):
        return None

    def add(self, block, low, high):
        self.got.extend(m.queue_offset for m in decode_messages(block, "broker-a") if low <= m.queue_offset < high)


@pytest.fixture(scope="module")
def native_peer():
    """One scripted remoting peer and a client of it for the module; each read sets the peer's queue."""
    with ScriptedRemoting(None) as peer, RemotingClient(peer.address, request_timeout=5) as client:
        yield peer, client


@pytest.fixture(params=DRIVERS)
def read(request, native_peer):
    """read(queue, start, end, **RangeReader options) -> (offsets read, reader), through the driver of the
    parameter."""

    def read(queue, start, end, **kw):
        kw.setdefault("retry_timeout", 5)
        client = queue
        if request.param == "native":
            peer, client = native_peer
            peer.fake = queue
        reader = RangeReader(client, MQ, start, end, group="g", **kw)
        out = Offsets()
        for _ in reader.fill(out):
            pass
        return out.got, reader

    return read


@given(
    st.lists(st.sampled_from("AB"), min_size=1, max_size=400),
    st.integers(1, 40),
    st.integers(1, 12),
    st.integers(1, 40),
    st.sampled_from(DRIVERS),
    st.data(),
)
@settings(max_examples=200, deadline=None)
def test_every_matching_offset_once_in_order(native_peer, tags, scan, depth, slot, driver, data):
    start = data.draw(st.integers(0, len(tags)))
    end = data.draw(st.integers(start, len(tags)))
    expression = data.draw(st.sampled_from(["*", "A", "B", "A || B"]))
    client = queue = ScriptedQueue(tags, scan=scan)
    if driver == "native":
        peer, client = native_peer
        peer.fake = queue
    reader = RangeReader(
        client,
        MQ,
        start,
        end,
        group="g",
        depth=depth,
        slot=slot,
        expression=FilterExpression(expression),
        retry_timeout=5,
    )
    got = Offsets()
    for _ in reader.fill(got, rows=data.draw(st.integers(1, 50))):
        pass
    wanted = FilterExpression(expression).tags
    assert got.got == [o for o in range(start, end) if wanted is None or tags[o] in wanted]


def test_pulls_are_pipelined(read):
    q = ScriptedQueue(["A"] * 320)
    read(q, 0, 320, depth=4)
    assert q.pulls[:4] == [(0, 32), (32, 32), (64, 32), (96, 32)]
    assert len(q.pulls) == 10


@pytest.mark.parametrize(
    "kind, served",
    [
        ({"scan": 8}, 8),  # a read from disk: at most 8 messages a pull
        ({"record_bytes": 10240}, 25),  # 10 KiB messages: 25 fit in 256 KiB
    ],
)
def test_slots_shrink_to_what_one_pull_serves(read, kind, served):
    queue = ScriptedQueue(["A"] * 3000, **kind)
    got, reader = read(queue, 0, 3000, depth=8)
    assert got == list(range(3000))
    asked_more = sum(1 for _, n in queue.pulls if n > served)  # each such pull needs another for its slot's rest
    assert asked_more <= 8, queue.pulls[:40]  # only the pulls sent before the first answer came
    assert len(queue.pulls) <= 1.2 * 3000 / served


def test_deleted_head_fails_or_is_skipped(read):
    q = ScriptedQueue(["A"] * 100, low=40)
    with pytest.raises(
        DataLossError,
        match=r"messages \[0, 32\) are gone.*first available offset is 40"
        r".*failOnDataLoss=false",
    ):
        read(q, 0, 100)
    got, reader = read(ScriptedQueue(["A"] * 100, low=40), 0, 100, fail_on_data_loss=False)
    assert got == list(range(40, 100)) and reader.lost == 40


def test_outage_is_retried_from_the_first_unread_offset(read):
    got, _ = read(ScriptedQueue(["A"] * 100, faults=[ConnectionLostError("broker restarting")] * 3), 0, 100, depth=4)
    assert got == list(range(100))


@pytest.mark.parametrize(
    "fault",
    [PullStatus.RETRY_IMMEDIATELY, PullStatus.NO_NEW_MSG, BrokerBusyError("[REJECTREQUEST]system busy", code=2)],
)
def test_pull_again_answers_are_retried_at_the_same_offset(read, fault):
    q = ScriptedQueue(["A"] * 100, faults=[fault] * 3)
    got, reader = read(q, 0, 100, depth=1)
    assert got == list(range(100)) and reader.lost == 0
    assert [offset for offset, _ in q.pulls[:4]] == [0, 0, 0, 0]  # never moved on to the "next" a redirect named


def test_a_broker_that_never_serves_fails_at_the_deadline_naming_broker_and_option(read):
    q = ScriptedQueue(["A"] * 100, faults=[PullStatus.RETRY_IMMEDIATELY] * 10_000)
    with pytest.raises(
        BrokerUnavailableError,
        match=r"broker broker-a did not serve offset 0.*RETRY_IMMEDIATELY"
        r".*brokerRetryTimeoutMs=300",
    ):
        read(q, 0, 100, retry_timeout=0.3)
    with pytest.raises(ConnectionLostError, match="brokerRetryTimeoutMs"):
        read(ScriptedQueue(["A"] * 100, faults=[ConnectionLostError("down")] * 10_000), 0, 100, retry_timeout=0.3)


@pytest.mark.parametrize("expression", ["*", "A"])
def test_a_removed_commit_log_is_no_silent_skip(read, expression):
    # offsets [0, 40) point into a deleted commit-log file; the broker corrects its min offset after 6 pulls
    with pytest.raises(DataLossError, match=r"messages \[0, 32\) are gone.*first available offset is 40"):
        read(ScriptedQueue(["A"] * 100, removed=40, correct_after=6), 0, 100)
    q = ScriptedQueue(["A"] * 100, removed=40, correct_after=6)
    got, reader = read(q, 0, 100, fail_on_data_loss=False, expression=FilterExpression(expression))
    assert got == list(range(40, 100)) and reader.lost == 40


def test_an_unfiltered_gap_is_checked_against_the_min_offset(read):
    # the first pull reaches past the removed records: FOUND from 40 while the queue still says it starts at 0
    q = ScriptedQueue(["A"] * 100, removed=10, correct_after=4, scan=64)
    got, reader = read(q, 0, 100, depth=1, slot=64, fail_on_data_loss=False)
    assert got == list(range(10, 100)) and reader.lost == 10
    assert q.min_queries >= 1 and q.pulls[0][0] == q.pulls[1][0] == 0


def test_a_filtered_span_is_checked_against_the_min_offset_it_carries(read):
    q = ScriptedQueue(["B"] * 50 + ["A"] * 50, faults=[PullStatus.NO_MATCHED_MSG])
    q.low = 3  # the span's answer says the queue now starts at 3
    with pytest.raises(DataLossError, match=r"messages \[0, 3\) are gone"):
        read(q, 0, 100, expression=FilterExpression("A"), depth=1)


def test_a_reset_queue_is_data_loss(read):
    q = ScriptedQueue(["A"] * 10)  # offsets beyond 10 asked for: the queue was recreated with fewer messages
    with pytest.raises(DataLossError, match="last offset is 10, below offset 50.*reset"):
        read(q, 50, 60)
    got, reader = read(ScriptedQueue(["A"] * 10), 50, 60, fail_on_data_loss=False)
    assert got == [] and reader.lost == 10


def test_compaction_topics_have_gaps_by_design(read):
    q = ScriptedQueue(["A"] * 100, sparse=range(10, 30))
    got, reader = read(q, 0, 100, sparse=True)
    assert got == [o for o in range(100) if not 10 <= o < 30] and reader.lost == 0 and q.min_queries == 0
