"""RocketMQ 4.9.7 in DLedger mode (tests/support/dledger_cluster.py): broker group broker-a as three Raft members.
The leader is SIGKILLed while messages are sent; the two others elect one of them, which the route then lists at
brokerId 0. A consumer sees only what a majority stored, so the elected leader holds every message a query read:
nothing is cut, and a query must deliver every message the group holds once, through the election and after the
killed member rejoined as a follower. Marked ``ha`` (long: run them with ``-m ha``)."""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest
from pyspark.errors import StreamingQueryException

from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.model import OutgoingMessage
from rmq_spark.client.remoting.client import RemotingClient
from tests.integration.kill_job import sink_writer
from tests.integration.streaming import wait_for
from tests.support.dledger_cluster import DLedgerCluster
from tests.support.stock_cluster import StockProcess
from tests.support.waiting import wait_until

TOPIC = "Raft"
QUEUES = 2
GROUP = "broker-a"
RECORDS_TOPIC = "rmq_spark_commits_raft-copy"  # the copy's commit records (producer group raft-copy)
SEND_PATIENCE_S = 180.0  # how long one message's sends are retried: an election, its catching up and a slow machine


class Notes:
    """What a test saw and when, for its failure message and the log."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._t0 = time.monotonic()

    def __call__(self, what: str) -> None:
        self.lines.append(f"{time.monotonic() - self._t0:7.1f}s {what}")

    def __str__(self) -> str:
        return "\n".join(self.lines)


class Rows:
    """A foreachBatch sink on the driver: (queueId, queueOffset, body) of every message delivered, in order."""

    def __init__(self) -> None:
        self.got: list[tuple[int, int, str]] = []
        self._lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.select("queueId", "queueOffset", "body").collect()
        with self._lock:
            self.got.extend((r[0], r[1], bytes(r[2]).decode()) for r in rows)

    def bodies(self) -> set[str]:
        with self._lock:
            return {b for _, _, b in self.got}

    def has(self, bodies) -> bool:
        return set(bodies) <= self.bodies()


class Producer(threading.Thread):
    """Sends ``label-i`` to the topic's queues in turn, one message at a time, each retried until the group takes
    it (SEND_PATIENCE_S at most), the route looked up again after a failure, as a producer retries through a
    fail-over. A retried send the broker stored but did not answer is stored twice: the brokers' holding, not the
    acknowledged sends, is what a query must deliver."""

    def __init__(self, name_server: str, label: str) -> None:
        super().__init__(daemon=True)
        self.name_server, self.label = name_server, label
        self.acked: list[str] = []
        self.retried: list[tuple[str, str]] = []  # (name, error) of every failed try
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            with RemotingClient(self.name_server, request_timeout=3.0, connect_timeout=2.0) as client:
                queues = client.queues(TOPIC, refresh=True)
                i = 0
                while not self._halt.is_set():
                    name = f"{self.label}-{i}"
                    _send_retrying(client, queues[i % len(queues)], name, self.retried)
                    self.acked.append(name)
                    i += 1
                    time.sleep(0.01)
        except BaseException as e:  # noqa: BLE001 - the test reports it
            self.error = e

    def check(self) -> None:
        """Raise if the producer gave up (for ``wait_until``)."""
        if self.error is not None:
            raise AssertionError(f"the producer gave up: {self.error}")

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(SEND_PATIENCE_S + 10)


def _send_retrying(client: RemotingClient, mq, name: str, retried: list[tuple[str, str]]) -> None:
    deadline = time.monotonic() + SEND_PATIENCE_S
    while True:
        try:
            client.send(mq, OutgoingMessage(body=name.encode()))
            return
        except RocketMQError as e:
            retried.append((name, f"{type(e).__name__}: {e}"[:200]))
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            with contextlib.suppress(RocketMQError):
                client.route(mq.topic, refresh=True)


def _send(cluster: DLedgerCluster, label: str, per_queue: int) -> list[str]:
    """``per_queue`` messages to every queue, bodies ``label-q-i``, each send retried; the names."""
    names, retried = [], []
    with RemotingClient(cluster.name_server, request_timeout=3.0, connect_timeout=2.0) as client:
        for q, mq in enumerate(client.queues(TOPIC, refresh=True)):
            for i in range(per_queue):
                name = f"{label}-{q}-{i}"
                _send_retrying(client, mq, name, retried)
                names.append(name)
    return names


def _held(cluster: DLedgerCluster) -> list[tuple[int, int, str]]:
    """(queueId, queueOffset, body) of every message the group holds, as RocketMQ's Java pull consumer reads them."""
    return [
        (m["queueId"], m["queueOffset"], base64.b64decode(m["bodyBase64"]).decode())
        for m in cluster.consume(TOPIC)
        if m["topic"] == TOPIC
    ]


