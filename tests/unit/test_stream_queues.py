"""The stream driver's verdicts on queues that leave the route or enter after the start, against a scripted cluster
(the real broker cannot stage a lagging slave's answer or a route read that finishes late): only a master's answer
from the newest route proves a vanished queue drained or lost (docs/DESIGN.md §10); a queue that enters later
starts where the start options put it."""

from __future__ import annotations

import contextlib
import logging
import time
import types
from concurrent.futures import Future

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from rmq_spark.client import outages
from rmq_spark.client.base import Answers, BaseClient
from rmq_spark.client.errors import BrokerUnavailableError, DataLossError, UnsupportedError
from rmq_spark.client.model import BrokerData, MessageQueue, QueueData, TopicRoute
from rmq_spark.client.outages import OutageLog
from rmq_spark.options import OptionError, parse_options
from rmq_spark.source.queue_watch import QueueWatch
from rmq_spark.source.skipped import SKIPPED_KEY
from rmq_spark.source.stream import RocketMQStreamReader
from tests.support.calls import refresh_each

TOPIC = "T"
A, B = "broker-a", "broker-b"
PERM_RW = 6
ALL = ReadAllAvailable()


def mq(queue_id: int, broker: str = A) -> MessageQueue:
    return MessageQueue(TOPIC, broker, queue_id)


MASTER_HOST = "10.0.0.1:10911"  # the store host of the messages a test scripts with one store time
ELECTED = "127.0.0.1:10"  # the address the scripted route gives broker group A's master


class _Cluster:
    """Name servers and brokers as a test scripts them: the readable queues of each broker group in the route, the
    end offset each master answers, and, while ``slave_ends`` is set, a slave answering instead of the masters (or,
    for a queue missing from it, nobody)."""

    burst = staticmethod(contextlib.nullcontext)  # BaseClient's: no transport here to write together

    def __init__(self, queues: dict[str, int], ends: dict[MessageQueue, int]) -> None:
        self.queues_of = dict(queues)
        self.ends = dict(ends)
        self.slave_ends: dict[MessageQueue, int] | None = None
        self.committed: dict[MessageQueue, int] = {}
        self.mins: dict[MessageQueue, int] = {}  # first offsets above 0: retention deleted the messages below
        # the store time (ms) of each queue's messages: one for all, or (time, store host) per offset
        self.stored_at: dict[MessageQueue, int | list[tuple[int, str]]] = {}
        self.min_asked: list[MessageQueue] = []
        self.outages = OutageLog(logging.getLogger("test"))

    refresh_routes = refresh_each

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        brokers = sorted(self.queues_of)
        return TopicRoute(
            topic,
            tuple(BrokerData(b, {0: f"127.0.0.1:{10 + i}"}) for i, b in enumerate(brokers)),
            tuple(QueueData(b, self.queues_of[b], self.queues_of[b], PERM_RW) for b in brokers),
        )

    def queues(self, topic: str, refresh: bool = False) -> list[MessageQueue]:
        return self.route(topic).read_queues()

    def live_brokers(self) -> set[str]:
        return set(self.queues_of)

    def is_compacted(self, topic: str) -> bool:
        return False

    def topic_message_type(self, topic: str):
        return None  # no message.type attribute

    def hold_async(self, mq, offset, *, group, hold_ms):
        raise UnsupportedError("no holds here")

    holds = BaseClient.holds

    def serves_reads(self, mq, offset, group) -> bool:
        return True

    def max_offsets(self, mqs, partial=False) -> Answers:
        mqs = list(mqs)
        if self.slave_ends is None:
            return Answers({m: self.ends.get(m, 0) for m in mqs})
        return Answers(
            {m: self.slave_ends[m] for m in mqs if m in self.slave_ends},
            {m: BrokerUnavailableError("no answer") for m in mqs if m not in self.slave_ends},
            replica=[m for m in mqs if m in self.slave_ends],
        )

    def read_range(self, mq, start, end, **kw):
        """One message per offset, stored as ``stored_at[mq]`` says (none where it is not set)."""
        stored = self.stored_at.get(mq)
        for o in range(start, end) if stored is not None else ():
            at, host = (stored, MASTER_HOST) if isinstance(stored, int) else stored[o]
            yield types.SimpleNamespace(queue_offset=o, store_timestamp=at, store_host=host)

    def min_offsets(self, mqs, partial=False) -> Answers:
        mqs = list(mqs)
        self.min_asked += mqs
        return Answers({m: self.mins.get(m, 0) for m in mqs})

    def query_consumer_offsets(self, group, mqs, partial=False) -> Answers:
        return Answers({m: self.committed.get(m) for m in mqs})


