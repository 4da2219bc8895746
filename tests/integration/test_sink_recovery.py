"""The sink while broker groups lose their master or leave the route, on a real embedded RocketMQ of two broker
groups with one slave each (a group whose master stops stays in the route with its slave only). The exactly-once
tests drive the stream writer's task and driver code directly, and cut a commit where a driver crash would."""

from __future__ import annotations

import base64
import collections
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from unittest import mock

import pyarrow as pa
import pytest

from rmq_spark.client.model import TopicRoute
from rmq_spark.client_pool import new_client, shared_client
from rmq_spark.errors import CommitError
from rmq_spark.options import SinkOptions, parse_sink_options
from rmq_spark.sink import writers
from rmq_spark.sink.commit_home import HOME_KV_NAMESPACE
from rmq_spark.sink.commit_log import CommitRecord, CommitStep
from rmq_spark.sink.commit_records import CommitRecords
from rmq_spark.sink.routing import java_string_hash
from rmq_spark.sink.transactions import Outcome, commit_batch
from rmq_spark.sink.writers import MicroBatch, RocketMQStreamWriter, SinkCommit, write_task
from rmq_spark_testing.embedded import EmbeddedRocketMQ
from tests.conftest import unique_topic


def _body(m: dict) -> str:
    return base64.b64decode(m["bodyBase64"]).decode()


def test_a_group_without_master_takes_no_write(spark, replicated_pair, request):
    topic = unique_topic(request)
    replicated_pair.create_topic(topic, queues=2)
    rows = [(f"r{i}", f"key-{i % 5}" if i % 2 else None) for i in range(20)]
    df = spark.createDataFrame(rows, "body STRING, shardingKey STRING").coalesce(1)
    replicated_pair.stop_broker("broker-a")  # its slave stays in the route
    try:
        (
            df.write.format("rocketmq")
            .mode("append")
            .option("nameServer", replicated_pair.name_server)
            .option("topic", topic)
            .option("brokerRetryTimeoutMs", "3000")
            .save()
        )
    finally:
        replicated_pair.start_broker("broker-a")
    stored = {_body(m): m for m in replicated_pair.consume(topic)}
    assert sorted(stored) == sorted(body for body, _ in rows)
    assert {m["brokerName"] for m in stored.values()} == {"broker-b"}
    for body, key in rows:  # a key goes to the queue the Java producer picks: one of broker-b's 2 queues
        if key is not None:
            assert stored[body]["queueId"] == abs(java_string_hash(key)) % 2


class _Crash(BaseException):
    """The driver dies here."""


class _DiesAfter:
    """A client whose driver dies (raises _Crash) once it has sent ``commits`` COMMITs."""

    def __init__(self, client, commits: int) -> None:
        self._client, self._left = client, commits

    def __getattr__(self, name: str):
        return getattr(self._client, name)

    def end_transaction_async(self, half, *, commit: bool, group: str):
        if commit:
            if self._left == 0:
                raise _Crash()
            self._left -= 1
        return self._client.end_transaction_async(half, commit=commit, group=group)


class _LateRegistration:
    """A client whose first route look-up of each topic misses broker group ``broker`` (the name server answered
    while the group was registering again after a restart), and which keeps that answer until it looks again."""

    def __init__(self, client, broker: str) -> None:
        self._client, self._broker, self._looks = client, broker, collections.Counter()

    def __getattr__(self, name: str):
        return getattr(self._client, name)

    def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        route = self._client.route(topic, refresh=refresh)
        if refresh or not self._looks[topic]:
            self._looks[topic] += 1
        if self._looks[topic] > 1:
            return route
        return TopicRoute(
            topic,
            tuple(b for b in route.brokers if b.broker_name != self._broker),
            tuple(q for q in route.queues if q.broker_name != self._broker),
        )


class _UnrecordedQueues(CommitRecords):
    """Commit records whose started record has no scan start for the queues of broker group ``broker`` (queues
    added to a topic after its commit began)."""

    def __init__(self, client, group: str, topic: str, broker: str) -> None:
        super().__init__(client, group, topic, QUERY)
        self._broker = broker

    def locate(self, topics) -> tuple[str, CommitRecord | None]:
        home, record = super().locate(topics)
        if record is None or record.step is CommitStep.DONE:
            return home, record
        return home, replace(record, scan={mq: s for mq, s in record.scan.items() if mq.broker_name != self._broker})


