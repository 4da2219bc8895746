"""RocketMQ 5's Controller mode with asynchronous replication (the default; tests/support/controller_cluster.py): a
stream reads broker group broker-a while its master is SIGKILLed and the controller elects the slave, which lagged:
the election cuts the tail the query had read, and the producers store new messages at offsets the query had read
before it sees the queue again. The query must read the new messages, never again what it delivered, and report
the cut. An exactly-once commit whose target group is cut under it must leave every row once. The first case
runs by default; the others are marked ``ha`` (run them with ``-m ha``). The elections that cut nothing (Controller
mode with allAckInSyncStateSet=true, DLedger) are in test_elections.py."""

from __future__ import annotations

import base64
import threading
import time
from collections import Counter

import pyarrow as pa
import pytest

from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.options import SinkOptions, parse_sink_options
from rmq_spark.sink.pause_points import PAUSE_AT, PAUSE_FILE, PAUSE_SECONDS, CommitPoint
from rmq_spark.sink.writers import MicroBatch, RocketMQStreamWriter, SinkCommit, write_task
from rmq_spark.source.progress import query_skipped
from tests.conftest import record_error
from tests.integration.streaming import wait_for
from tests.stock.elections import GROUP, QUEUES, Notes, Rows, send, stream
from tests.support.controller_cluster import ControllerCluster
from tests.support.waiting import wait_until

TOPIC = "Elected"
ROWS = 400  # the rows of the exactly-once batch that the cut falls under
QUERY = "8f1e2d3c-streaming-query-of-the-cut-commit"  # Spark's query id of the batches driven directly
# A replica that stopped copying leaves the SyncStateSet after haMaxTimeSlaveNotCatchup (15 s by default) or when its
# master drops its silent HA connection (haHousekeepingInterval, 20 s), and one whose heartbeats stop is inactive to
# the controller after controllerHeartBeatTimeoutMills: none of them is elected. The paused slave must stay eligible
# while a loaded machine's query reads what it missed (the master's death is seen at once: its connection closes).
LAGGING = {
    "haMaxTimeSlaveNotCatchup": "600000",
    "haHousekeepingInterval": "600000",
    "controllerHeartBeatTimeoutMills": "600000",
}


def _held(cluster: ControllerCluster) -> int:
    """How many messages the topic's queues hold (their end offsets' sum), as the masters answer."""
    with RemotingClient(cluster.name_server) as client:
        return sum(client.max_offsets(client.queues(TOPIC, refresh=True)).values())


def _cut_under_the_stream(
    cluster: ControllerCluster, query, sink: Rows, stop: bool = False
) -> tuple[list[str], list[str], int]:
    """Replicated messages, then more while the slave is paused (SIGSTOP: it lags), all read by the query (then
    stopped, with ``stop``); then SIGKILL the master, SIGCONT the slave and wait until the controller elected it.
    The messages sent while the slave is paused are large: what the master had sent into the HA connection's socket
    buffers (a few MiB) reaches the slave when it resumes, the rest of them is cut. Returns (the names sent before
    the pause, those sent during it, how many messages the new master holds)."""
    kept = send(cluster, TOPIC, "kept", 30)
    master, slave = cluster.master(GROUP), cluster.slaves(GROUP)[0]
    time.sleep(2)  # the slave copies them from its master's HA port in milliseconds
    cluster.pause(slave)
    try:
        cut = send(cluster, TOPIC, "cut", 20, pad=1 << 19)
        wait_for(lambda: sink.has(kept + cut), 120, "the query to read every message before the kill", query)
        if stop:
            query.processAllAvailable()  # stopped between batches: a stop inside one interrupts its job
            query.stop()
        cluster.kill_member(master)
    finally:
        cluster.resume(slave)
    cluster.wait_master(GROUP, slave)
    return kept, cut, _held(cluster)


@pytest.mark.timeout(900)  # a cluster of two brokers and a stream: minutes on two loaded cores
def test_an_election_that_cuts_a_read_tail_under_new_sends_delivers_them_once_and_counts_the_cut(spark, tmp_path):
    """failOnDataLoss=false: the query is stopped after it read every message; the election cuts the tail it read,
    and new messages are stored at the offsets cut before the query, restarted on its checkpoint, sees the queues
    again. It reads the new messages once, none of those it delivered before again, and counts the cut (the
    messages it read that the broker lost) as skipped."""
    checkpoint = tmp_path / "checkpoint"
    with ControllerCluster(tmp_path / "rocketmq", broker_config=LAGGING) as cluster:
        cluster.create_topic(TOPIC, queues=QUEUES)
        sink = Rows()
        query = stream(spark, cluster, TOPIC, sink, checkpoint, failOnDataLoss="false")
        try:
            kept, cut, held = _cut_under_the_stream(cluster, query, sink, stop=True)
            after = send(cluster, TOPIC, "after", 10)
            query = stream(spark, cluster, TOPIC, sink, checkpoint, failOnDataLoss="false")
            wait_for(lambda: sink.has(after), 120, "the query to read the messages sent after the election", query)
            # the count is reported at the next trigger's planning (Spark records a trigger without data in its
            # progress every 10 s); a few more batches meanwhile: any re-read would show
            cut_count = [len(kept + cut) - held]
            wait_for(
                lambda: query_skipped(query.lastProgress or {}) == cut_count,
                60,
                f"the progress to count the cut ({cut_count}) as skipped",
                query,
            )
        finally:
            query.stop()
    twice = sink.twice()
    assert not twice, f"{len(twice)} messages were delivered twice after the election, e.g. {twice[:5]}"
    assert set(sink.names()) == set(kept + cut + after)
    assert held < len(kept + cut), "the election cut nothing: the slave had every message"


