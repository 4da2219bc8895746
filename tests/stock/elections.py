"""What the stock tier's election tests share (test_elections.py, test_controller_ha.py): the replicated clusters
they run (``CLUSTERS``), a producer that retries through a fail-over, what a stream delivered, and the exactly-once
copy whose leader is killed inside a commit."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from pyspark.errors import StreamingQueryException

from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.model import MessageQueue, OutgoingMessage
from rmq_spark.client.remoting.client import RemotingClient
from tests.integration.kill_job import sink_writer
from tests.support.controller_cluster import ControllerCluster
from tests.support.dledger_cluster import DLedgerCluster
from tests.support.member_cluster import MemberCluster
from tests.support.stock_cluster import StockProcess
from tests.support.waiting import wait_until

GROUP = "broker-a"
QUEUES = 2
SEND_PATIENCE_S = 180.0  # how long one message's sends are retried: an election, its catching up and a slow machine
COPY_GROUP = "raft-copy"  # the exactly-once copy's producer group
RECORDS_TOPIC = f"rmq_spark_commits_{COPY_GROUP}"


def dledger(root: Path, **config: str) -> MemberCluster:
    """4.9.7 in DLedger mode: three members in one Raft group."""
    return DLedgerCluster(root, broker_config=config)


def controller_sync(root: Path, **config: str) -> MemberCluster:
    """5.5.0 in Controller mode with allAckInSyncStateSet=true: two members, a send answered once both have it."""
    return ControllerCluster(root, sync=True, broker_config=config)


# the replicated clusters every election test runs on, by test id: none cuts what a consumer could read
CLUSTERS: dict[str, Callable[..., MemberCluster]] = {"dledger-4.9.7": dledger, "controller-sync-5.5.0": controller_sync}


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
    """A foreachBatch sink on the driver: (queueId, queueOffset, name) of every message delivered, in order; a
    message's name is its body up to ``|``."""

    def __init__(self) -> None:
        self.got: list[tuple[int, int, str]] = []
        self._lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.select("queueId", "queueOffset", "body").collect()
        with self._lock:
            self.got.extend((r[0], r[1], bytes(r[2]).split(b"|")[0].decode()) for r in rows)

    def names(self) -> list[str]:
        with self._lock:
            return [name for _, _, name in self.got]

    def has(self, names: Iterable[str]) -> bool:
        return set(names) <= set(self.names())

    def twice(self) -> list[str]:
        """The names delivered more than once."""
        return sorted(name for name, n in Counter(self.names()).items() if n > 1)


def send_retrying(
    client: RemotingClient, mq: MessageQueue, message: OutgoingMessage, retried: list[tuple[str, str]] | None = None
) -> None:
    """Send ``message`` until the group takes it (SEND_PATIENCE_S at most), the route looked up again after a
    failure, as a producer retries through a fail-over; each failed try is noted in ``retried``."""
    deadline = time.monotonic() + SEND_PATIENCE_S
    while True:
        try:
            client.send(mq, message)
            return
        except RocketMQError as e:
            if retried is not None:
                retried.append((message.body.split(b"|")[0].decode(), f"{type(e).__name__}: {e}"[:200]))
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            with contextlib.suppress(RocketMQError):
                client.route(mq.topic, refresh=True)


def send(cluster: MemberCluster, topic: str, label: str, per_queue: int, pad: int = 0) -> list[str]:
    """``per_queue`` messages to every queue of ``topic``, named ``label-q-i`` (their bodies: the name, then ``|``
    and ``pad`` bytes), each send retried; the names."""
    names: list[str] = []
    with RemotingClient(cluster.name_server, request_timeout=3.0, connect_timeout=2.0) as client:
        for q, mq in enumerate(client.queues(topic, refresh=True)):
            for i in range(per_queue):
                name = f"{label}-{q}-{i}"
                send_retrying(client, mq, OutgoingMessage(body=name.encode() + b"|" + b"x" * pad))
                names.append(name)
    return names


class Producer(threading.Thread):
    """Sends ``label-i`` to the topic's queues in turn, one message at a time, each retried (``send_retrying``).
    A retried send the broker stored but did not answer is stored twice: the brokers' holding, not the acknowledged
    sends, is what a query must deliver."""

    def __init__(self, name_server: str, topic: str, label: str) -> None:
        super().__init__(daemon=True)
        self.name_server, self.topic, self.label = name_server, topic, label
        self.acked: list[str] = []
        self.retried: list[tuple[str, str]] = []  # (name, error) of every failed try
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            with RemotingClient(self.name_server, request_timeout=3.0, connect_timeout=2.0) as client:
                queues = client.queues(self.topic, refresh=True)
                i = 0
                while not self._halt.is_set():
                    name = f"{self.label}-{i}"
                    send_retrying(client, queues[i % len(queues)], OutgoingMessage(body=name.encode()), self.retried)
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