class _Retention:
    """A client to which broker group ``broker`` answers first offsets past every message stored (its retention
    deleted them)."""

    def __init__(self, client, broker: str) -> None:
        self._client, self._broker = client, broker

    def __getattr__(self, name: str):
        return getattr(self._client, name)

    def min_offsets(self, mqs, *, partial: bool = False):
        answers = self._client.min_offsets(mqs, partial=partial)
        mine = [mq for mq in answers if mq.broker_name == self._broker]
        if mine:
            answers.update(self._client.max_offsets(mine))
        return answers


BODIES = [f"s{i}" for i in range(12)] + ["dup", "dup"]
QUERY = "0c8d1f7e-streaming-query-of-these-tests"  # Spark's query id: one checkpoint's, across its restarts


def _options(mq: EmbeddedRocketMQ, topic: str, retry_timeout_ms: int = 3000) -> SinkOptions:
    return parse_sink_options(
        {
            "nameServer": mq.name_server,
            "topic": topic,
            "deliveryGuarantee": "exactly_once",
            "producerGroup": f"pg-{topic}"[:60],
            "brokerRetryTimeoutMs": str(retry_timeout_ms),
        }
    )


def _tasks(options: SinkOptions, batch_id: int, bodies: list[str], tasks: int = 2) -> list[SinkCommit]:
    """``tasks`` tasks of micro-batch ``batch_id`` that send ``bodies`` as half messages over today's write route."""
    with shared_client(options) as client:
        client.route(options.topic, refresh=True)
    size = -(-len(bodies) // tasks)
    with mock.patch.object(writers, "_partition", side_effect=itertools.count().__next__):  # Spark's partition ids
        return [
            write_task(
                options,
                iter([pa.RecordBatch.from_pydict({"body": bodies[i : i + size]})]),
                MicroBatch(QUERY, batch_id),
            )
            for i in range(0, len(bodies), size)
        ]


def _crash_inside_commit(options: SinkOptions, batch_id: int, commits: int, late: str | None = None) -> None:
    """Batch ``batch_id`` sent, and its commit cut after ``commits`` COMMITs (on every broker group); with
    ``late``, the commit's first look at the route misses that broker group."""
    halves = [pair for m in _tasks(options, batch_id, BODIES) for pair in m.halves]
    assert {h.queue.broker_name for _, h in halves} == {"broker-a", "broker-b"}
    with new_client(options) as client:
        seen = _LateRegistration(client, late) if late else client
        with pytest.raises(_Crash):
            commit_batch(
                CommitRecords(_DiesAfter(seen, commits), options.producer_group, options.topic, QUERY),
                batch_id,
                halves,
                options.broker_retry_timeout,
            )


def _visible(mq: EmbeddedRocketMQ, topic: str, broker: str | None = None) -> collections.Counter:
    """The bodies the Java consumer sees in ``topic`` (on ``broker`` only, if named)."""
    return collections.Counter(_body(m) for m in mq.consume(topic, **({"broker": broker} if broker else {})))


def _settled(mq: EmbeddedRocketMQ, topic: str) -> None:
    """Wait until the brokers have applied what the cut commit had in flight: END_TRANSACTIONs sent before the cut
    and the dispatch of committed messages into their queues both land after the sender has moved on, later on a
    loaded machine. Settled: the visible bodies unchanged for a second."""
    last, deadline = None, time.monotonic() + 20
    while (now := _visible(mq, topic)) != last:
        assert time.monotonic() < deadline, "the topic kept changing after the cut commit"
        last = now
        time.sleep(1)


class _Outage:
    """Members of a broker group stopped one after the other, all started again (slaves first) on exit."""

    def __init__(self, mq: EmbeddedRocketMQ, broker: str) -> None:
        self._mq, self._broker, self._stopped = mq, broker, []

    def stop(self, broker_id: int) -> None:
        self._mq.stop_broker(self._broker, broker_id)
        self._stopped.append(broker_id)

    def __enter__(self) -> _Outage:
        return self

    def __exit__(self, *exc: object) -> None:
        for broker_id in sorted(self._stopped, reverse=True):
            self._mq.start_broker(self._broker, broker_id)


def _recover(options: SinkOptions, records_of: Callable[[object], CommitRecords]) -> Outcome:
    """A restarted driver runs the cut batch 0 again and commits it through the records ``records_of(client)``."""
    halves = [pair for m in _tasks(options, 0, BODIES) for pair in m.halves]
    with new_client(options) as client:
        return commit_batch(records_of(client), 0, halves, options.broker_retry_timeout)


def _replay(options: SinkOptions, batch_id: int) -> None:
    """A restarted driver runs batch ``batch_id`` again: its tasks, then the stream writer's commit."""
    _replay_rows(options, batch_id, BODIES)


def _replay_rows(options: SinkOptions, batch_id: int, bodies: list[str]) -> None:
    """A restarted driver runs batch ``batch_id`` again with ``bodies`` as its rows (none: one task without rows)."""
    if bodies:
        tasks = _tasks(options, batch_id, bodies)
    else:
        tasks = [write_task(options, iter([]), MicroBatch(QUERY, batch_id))]
    RocketMQStreamWriter(options).commit(tasks, batch_id)


def test_a_cut_commit_waits_for_the_marker_broker_and_completes_once_it_is_back(replicated_pair, request):
    topic = unique_topic(request)
    replicated_pair.create_topic(topic, queues=2)
    options = _options(replicated_pair, topic)
    RocketMQStreamWriter(options).commit(_tasks(options, 0, ["r0", "r1", "r2"]), 0)  # the marker: broker-a
    _crash_inside_commit(options, 1, commits=3)
    _settled(replicated_pair, topic)
    partial, partial_b = _visible(replicated_pair, topic), _visible(replicated_pair, topic, "broker-b")
    assert 3 < sum(partial.values()) < 3 + len(BODIES)

    with _Outage(replicated_pair, "broker-a") as outage:
        outage.stop(0)  # its slave stays: the marker's group has no master
        with pytest.raises(CommitError, match="broker-a have no master answering.*Restarting the query completes"):
            _replay(options, 1)
        outage.stop(1)  # the whole group leaves the route
        with pytest.raises(CommitError, match="keeps the commit records .*recorded by broker-b.* not in the route"):
            _replay(options, 1)
        assert _visible(replicated_pair, topic, "broker-b") == partial_b, "a replay committed rows on broker-b"
    _replay(options, 1)
    assert _visible(replicated_pair, topic) == collections.Counter(["r0", "r1", "r2"] + BODIES)


def test_a_cut_commit_waits_for_every_broker_group_it_wrote_to(replicated_pair, request):
    topic = unique_topic(request)
    replicated_pair.create_topic(topic, queues=2)
    options = _options(replicated_pair, topic)
    _crash_inside_commit(options, 0, commits=3)
    _settled(replicated_pair, topic)
    partial, partial_a = _visible(replicated_pair, topic), _visible(replicated_pair, topic, "broker-a")
    assert partial_a and partial != partial_a, "the cut commit did not reach both broker groups"

    with _Outage(replicated_pair, "broker-b") as outage:
        outage.stop(0)
        with pytest.raises(
            CommitError, match=r"reading back the rows of batch 0: broker group\(s\) broker-b have no master answering"
        ):
            _replay(options, 0)
        outage.stop(1)
        with pytest.raises(
            CommitError, match=r"broker group\(s\) broker-b \(.*\) of the commit .* are not in the topic route now"
        ):
            _replay(options, 0)
        assert _visible(replicated_pair, topic, "broker-a") == partial_a, "a replay committed rows on broker-a"
    _replay(options, 0)
    assert _visible(replicated_pair, topic) == collections.Counter(BODIES)


def _cut_with_rows_on_broker_b(pair: EmbeddedRocketMQ, request, late: str | None = None) -> SinkOptions:
    """A new topic whose batch 0 commit was cut after 4 COMMITs, some of them on broker-b."""
    topic = unique_topic(request)
    pair.create_topic(topic, queues=2)
    options = _options(pair, topic)
    _crash_inside_commit(options, 0, commits=4, late=late)
    _settled(pair, topic)
    assert _visible(pair, topic, "broker-b"), "the cut commit stored nothing on broker-b"
    return options


def test_a_commit_begun_on_a_route_that_misses_a_broker_group_is_recovered_once(replicated_pair, request):
    # The commit starts while the name server's route lacks broker-b (registering again after a restart), though
    # its halves are there: where a recovery scans broker-b's queues from must still be recorded, or the replay
    # cannot see the rows the cut commit stored there and commits them again.
    options = _cut_with_rows_on_broker_b(replicated_pair, request, late="broker-b")
    _replay(options, 0)
    assert _visible(replicated_pair, options.topic) == collections.Counter(BODIES)


def test_a_recovery_reads_a_queue_without_a_recorded_scan_start_from_its_first_offset(replicated_pair, request):
    options = _cut_with_rows_on_broker_b(replicated_pair, request)
    outcome = _recover(options, lambda c: _UnrecordedQueues(c, options.producer_group, options.topic, "broker-b"))
    assert outcome is Outcome.RECOVERED
    assert _visible(replicated_pair, options.topic) == collections.Counter(BODIES)


def test_a_cut_batch_replayed_with_other_partitioning_is_committed_once(replicated_pair, request):
    # row keys must not name the task's partition: a replay split otherwise would commit rows again
    options = _cut_with_rows_on_broker_b(replicated_pair, request)
    RocketMQStreamWriter(options).commit(_tasks(options, 0, BODIES, tasks=len(BODIES)), 0)  # a row a task
    assert _visible(replicated_pair, options.topic) == collections.Counter(BODIES)


def test_a_recovery_scans_the_queues_of_the_cut_commit_not_of_today(replicated_pair, request):
    # broker-b's topic shrank from 2 queues to 1 between the cut and the recovery; the rows the cut
    # commit stored in its queue 1 must not be committed again
    options = _cut_with_rows_on_broker_b(replicated_pair, request)
    assert _visible(replicated_pair, options.topic, "broker-b")
    replicated_pair.create_topic(options.topic, queues=1, broker="broker-b")
    try:
        with pytest.raises(
            CommitError,
            match=r"broker-b/1 holds messages stored since batch 0's commit began .*"
            r"no longer has it as a readable queue.*at least 2 read queues",
        ):
            _replay(options, 0)
    finally:
        replicated_pair.create_topic(options.topic, queues=2, broker="broker-b")
    _replay(options, 0)
    assert _visible(replicated_pair, options.topic) == collections.Counter(BODIES)


def test_a_recovery_whose_scan_window_retention_deleted_says_so(replicated_pair, request):
    options = _cut_with_rows_on_broker_b(replicated_pair, request)
    with pytest.raises(CommitError, match=r"retention deleted messages of .*broker-b.* new producerGroup"):
        _recover(
            options, lambda c: CommitRecords(_Retention(c, "broker-b"), options.producer_group, options.topic, QUERY)
        )


def test_a_pair_added_after_the_first_commit_names_the_home_so_a_replay_waits_for_it(replicated_pair, request):
    # The topic grows to broker-b after the home (broker-a) was chosen. When broker-a is away at the replay of a cut
    # commit, broker-b's queue 0 must name the home: a commit that found no home named would choose broker-b, read no
    # record and commit the rows stored there again.
    topic = unique_topic(request)
    replicated_pair.create_topic(topic, queues=2, broker="broker-a")
    options = _options(replicated_pair, topic)
    RocketMQStreamWriter(options).commit(_tasks(options, 0, ["r0", "r1"]), 0)  # the home: broker-a
    replicated_pair.create_topic(topic, queues=2, broker="broker-b")
    _crash_inside_commit(options, 1, commits=4)
    _settled(replicated_pair, topic)
    partial_b = _visible(replicated_pair, topic, "broker-b")
    assert partial_b, "the cut commit stored nothing on broker-b"
    with _Outage(replicated_pair, "broker-a") as outage:
        outage.stop(0)
        outage.stop(1)  # the home leaves the route
        with pytest.raises(CommitError, match="keeps the commit records .*recorded by broker-b.* not in the route"):
            _replay(options, 1)
        assert _visible(replicated_pair, topic, "broker-b") == partial_b, "a replay committed rows on broker-b"
    _replay(options, 1)
    assert _visible(replicated_pair, topic) == collections.Counter(["r0", "r1", *BODIES])


def test_a_commit_waits_for_a_topic_whose_only_broker_group_restarts(replicated_pair, request):
    # While the topic's only broker group is out of the route the name servers answer TOPIC_NOT_EXIST for it: a
    # commit waits that out as it waits for any broker that is away.
    topic = unique_topic(request)
    replicated_pair.create_topic(topic, queues=2, broker="broker-a")
    options = _options(replicated_pair, topic, retry_timeout_ms=90_000)
    writer = RocketMQStreamWriter(options)
    writer.commit(_tasks(options, 0, ["r0"]), 0)
    batch = _tasks(options, 1, BODIES)
    for broker_id in (1, 0):
        replicated_pair.stop_broker("broker-a", broker_id)

    def come_back() -> None:
        time.sleep(3)
        for broker_id in (1, 0):
            replicated_pair.start_broker("broker-a", broker_id)

    back = threading.Thread(target=come_back)
    back.start()
    try:
        writer.commit(batch, 1)
    finally:
        back.join()
    assert _visible(replicated_pair, topic) == collections.Counter(["r0", *BODIES])


def test_a_recovery_scans_the_queue_each_half_names_though_the_topic_shrank_before_the_commit(replicated_pair, request):
    # Halves sent to queues 2 and 3, then the topic shrinks to 2 queues before the commit begins: END_TRANSACTION
    # still stores each half in its own queue, and a recovery that scanned only the route's queues would commit those
    # rows again.
    topic = unique_topic(request)
    replicated_pair.create_topic(topic, queues=4)
    options = _options(replicated_pair, topic)
    halves = [pair for m in _tasks(options, 0, BODIES) for pair in m.halves]
    assert {h.queue.queue_id for _, h in halves} == {0, 1, 2, 3}
    replicated_pair.create_topic(topic, queues=2)
    try:
        with new_client(options) as client, pytest.raises(_Crash):
            records = CommitRecords(_DiesAfter(client, len(halves) - 2), options.producer_group, topic, QUERY)
            commit_batch(records, 0, halves, options.broker_retry_timeout)
        _settled(replicated_pair, topic)
        with pytest.raises(CommitError, match=r"/[23] holds messages stored since batch 0's commit began"):
            _replay(options, 0)
    finally:
        replicated_pair.create_topic(topic, queues=4)
    _replay(options, 0)
    assert _visible(replicated_pair, topic) == collections.Counter(BODIES)


def test_a_replay_with_other_rows_than_the_cut_batch_is_refused_naming_the_cause(replicated_pair, request):
    options = _cut_with_rows_on_broker_b(replicated_pair, request)
    before = _visible(replicated_pair, options.topic)
    with pytest.raises(CommitError, match=r"replay of batch 0 is not the batch whose commit was cut.*deterministic"):
        _replay_rows(options, 0, [*BODIES[:-1], "changed"])
    with pytest.raises(CommitError, match=r"replay of batch 0 .*(not the batch|no rows).*deterministic"):
        _replay_rows(options, 0, [])  # a replay that lost every row must not let the next batch begin over it
    assert _visible(replicated_pair, options.topic) == before
    _replay(options, 0)
    assert _visible(replicated_pair, options.topic) == collections.Counter(BODIES)


class _Reads:
    """A client that records the keyword arguments of its range reads."""

    def __init__(self, client, seen: list) -> None:
        self._client, self._seen = client, seen

    def __getattr__(self, name: str):
        return getattr(self._client, name)

    def read_range(self, mq, start, end, **kw):
        self._seen.append(kw)
        return self._client.read_range(mq, start, end, **kw)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()


def test_a_recovery_reads_back_within_broker_retry_timeout(replicated_pair, request, monkeypatch):
    options = _cut_with_rows_on_broker_b(replicated_pair, request)
    seen: list = []
    fresh = writers.new_client
    monkeypatch.setattr(writers, "new_client", lambda o: _Reads(fresh(o), seen))
    _replay(options, 0)
    assert seen and all(kw.get("retry_timeout") == options.broker_retry_timeout for kw in seen), seen
    assert _visible(replicated_pair, options.topic) == collections.Counter(BODIES)


def test_a_replay_finds_the_home_through_a_broker_group_the_topic_reached_after_the_last_commit(
    replicated_pair, request
):
    # Batch 0 was committed, and the driver died before Spark logged it. The topic then spread to broker-b, and the
    # home (broker-a) is away when the batch is replayed, all of it to broker-b: broker-b never held a pair of the
    # query, but its own topic's queue 0 names the home, so the replay waits instead of choosing a new home.
    topic = unique_topic(request)
    replicated_pair.create_topic(topic, queues=2, broker="broker-a")
    options = _options(replicated_pair, topic)
    RocketMQStreamWriter(options).commit(_tasks(options, 0, BODIES), 0)
    replicated_pair.create_topic(topic, queues=2, broker="broker-b")
    with _Outage(replicated_pair, "broker-a") as outage:
        outage.stop(0)
        outage.stop(1)
        with pytest.raises(CommitError, match="keeps the commit records .*recorded by broker-b.* not in the route"):
            _replay(options, 0)
        assert not _visible(replicated_pair, topic, "broker-b"), "a replay committed the batch again"
    _replay(options, 0)
    assert _visible(replicated_pair, topic) == collections.Counter(BODIES)


def test_the_home_is_kept_on_the_name_servers_which_write_it_to_disk_at_once(replicated_pair, request):
    # Consumer offsets are flushed every few seconds; a broker killed just after a commit forgets the fingerprints.
    # The name servers' KV config is written to disk at each put.
    topic = unique_topic(request)
    replicated_pair.create_topic(topic, queues=2)
    options = _options(replicated_pair, topic)
    RocketMQStreamWriter(options).commit(_tasks(options, 0, ["r0", "r1"]), 0)
    with new_client(options) as client:
        assert client.name_server_values(HOME_KV_NAMESPACE, options.producer_group) == {
            replicated_pair.name_server: "broker-a"
        }
        assert client.name_server_values(HOME_KV_NAMESPACE, "no-such-group") == {replicated_pair.name_server: None}