@pytest.mark.ha
@pytest.mark.timeout(1800)
def test_an_election_that_cuts_a_read_tail_fails_naming_the_cut_under_fail_on_data_loss(spark, tmp_path):
    """failOnDataLoss=true: the query stops with a DataLossError that names the election's cut and the setting that
    prevents it, not a recreated topic."""
    with ControllerCluster(tmp_path / "rocketmq", broker_config=LAGGING) as cluster:
        cluster.create_topic(TOPIC, queues=QUEUES)
        sink = Rows()
        query = stream(spark, cluster, TOPIC, sink, tmp_path / "checkpoint", failOnDataLoss="true")
        try:
            _cut_under_the_stream(cluster, query, sink)
            wait_until(lambda: not query.isActive, 120, "the query to stop on the cut")
        finally:
            query.stop()
    error = str(query.exception())
    assert "ROCKETMQ_DATA_LOSS" in error and "allAckInSyncStateSet=true" in error, error
    assert "recreated" not in error, error


def _ends(cluster: ControllerCluster, group: str) -> list[int]:
    """The end offsets of CopyTarget's queues on ``group``, as its master answers."""
    with RemotingClient(cluster.name_server) as client:
        queues = [mq for mq in client.queues("CopyTarget", refresh=True) if mq.broker_name == group]
        return [end for _, end in sorted(client.max_offsets(queues).items())]


def _tasks(options: SinkOptions, batch_id: int, bodies: list[str]) -> list[SinkCommit]:
    """The tasks of streaming batch ``batch_id`` (two), which send ``bodies`` as half messages."""
    half = len(bodies) // 2
    return [
        write_task(options, iter([pa.RecordBatch.from_pydict({"body": part})]), MicroBatch(QUERY, batch_id))
        for part in (bodies[:half], bodies[half:])
    ]


@pytest.mark.ha
@pytest.mark.timeout(1800)
def test_an_exactly_once_commit_whose_target_group_is_cut_under_it_keeps_every_row_once(tmp_path, monkeypatch):
    """Two broker groups; the commit records live on broker-a (the stream writer's tasks and commit driven directly,
    as tests/integration/test_sink_recovery.py does). broker-b's slave is paused (it lags) while another producer's
    messages, the batch's half messages and half of its commit reach broker-b; the commit is held there (a pause
    point) while broker-b's master is SIGKILLed and the slave elected: broker-b's queues end below where the commit
    began, and the rows the commit stored there are gone with its halves. The commit fails; the replay (the driver
    restarted) recovers the batch from the messages stored since the commit began: every row once."""
    notes = Notes()
    marker = tmp_path / "held"
    bodies = [f"row-{i}" for i in range(ROWS)]
    with ControllerCluster(tmp_path / "rocketmq", brokers=("broker-a", "broker-b"), broker_config=LAGGING) as cluster:
        cluster.create_topic("CopyTarget", queues=QUEUES)
        options = parse_sink_options(
            {
                "nameServer": cluster.name_server,
                "topic": "CopyTarget",
                "deliveryGuarantee": "exactly_once",
                "producerGroup": "cut-commit",
                "brokerRetryTimeoutMs": "20000",
            }
        )
        RocketMQStreamWriter(options).commit(_tasks(options, 0, ["first-0", "first-1"]), 0)  # the records: broker-a
        for name, value in ((PAUSE_AT, CommitPoint.COMMITTING.value), (PAUSE_FILE, str(marker)), (PAUSE_SECONDS, "15")):
            monkeypatch.setenv(name, value)  # batch 1's commit is held
        slave = cluster.slaves("broker-b")[0]
        time.sleep(2)  # the slave copies them from its master's HA port in milliseconds
        cluster.pause(slave)
        errors: list[BaseException] = []
        try:
            # past the HA connection's socket buffers: what the slave will not have when it is elected
            others = send(cluster, "CopyTarget", "other", 20, pad=1 << 19)
            notes(f"slave {slave.name} paused; {len(others)} messages of another producer in CopyTarget")
            tasks = _tasks(options, 1, bodies)
            commit = threading.Thread(target=record_error(errors, RocketMQStreamWriter(options).commit, tasks, 1))
            commit.start()
            wait_until(marker.exists, 120, "the commit to be held halfway")
            master = cluster.master("broker-b")
            notes(f"the commit held ({marker.read_text().strip()}); broker-b's ends {_ends(cluster, 'broker-b')}")
            cluster.kill_member(master)
            notes(f"SIGKILL {master.name}")
        finally:
            cluster.resume(slave)
        elected = cluster.wait_new_master("broker-b", master, timeout=180)
        notes(f"{elected.name} is master; broker-b's ends {_ends(cluster, 'broker-b')}")
        commit.join(300)
        notes(f"the commit ended: {errors[0] if errors else 'no error'}")
        RocketMQStreamWriter(options).commit(_tasks(options, 1, bodies), 1)  # the driver restarted: the replay
        notes("the replay ended")
        read = cluster.consume("CopyTarget")
    stored = Counter(base64.b64decode(m["bodyBase64"]).decode().split("|")[0] for m in read)
    cut = len(others) - sum(stored[name] for name in others)
    wrong = {b: stored[b] for b in [*bodies, "first-0", "first-1"] if stored[b] != 1}
    assert cut, f"the election cut none of the other producer's messages\n{notes}"
    assert errors, f"the commit did not fail: the kill did not cut it\n{notes}"
    assert not wrong, f"{len(wrong)} rows not stored once, e.g. {sorted(wrong.items())[:5]}\n{notes}"
    print(notes)