def _stream(spark, cluster: DLedgerCluster, sink: Rows, checkpoint):
    return (
        spark.readStream.format("rocketmq")
        .option("nameServer", cluster.name_server)
        .option("topic", TOPIC)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


@pytest.mark.ha
@pytest.mark.timeout(1800)  # four JVMs and a stream: minutes on two loaded cores
def test_a_stream_delivers_every_message_once_through_a_leader_kill(spark, tmp_path):
    """A stream (failOnDataLoss: the default, true) reads while the leader is SIGKILLed under sends: it delivers
    every message the group holds once, fails on no data loss, and goes on once the killed member is back as a
    follower."""
    note = Notes()
    with DLedgerCluster(tmp_path / "rocketmq") as cluster:
        cluster.create_topic(TOPIC, queues=QUEUES)
        note(f"cluster up: leader {cluster.master(GROUP).name}, followers {[p.name for p in cluster.slaves(GROUP)]}")
        sink = Rows()
        query = _stream(spark, cluster, sink, tmp_path / "checkpoint")
        producer = Producer(cluster.name_server, "during")
        try:
            before = _send(cluster, "before", 50)
            wait_for(lambda: sink.has(before), 180, "the query to read the messages before the kill", query)
            note(f"{len(before)} messages read before the kill")

            producer.start()
            wait_until(lambda: len(producer.acked) >= 100, 120, "100 sends under way", producer.check)
            leader = cluster.master(GROUP)
            at_kill = len(producer.acked)
            cluster.kill_member(leader)
            note(f"SIGKILL {leader.name} after {at_kill} acknowledged sends of the producer")
            elected = cluster.wait_new_master(GROUP, leader, timeout=180)
            note(f"{elected.name} is master in the route; the producer had {len(producer.acked)} acknowledged")
            wait_until(
                lambda: len(producer.acked) >= at_kill + 200,
                180,
                "200 sends acknowledged after the kill",
                producer.check,
            )
            producer.stop()
            note(f"producer stopped: {len(producer.acked)} acknowledged, {len(producer.retried)} tries failed")
            assert producer.error is None, f"the producer gave up: {producer.error}"

            after = _send(cluster, "after", 50)
            held = _held(cluster)
            note(f"the group holds {len(held)} messages after the election")
            wait_until(
                lambda: sink.has({b for _, _, b in held}),
                240,
                "the query to read every message the group holds after the election",
                query,
            )
            note("every held message read")

            cluster.restart_member(leader)
            cluster.wait_slave(GROUP, leader, timeout=180)
            note(f"{leader.name} rejoined as a slave; master {cluster.master(GROUP).name}")
            later = _send(cluster, "later", 20)
            held = _held(cluster)
            wait_for(
                lambda: sink.has({b for _, _, b in held}),
                180,
                "the query to read the messages sent after the rejoin",
                query,
            )
            time.sleep(3)  # a few more batches: any re-read would show now
            query.processAllAvailable()
            note(f"done: {len(sink.got)} rows delivered, {len(held)} held")
        finally:
            producer.stop()
            query.stop()

    report = f"{note}\nfailed send tries (first 5): {producer.retried[:5]}"
    assert query.exception() is None, f"{query.exception()}\n{report}"
    positions = Counter((q, o) for q, o, _ in sink.got)
    twice = sorted(p for p, n in positions.items() if n > 1)
    assert not twice, f"{len(twice)} queue offsets delivered more than once, e.g. {twice[:5]}\n{report}"
    delivered, stored = set(sink.got), set(held)
    assert delivered == stored, (
        f"delivered but not held: {sorted(delivered - stored)[:5]} ({len(delivered - stored)}); held but not "
        f"delivered: {sorted(stored - delivered)[:5]} ({len(stored - delivered)})\n{report}"
    )
    # what Raft promises, not the connector: every acknowledged send is held
    lost = set(before + producer.acked + after + later) - {b for _, _, b in held}
    assert not lost, f"{len(lost)} acknowledged sends are not held, e.g. {sorted(lost)[:5]}\n{report}"
    print(report)


def _not_failed(query):
    def check() -> None:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")

    return check


def _copy(spark, cluster: DLedgerCluster, checkpoint, rows: int):
    """An exactly-once copy of CopySource into CopyTarget (property ``src``: the source position), one batch of at
    most ``rows`` messages, run to the end of what is there (availableNow). A commit waits a minute for a broker
    (brokerRetryTimeoutMs; 10 minutes by default): ten times an election here, and a stuck commit fails soon."""
    writer = sink_writer(
        spark, cluster.name_server, "CopySource", "CopyTarget", "exactly_once", "raft-copy", str(checkpoint), limit=rows
    )
    return writer.option("brokerRetryTimeoutMs", "60000").trigger(availableNow=True).start()


# The broker asks a transaction's producer group about a half left open every transactionCheckInterval (60 s by
# default): every 5 s here, so that a half of the cut commit that something ended late would show before the read.
COPY_BROKER_CONFIG = {"transactionCheckInterval": "5000"}


def _send_rows(cluster: DLedgerCluster, label: str, rows: int) -> None:
    """``rows`` source rows, spread over the source's queues in batches of 100."""
    with RemotingClient(cluster.name_server) as client:
        for q, mq in enumerate(client.queues("CopySource", refresh=True)):
            for b in range(0, rows // QUEUES, 100):
                client.send(mq, [OutgoingMessage(body=f"{label} {q} {b + i}".encode()) for i in range(100)])


def _copy_through_a_kill(
    spark,
    cluster: DLedgerCluster,
    checkpoint,
    rows: int,
    notes: Notes,
    kill_when: Callable[[RemotingClient, StockProcess], str | None],
) -> None:
    """Run the copy of the ``rows`` waiting rows; SIGKILL the leader once ``kill_when(client, leader)`` tells what
    it waited for, and wait for the election; should the query fail, start it again on its checkpoint (as a
    supervisor would) and wait until it ends."""
    queries = []
    try:
        with RemotingClient(cluster.name_server) as client:
            queries.append(query := _copy(spark, cluster, checkpoint, rows))
            leader = cluster.master(GROUP)
            seen: list[str] = []
            wait_until(
                lambda: seen.append(kill_when(client, leader)) or seen[-1],
                180,
                "the point of the kill",
                _not_failed(query),
                poll=0.01,
            )
        copied = {p.name: cluster.has_topic(p, RECORDS_TOPIC) for p in cluster.slaves(GROUP)}
        cluster.kill_member(leader)
        notes(f"SIGKILL {leader.name}: {seen[-1]}; the followers had the records topic: {copied}")
        elected = cluster.wait_new_master(GROUP, leader, timeout=180)
        notes(f"{elected.name} is master; it has the records topic: {cluster.has_topic(elected, RECORDS_TOPIC)}")
        with contextlib.suppress(StreamingQueryException):
            query.awaitTermination(600)
        notes(f"the copy ended: active {query.isActive}, error: {str(query.exception())[:400]}")
        query.stop()
        if query.exception() is not None:  # restarted as a supervisor restarts a failed query
            queries.append(again := _copy(spark, cluster, checkpoint, rows))
            with contextlib.suppress(StreamingQueryException):
                assert again.awaitTermination(300), f"the restarted copy did not end within 300 s\n{notes}"
            notes(f"the restarted copy ended, error: {str(again.exception())[:1500]}")
            assert again.exception() is None, f"{again.exception()}\n{notes}"
        time.sleep(15)  # three transaction checks of the halves the cut commit left open
    finally:  # none may outlive the test in the shared Spark session
        for query in queries:
            query.stop()


def _in_target(cluster: DLedgerCluster, rows: int, of: int) -> Callable[[RemotingClient, StockProcess], str | None]:
    """The kill point once ``rows`` more rows (of the batch's ``of``) are in the target: the commit is ending
    halves, one END_TRANSACTION in flight per queue."""
    with RemotingClient(cluster.name_server) as client:
        base = sum(client.max_offsets(client.queues("CopyTarget", refresh=True)).values())

    def when(client: RemotingClient, leader: StockProcess) -> str | None:
        held = sum(client.max_offsets(client.queues("CopyTarget")).values()) - base
        return f"{held} of {of} rows in the target" if held >= rows else None

    return when


def _assert_every_row_once(read: list[dict], rows: int, notes: Notes) -> None:
    positions = {f"{m['brokerName']}/{m['queueId']}/{m['queueOffset']}" for m in read if m["topic"] == "CopySource"}
    copies = Counter(m["properties"].get("src") for m in read if m["topic"] == "CopyTarget")
    duplicates = {k: n for k, n in copies.items() if n > 1}
    missing = positions - copies.keys()
    assert len(positions) == rows
    assert not duplicates and not missing, (
        f"{len(duplicates)} rows stored more than once (e.g. {sorted(duplicates)[:5]}), {len(missing)} missing "
        f"(e.g. {sorted(missing)[:5]}) of {len(positions)}\n{notes}"
    )


@pytest.mark.ha
@pytest.mark.timeout(1800)
def test_an_exactly_once_copy_keeps_every_row_once_through_a_leader_kill(spark, tmp_path):
    """An exactly-once copy whose commit is ending halves when the leader is SIGKILLed. A commit step sent into the
    dying leader has lost its answer (it may have been applied), so the query fails with a CommitError, by design;
    restarted on its checkpoint once the group has a leader again, it completes the batch: every source row is in
    the target once. A first batch makes the commit records topic, which the followers copy before the kill (a
    topic is not in the Raft log)."""
    notes = Notes()
    checkpoint = tmp_path / "checkpoint"
    with DLedgerCluster(tmp_path / "rocketmq", broker_config=COPY_BROKER_CONFIG) as cluster:
        cluster.create_topic("CopySource", queues=QUEUES)
        cluster.create_topic("CopyTarget", queues=QUEUES)
        _send_rows(cluster, "first", 200)
        first = _copy(spark, cluster, checkpoint, 200)
        try:
            assert first.awaitTermination(300), "the first copy did not end within 300 s"
        finally:
            first.stop()
        assert first.exception() is None, first.exception()
        cluster.wait_topic_on_members(RECORDS_TOPIC)
        notes("first batch of 200 rows copied; the records topic is on every member")
        _send_rows(cluster, "second", 1000)
        _copy_through_a_kill(spark, cluster, checkpoint, 1000, notes, _in_target(cluster, 250, 1000))
        read = cluster.consume("CopySource", "CopyTarget")
    _assert_every_row_once(read, 1200, notes)
    print(notes)


@pytest.mark.ha
@pytest.mark.timeout(1800)
def test_an_exactly_once_copy_whose_first_commit_is_cut_keeps_every_row_once(spark, tmp_path):
    """The leader is SIGKILLed inside the copy's first commit as it begins ending halves, a moment after that commit
    made the commit records topic on it and wrote its first record: its followers copy topics from their master
    every 10 s, so the elected one most likely lacks the topic (the notes say), though the records are in its log,
    and the name server still routes the topic to the group (a master's registration adds topics, never drops
    one). The restarted query must complete the batch: every row once."""
    notes = Notes()
    with DLedgerCluster(tmp_path / "rocketmq", broker_config=COPY_BROKER_CONFIG) as cluster:
        cluster.create_topic("CopySource", queues=QUEUES)
        cluster.create_topic("CopyTarget", queues=QUEUES)
        _send_rows(cluster, "only", 1000)
        _copy_through_a_kill(spark, cluster, tmp_path / "checkpoint", 1000, notes, _in_target(cluster, 10, 1000))
        read = cluster.consume("CopySource", "CopyTarget")
    _assert_every_row_once(read, 1000, notes)
    print(notes)