def _reader(cluster: _Cluster, **options: str) -> RocketMQStreamReader:
    reader = RocketMQStreamReader(
        parse_options(
            {"nameServer": "127.0.0.1:9876", "topic": TOPIC, "startingOffsets": "earliest", **options}, streaming=True
        )
    )
    reader._client = cluster
    return reader


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(outages.time, "monotonic", lambda: now[0])
    return now


@pytest.mark.parametrize("answer", ["a lagging slave", "a slave at the query's offset", "nobody"])
def test_only_a_master_proves_a_queue_that_left_the_route_drained_or_lost(clock, answer):
    cluster = _Cluster({A: 4}, {mq(i): 5 for i in range(4)})
    reader = _reader(cluster)
    end = reader.latestOffset(reader.initialOffset(), ALL)
    assert end[TOPIC] == {f"{A}/{i}": 5 for i in range(4)}
    cluster.queues_of[A] = 2  # the topic shrank; then its master went away
    cluster.ends[mq(3)] = 7  # the master holds two messages of queue 3 the query has not read
    cluster.slave_ends = {
        "a lagging slave": {mq(i): 3 for i in range(4)},
        "a slave at the query's offset": {mq(i): 5 for i in range(4)},
        "nobody": {},
    }[answer]
    reader.watch.poll(force=True)
    waiting = reader.latestOffset(end, ALL)
    assert waiting[TOPIC] == end[TOPIC], "queues 2 and 3 must wait for their master, their offsets carried"
    cluster.slave_ends = None  # the master is back
    clock[0] += outages.RETRY_DOWN_S
    with pytest.raises(DataLossError, match=r"broker-a/3 \(read to 5, end 7\)"):
        reader.latestOffset(end, ALL)


def test_a_route_read_in_the_background_is_not_applied_over_a_newer_one():
    cluster = _Cluster({A: 2}, {mq(i): 5 for i in range(4)})
    watch = QueueWatch(cluster, parse_options({"nameServer": "127.0.0.1:9876", "topic": TOPIC}))
    watch.poll()
    older = Future()  # a background read that saw the topic with 2 queues and came back late
    older.set_result(watch._read_routes())
    watch._reading = older
    cluster.queues_of[A] = 4
    watch.poll(force=True)  # the newer route: 4 queues
    assert watch.queue_set == {mq(i) for i in range(4)}
    assert watch.classify({mq(3): 5}) == (set(), set())


def test_a_queue_read_to_its_end_keeps_its_offset_out_of_the_route_and_resumes_there(clock):
    cluster = _Cluster({A: 4}, {mq(i): 5 for i in range(4)})
    reader = _reader(cluster)
    end = reader.latestOffset(reader.initialOffset(), ALL)
    cluster.queues_of[A] = 2
    reader.watch.poll(force=True)
    for _ in range(3):  # asked once, then carried
        assert reader.latestOffset(end, ALL)[TOPIC] == end[TOPIC]
    cluster.queues_of[A] = 4  # the topic grows back (the broker kept consume queues 2 and 3)
    cluster.ends[mq(2)] = 8
    reader.watch.poll(force=True)
    grown = reader.latestOffset(end, ALL)
    assert grown[TOPIC] == {f"{A}/0": 5, f"{A}/1": 5, f"{A}/2": 8, f"{A}/3": 5}
    assert [(r.queue, r.start, r.end) for p in reader.partitions(end, grown) for r in p.ranges] == [(mq(2), 5, 8)]


@pytest.mark.parametrize("fallback, start", [("latest", 9), ("error", None)])
def test_new_queues_under_committed_start_where_startingOffsetsFallback_says(fallback, start):
    cluster = _Cluster({A: 2}, {mq(i): 9 for i in range(4)})
    cluster.committed = {mq(0): 4, mq(1): 4}
    reader = _reader(
        cluster,
        startingOffsets="committed",
        consumerGroup="g",
        commitOffsetsToBroker="false",
        startingOffsetsFallback=fallback,
    )
    first = reader.initialOffset()
    assert first[TOPIC] == {f"{A}/0": 4, f"{A}/1": 4}
    end = reader.latestOffset(first, ALL)
    cluster.queues_of[A] = 3  # a new queue, without a committed offset
    reader.watch.poll(force=True)
    if start is None:
        with pytest.raises(OptionError, match=r"no committed offset for T:broker-a/2.*startingOffsetsFallback"):
            reader.latestOffset(end, ALL)
    else:
        assert reader.latestOffset(end, ALL)[TOPIC][f"{A}/2"] == start


