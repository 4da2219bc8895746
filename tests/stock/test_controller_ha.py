"""RocketMQ 5's Controller mode as operators run it (tests/support/controller_cluster.py): a stream reads broker
group broker-a while its master is SIGKILLed and the controller elects the slave. Asynchronously replicated, a slave
that lagged at the kill is elected with a shorter queue: the election cuts the tail the query had read, and the query
must read on from the new end, never again what it delivered. The cases beyond the first are marked ``ha`` (long:
run them with ``-m ha``)."""

from __future__ import annotations

import threading
import time

import pytest

from rmq_spark.client.model import OutgoingMessage
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.source.progress import query_skipped
from tests.integration.streaming import wait_for
from tests.support.controller_cluster import ControllerCluster
from tests.support.waiting import wait_until

TOPIC = "Elected"
QUEUES = 2
GROUP = "broker-a"
# A replica that stopped copying leaves the SyncStateSet after haMaxTimeSlaveNotCatchup (15 s by default) or when its
# master drops its silent HA connection (haHousekeepingInterval, 20 s), and one whose heartbeats stop is inactive to
# the controller after controllerHeartBeatTimeoutMills: none of them is elected. The paused slave must stay eligible
# while a loaded machine's query reads what it missed (the master's death is seen at once: its connection closes).
LAGGING = {
    "haMaxTimeSlaveNotCatchup": "600000",
    "haHousekeepingInterval": "600000",
    "controllerHeartBeatTimeoutMills": "600000",
}


class Bodies:
    """A foreachBatch sink on the driver: the body of every message delivered, in order of delivery (after an
    election cut a queue, its offsets are those of other messages: only the bodies tell a message twice)."""

    def __init__(self) -> None:
        self.got: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.select("body").collect()
        with self._lock:
            self.got.extend(bytes(r[0]).split(b"|")[0].decode() for r in rows)

    def has(self, bodies: list[str]) -> bool:
        with self._lock:
            return set(bodies) <= set(self.got)


def _send(cluster: ControllerCluster, label: str, per_queue: int, pad: int = 0) -> list[str]:
    """``per_queue`` messages to every queue of the topic, with bodies ``label-q-i`` (then ``|`` and ``pad`` bytes);
    the names."""
    names = []
    with RemotingClient(cluster.name_server) as client:
        for q, mq in enumerate(client.queues(TOPIC, refresh=True)):
            for i in range(per_queue):
                name = f"{label}-{q}-{i}"
                client.send(mq, OutgoingMessage(body=name.encode() + b"|" + b"x" * pad))
                names.append(name)
    return names


def _held(cluster: ControllerCluster) -> int:
    """How many messages the topic's queues hold (their end offsets' sum), as the masters answer."""
    with RemotingClient(cluster.name_server) as client:
        return sum(client.max_offsets(client.queues(TOPIC, refresh=True)).values())


def _stream(spark, cluster, sink, checkpoint, fail_on_data_loss: bool):
    return (
        spark.readStream.format("rocketmq")
        .option("nameServer", cluster.name_server)
        .option("topic", TOPIC)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def _cut_under_the_stream(cluster: ControllerCluster, query, sink: Bodies) -> tuple[list[str], list[str]]:
    """Replicated messages, then more while the slave is paused (SIGSTOP: it lags), all read by the query; then
    SIGKILL the master, SIGCONT the slave and wait until the controller elected it. The messages sent while the
    slave is paused are large: what the master had sent into the HA connection's socket buffers (a few MiB) reaches
    the slave when it resumes, the rest of them is cut. Returns (the names sent before the pause, those sent during
    it, how many messages the new master holds)."""
    kept = _send(cluster, "kept", 30)
    master, slave = cluster.master(GROUP), cluster.slaves(GROUP)[0]
    time.sleep(2)  # the slave copies them from its master's HA port in milliseconds
    cluster.pause(slave)
    try:
        cut = _send(cluster, "cut", 20, pad=1 << 19)
        wait_for(lambda: sink.has(kept + cut), 120, "the query to read every message before the kill", query)
        cluster.kill_member(master)
    finally:
        cluster.resume(slave)
    cluster.wait_master(GROUP, slave)
    return kept, cut, _held(cluster)


# behind the ha marker until it has passed once on a quiet machine (it has not run to its end yet: see the issue note)
@pytest.mark.ha
@pytest.mark.timeout(1800)  # a cluster of three JVMs and a stream: minutes on two loaded cores
def test_an_election_that_cuts_a_read_tail_delivers_nothing_twice_and_counts_the_cut(spark, tmp_path):
    """failOnDataLoss=false: the cut range is counted as skipped, and the query reads on from the new end: the
    messages stored there after the election once, none of those it delivered before again."""
    with ControllerCluster(tmp_path / "rocketmq", broker_config=LAGGING) as cluster:
        cluster.create_topic(TOPIC, queues=QUEUES)
        sink = Bodies()
        query = _stream(spark, cluster, sink, tmp_path / "checkpoint", fail_on_data_loss=False)
        try:
            kept, cut, held = _cut_under_the_stream(cluster, query, sink)
            after = _send(cluster, "after", 10)
            wait_for(lambda: sink.has(after), 120, "the query to read the messages sent after the election", query)
            time.sleep(2)  # a few more batches: any re-read would show now
            query.processAllAvailable()
            progress = query.lastProgress
        finally:
            query.stop()
    twice = sorted({b for b in sink.got if sink.got.count(b) > 1})
    assert not twice, f"{len(twice)} messages were delivered twice after the election, e.g. {twice[:5]}"
    assert set(sink.got) == set(kept + cut + after)
    assert held < len(kept + cut), "the election cut nothing: the slave had every message"
    assert query_skipped(progress) == [len(kept + cut) - held], "the cut range is counted as skipped"


@pytest.mark.ha
@pytest.mark.timeout(1800)
def test_an_election_that_cuts_a_read_tail_fails_naming_the_cut_under_fail_on_data_loss(spark, tmp_path):
    """failOnDataLoss=true: the query stops with a DataLossError that names the election's cut and the setting that
    prevents it, not a recreated topic."""
    with ControllerCluster(tmp_path / "rocketmq", broker_config=LAGGING) as cluster:
        cluster.create_topic(TOPIC, queues=QUEUES)
        sink = Bodies()
        query = _stream(spark, cluster, sink, tmp_path / "checkpoint", fail_on_data_loss=True)
        try:
            _cut_under_the_stream(cluster, query, sink)
            wait_until(lambda: not query.isActive, 120, "the query to stop on the cut")
        finally:
            query.stop()
    error = str(query.exception())
    assert "ROCKETMQ_DATA_LOSS" in error and "allAckInSyncStateSet=true" in error, error
    assert "recreated" not in error, error