def stream(spark, cluster: MemberCluster, topic: str, sink: Rows, checkpoint: Path, **options: str):
    """A stream of ``topic`` from its first offsets into ``sink``, a batch every 200 ms, with ``options``."""
    reader = (
        spark.readStream.format("rocketmq")
        .option("nameServer", cluster.name_server)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


# -- the exactly-once copy ---------------------------------------------------------------------------------------
# The broker asks a transaction's producer group about a half left open every transactionCheckInterval (60 s by
# default): every 5 s here, so that a half of the cut commit that something ended late would show before the read.
COPY_BROKER_CONFIG = {"transactionCheckInterval": "5000"}


def _not_failed(query) -> Callable[[], None]:
    def check() -> None:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")

    return check


def copy(spark, cluster: MemberCluster, checkpoint: Path, rows: int):
    """An exactly-once copy of CopySource into CopyTarget (property ``src``: the source position), one batch of at
    most ``rows`` messages, run to the end of what is there (availableNow). A commit waits a minute for a broker
    (brokerRetryTimeoutMs; 10 minutes by default): ten times an election here, and a stuck commit fails soon."""
    writer = sink_writer(
        spark, cluster.name_server, "CopySource", "CopyTarget", "exactly_once", COPY_GROUP, str(checkpoint), limit=rows
    )
    return writer.option("brokerRetryTimeoutMs", "60000").trigger(availableNow=True).start()


def send_rows(cluster: MemberCluster, label: str, rows: int) -> None:
    """``rows`` source rows, spread over the source's queues in batches of 100."""
    with RemotingClient(cluster.name_server) as client:
        for q, mq in enumerate(client.queues("CopySource", refresh=True)):
            for b in range(0, rows // QUEUES, 100):
                client.send(mq, [OutgoingMessage(body=f"{label} {q} {b + i}".encode()) for i in range(100)])


def copy_through_a_kill(
    spark,
    cluster: MemberCluster,
    checkpoint: Path,
    rows: int,
    notes: Notes,
    kill_when: Callable[[RemotingClient, StockProcess], str | None],
) -> None:
    """Run the copy of the ``rows`` waiting rows; SIGKILL the master once ``kill_when(client, master)`` tells what
    it waited for, and wait for the election; should the query fail, start it again on its checkpoint (as a
    supervisor would) and wait until it ends."""
    queries = []
    try:
        with RemotingClient(cluster.name_server) as client:
            queries.append(query := copy(spark, cluster, checkpoint, rows))
            master = cluster.master(GROUP)
            seen: list[str | None] = []
            wait_until(
                lambda: seen.append(kill_when(client, master)) or seen[-1],
                180,
                "the point of the kill",
                _not_failed(query),
                poll=0.01,
            )
        copied = {p.name: cluster.has_topic(p, RECORDS_TOPIC) for p in cluster.slaves(GROUP)}
        cluster.kill_member(master)
        notes(f"SIGKILL {master.name}: {seen[-1]}; the slaves had the records topic: {copied}")
        elected = cluster.wait_new_master(GROUP, master, timeout=180)
        notes(f"{elected.name} is master; it has the records topic: {cluster.has_topic(elected, RECORDS_TOPIC)}")
        with contextlib.suppress(StreamingQueryException):
            query.awaitTermination(600)
        notes(f"the copy ended: active {query.isActive}, error: {str(query.exception())[:400]}")
        query.stop()
        if query.exception() is not None:  # restarted as a supervisor restarts a failed query
            queries.append(again := copy(spark, cluster, checkpoint, rows))
            with contextlib.suppress(StreamingQueryException):
                assert again.awaitTermination(300), f"the restarted copy did not end within 300 s\n{notes}"
            notes(f"the restarted copy ended, error: {str(again.exception())[:1500]}")
            assert again.exception() is None, f"{again.exception()}\n{notes}"
        time.sleep(15)  # three transaction checks of the halves the cut commit left open
    finally:  # none may outlive the test in the shared Spark session
        for query in queries:
            query.stop()


def in_target(cluster: MemberCluster, rows: int, of: int) -> Callable[[RemotingClient, StockProcess], str | None]:
    """The kill point once ``rows`` more rows (of the batch's ``of``) are in the target: the commit is ending
    halves, one END_TRANSACTION in flight per queue."""
    with RemotingClient(cluster.name_server) as client:
        base = sum(client.max_offsets(client.queues("CopyTarget", refresh=True)).values())

    def when(client: RemotingClient, master: StockProcess) -> str | None:
        held = sum(client.max_offsets(client.queues("CopyTarget")).values()) - base
        return f"{held} of {of} rows in the target" if held >= rows else None

    return when


def assert_every_row_once(
    read: list[dict], rows: int, context: object, source: str = "CopySource", target: str = "CopyTarget"
) -> None:
    """Every message of ``source`` in ``read`` (as the Java consumer reads them) is in ``target`` once, by its
    position (property ``src``), and ``source`` holds ``rows``; ``context`` goes into the failure message."""
    positions = {f"{m['brokerName']}/{m['queueId']}/{m['queueOffset']}" for m in read if m["topic"] == source}
    copies = Counter(m["properties"].get("src") for m in read if m["topic"] == target)
    duplicates = {k: n for k, n in copies.items() if n > 1}
    missing = positions - copies.keys()
    assert len(positions) == rows
    assert not duplicates and not missing, (
        f"{len(duplicates)} rows stored more than once (e.g. {sorted(duplicates)[:5]}), {len(missing)} missing "
        f"(e.g. {sorted(missing)[:5]}) of {len(positions)}\n{context}"
    )