def test_a_queue_named_in_startingOffsets_whose_broker_group_is_away_waits_and_starts_there():
    cluster = _Cluster({A: 2}, {**{mq(i): 5 for i in range(2)}, **{mq(i, B): 10 for i in range(2)}})
    reader = _reader(cluster, startingOffsets='{"T": {"broker-a/0": 1, "broker-b/1": 6}}')
    first = reader.initialOffset()
    assert first[TOPIC] == {f"{A}/0": 1, f"{A}/1": 0}
    end = reader.latestOffset(first, ALL)
    cluster.queues_of[B] = 2  # broker-b is back
    reader.watch.poll(force=True)
    back = reader.latestOffset(end, ALL)
    assert back[TOPIC][f"{B}/1"] == 6 and back[TOPIC][f"{B}/0"] == 0


def test_a_queue_named_in_startingOffsets_that_its_broker_group_does_not_have_is_an_error():
    cluster = _Cluster({A: 2}, {})
    reader = _reader(cluster, startingOffsets='{"T": {"broker-a/5": 1}}')
    with pytest.raises(OptionError, match="names queue broker-a/5 of topic 'T', which does not exist"):
        reader.initialOffset()


def test_messages_skipped_under_failOnDataLoss_false_are_counted_on_the_driver_and_reported(caplog):
    cluster = _Cluster({A: 2}, {mq(0): 5, mq(1): 5})
    reader = _reader(cluster, failOnDataLoss="false")
    first = reader.initialOffset()
    end = reader.latestOffset(first, ALL)
    assert SKIPPED_KEY not in reader.reportLatestOffset()  # nothing skipped yet
    cluster.mins = {mq(0): 3, mq(1): 7}  # retention deleted [0, 3) of queue 0 and all of queue 1's range
    with caplog.at_level(logging.WARNING):
        ranges = [(r.queue, r.start, r.end) for p in reader.partitions(first, end) for r in p.ranges]
    assert ranges == [(mq(0), 3, 5)]
    assert "8 messages were skipped planning this batch" in caplog.text
    assert reader.reportLatestOffset()[SKIPPED_KEY] == {TOPIC: {f"{A}/0": 3, f"{A}/1": 5}}
    cluster.ends = {mq(0): 9, mq(1): 9}
    reader.watch.poll(force=True)
    later = reader.latestOffset(end, ALL)
    reader.partitions(end, later)  # [5, 9) of queue 1: its first offset is 7
    reported = reader.reportLatestOffset()
    assert reported[SKIPPED_KEY] == {TOPIC: {f"{A}/0": 3, f"{A}/1": 7}}
    assert reported[TOPIC] == {f"{A}/0": 9, f"{A}/1": 9}


def test_the_reported_latest_offsets_are_the_brokers_ends_also_when_a_read_limit_cut_the_batch_short():
    """reportLatestOffset lays out the latest offsets only when no batch just planned ended at them (the usual batch
    does, and its JSON is reused): a batch cut short by a read limit must not be reported as the latest."""
    cluster = _Cluster({A: 2}, {mq(0): 10, mq(1): 10})
    reader = _reader(cluster)
    first = reader.latestOffset(reader.initialOffset(), ALL)  # (the first batch's end records its start)
    cluster.ends = {mq(0): 20, mq(1): 20}
    reader.watch.poll(force=True)
    cut = reader.latestOffset(first, ReadMaxRows(4))
    assert sum(cut[TOPIC].values()) == 24
    assert reader.reportLatestOffset()[TOPIC] == {f"{A}/0": 20, f"{A}/1": 20}
    to_the_end = reader.latestOffset(cut, ALL)
    assert reader.reportLatestOffset()[TOPIC] == to_the_end[TOPIC] == {f"{A}/0": 20, f"{A}/1": 20}


def test_planning_a_batch_asks_no_broker_for_first_offsets_but_a_reset_queue_does():
    """The early data-loss check is off the batch's path: the task checks when it pulls. Only a
    queue whose end fell below its offset (reset) asks where it now starts."""
    cluster = _Cluster({A: 2}, {mq(0): 5, mq(1): 5})
    reader = _reader(cluster)
    first = reader.initialOffset()
    end = reader.latestOffset(first, ALL)
    cluster.ends[mq(1)] = 9
    reader.watch.poll(force=True)
    later = reader.latestOffset(end, ALL)
    asked = len(cluster.min_asked)  # resolving startingOffsets=earliest asked; planning must not
    assert [(r.queue, r.start, r.end) for p in reader.partitions(first, end) for r in p.ranges] == [
        (mq(0), 0, 5),
        (mq(1), 0, 5),
    ]
    assert [(r.queue, r.start, r.end) for p in reader.partitions(end, later) for r in p.ranges] == [(mq(1), 5, 9)]
    assert cluster.min_asked[asked:] == []
    cluster.ends[mq(0)] = 2  # queue 0 was cut by an election
    reader.watch.poll(force=True)
    with pytest.raises(DataLossError, match=r"broker's end offset 2 is below offset 5.*its tail was cut"):
        reader.partitions(later, reader.latestOffset(later, ALL))
    assert cluster.min_asked[asked:] == [mq(0)]


@pytest.mark.parametrize("recreated", [False, True], ids=["cut by an election", "recreated"])
def test_a_queue_whose_end_fell_below_its_offset_reads_on_from_its_end_unless_its_messages_are_all_new(recreated):
    """An election that cuts a read tail leaves the first messages, which the query delivered: the queue is read on
    from its new end, the cut counted as skipped. A recreated queue's first message was stored after the query last
    read it: the queue is read again from its first offset."""
    cluster = _Cluster({A: 1}, {mq(0): 10})
    reader = _reader(cluster, failOnDataLoss="false")
    first = reader.initialOffset()
    end = reader.latestOffset(first, ALL)
    reader.partitions(first, end)
    cluster.ends[mq(0)] = 4
    cluster.stored_at[mq(0)] = int(time.time() * 1000) + (60_000 if recreated else -60_000)
    reader.watch.poll(force=True)
    later = reader.latestOffset(end, ALL)
    planned = [(r.start, r.end) for p in reader.partitions(end, later) for r in p.ranges]
    assert planned == ([(0, 4)] if recreated else [])
    assert reader.reportLatestOffset().get("$skipped", {}) == ({} if recreated else {TOPIC: {f"{A}/0": 6}})


def test_an_election_that_cut_a_read_tail_under_new_sends_reads_the_new_messages_once_and_counts_the_cut():
    """The query read offsets 0-9; the elected replica had 0-3 only, and producers stored three messages at 4-6
    before the query saw the queue again: its end (7) is above the cut. The new messages are read, none of 0-9
    again, and the cut (the query's 4-9) is counted as skipped. The old messages are told from the new by when and
    where they were stored: a message of the dead master stored a moment after the query's read (its clock ahead)
    is an old one; one the elected master stored after it is new."""
    cluster = _Cluster({A: 1}, {mq(0): 10})
    reader = _reader(cluster, failOnDataLoss="false")
    first = reader.initialOffset()
    end = reader.latestOffset(first, ALL)
    reader.partitions(first, end)
    now = int(time.time() * 1000)
    old = "10.0.0.1:10911"
    cluster.stored_at[mq(0)] = [(now - 9_000, old)] * 3 + [(now + 1_000, old)] + [(now + 2_000, ELECTED)] * 3
    cluster.ends[mq(0)] = 7
    reader.watch.poll(force=True)
    later = reader.latestOffset(end, ALL)
    planned = [(r.start, r.end) for p in reader.partitions(end, later) for r in p.ranges]
    assert planned == [(4, 7)]
    assert reader.reportLatestOffset().get("$skipped", {}) == {TOPIC: {f"{A}/0": 6}}


def test_messages_a_batch_read_through_the_election_are_not_delivered_again():
    """The batch reading offsets 0-9 was still reading when the master died: its task read on from the elected
    master, whose new messages 4-6 it delivered, and the batch committed after. When the query sees the queue end
    at 7, below its offset, those messages are not new to it: the bound is the batch's commit, not its planning."""
    cluster = _Cluster({A: 1}, {mq(0): 10})
    reader = _reader(cluster, failOnDataLoss="false")
    first = reader.initialOffset()
    end = reader.latestOffset(first, ALL)
    reader.partitions(first, end)
    planned = end["$plannedAt"]
    cluster.stored_at[mq(0)] = [(planned - 9_000, MASTER_HOST)] * 4 + [(planned + 1, ELECTED)] * 3
    time.sleep(0.01)  # the task read them, then the batch committed
    reader.commit(end)
    cluster.ends[mq(0)] = 7
    reader.watch.poll(force=True)
    later = reader.latestOffset(end, ALL)
    assert [(r.start, r.end) for p in reader.partitions(end, later) for r in p.ranges] == []


def test_the_dead_masters_clock_ahead_makes_no_old_message_new():
    """Nothing was stored after the cut; the dead master's clock ran ahead, so the last messages the query read
    look stored after its last read. They are not the elected master's: the queue is read on from its end."""
    cluster = _Cluster({A: 1}, {mq(0): 10})
    reader = _reader(cluster, failOnDataLoss="false")
    first = reader.initialOffset()
    end = reader.latestOffset(first, ALL)
    reader.partitions(first, end)
    reader.commit(end)
    now = int(time.time() * 1000)
    cluster.stored_at[mq(0)] = [(now - 9_000, MASTER_HOST)] * 5 + [(now + 300, MASTER_HOST)] * 2
    cluster.ends[mq(0)] = 7
    reader.watch.poll(force=True)
    later = reader.latestOffset(end, ALL)
    assert [(r.start, r.end) for p in reader.partitions(end, later) for r in p.ranges] == []
    assert reader.reportLatestOffset().get("$skipped", {}) == {TOPIC: {f"{A}/0": 3}}


def test_a_restarted_query_tells_the_messages_stored_after_a_cut_by_when_its_last_batch_was_planned():
    """The query read offsets 0-9 and stopped; the election cut the queue to 0-3 and producers stored 4-6 before the
    query was restarted on its checkpoint. The new process never planned a batch of the queue: the time the last
    batch was planned, which its end carries in the checkpoint, bounds the messages the query delivered, so the
    new messages (stored before the restart) are read."""
    cluster = _Cluster({A: 1}, {mq(0): 10})
    first_run = _reader(cluster, failOnDataLoss="false")
    first = first_run.initialOffset()
    end = first_run.latestOffset(first, ALL)
    first_run.partitions(first, end)
    planned = end["$plannedAt"]
    cluster.stored_at[mq(0)] = [(planned - 9_000, MASTER_HOST)] * 4 + [(planned + 1, ELECTED)] * 3
    cluster.ends[mq(0)] = 7
    time.sleep(0.01)  # the restart comes after the new messages
    restarted = _reader(cluster, failOnDataLoss="false")
    later = restarted.latestOffset(end, ALL)
    assert [(r.start, r.end) for p in restarted.partitions(end, later) for r in p.ranges] == [(4, 7)]


def test_a_message_that_arrives_while_latest_starting_offsets_resolve_is_no_reset():
    """startingOffsets=latest is resolved by a request of its own after the watch asked the ends: a message that
    lands in between puts the start past the watch's end, which must not read as a reset queue (DataLossError)."""
    cluster = _Cluster({A: 2}, {mq(0): 5, mq(1): 5})
    asked = cluster.max_offsets

    def max_offsets(mqs, partial=False):
        answers = asked(mqs, partial)
        cluster.ends[mq(0)] = 6  # a message lands after this answer
        return answers

    cluster.max_offsets = max_offsets
    reader = _reader(cluster, startingOffsets="latest")
    first = reader.initialOffset()
    end = reader.latestOffset(first, ALL)
    assert [r for p in reader.partitions(first, end) for r in p.ranges] == []
    cluster.ends[mq(0)] = 8
    reader.watch.poll(force=True)
    later = reader.latestOffset(end, ALL)
    assert [(r.queue, r.start, r.end) for p in reader.partitions(end, later) for r in p.ranges] == [(mq(0), 6, 8)]


def test_a_trigger_with_nothing_to_read_returns_once_the_last_committed_end_is_on_the_brokers():
    """An AvailableNow run ends at the latestOffset that finds nothing more, and Spark may then end this process
    without stop(): the end handed to the background mirror there must be sent before latestOffset returns."""
    cluster = _Cluster({A: 2}, {mq(0): 5, mq(1): 5})

    def update_consumer_offsets(group, offsets, partial=False):
        time.sleep(0.3)  # the masters take their time
        cluster.committed.update(offsets)
        return Answers({m: True for m in offsets})

    cluster.update_consumer_offsets = update_consumer_offsets
    cluster.close = lambda: None
    reader = _reader(cluster, consumerGroup="g", allowSharedConsumerGroup="true")
    first = reader.initialOffset()
    end = reader.latestOffset(first, ALL)
    assert reader.latestOffset(end, ALL) == end  # nothing more: the run would end here
    assert cluster.committed == {mq(0): 5, mq(1): 5}
    reader.stop()
