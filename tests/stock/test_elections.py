"""Elections that cut nothing a consumer could read, on stock RocketMQ as operators run it (tests/stock/elections.py
``CLUSTERS``): 4.9.7 in DLedger mode (three Raft members; a consumer sees only what a majority stored) and 5.5.0 in
Controller mode with allAckInSyncStateSet=true (a send is answered once every replica of the SyncStateSet has it).
The master is SIGKILLed under sends or inside an exactly-once commit; the group elects another member, which the
route then lists at brokerId 0. A stream must deliver every message the group holds once, through the election and
after the killed member rejoined as a slave; an exactly-once copy must leave every row once. Marked ``ha`` (long:
run them with ``-m ha``)."""

from __future__ import annotations

import base64
import time
from collections import Counter
from collections.abc import Callable

import pytest

from tests.integration.streaming import wait_for
from tests.stock.elections import (
    CLUSTERS,
    COPY_BROKER_CONFIG,
    GROUP,
    QUEUES,
    RECORDS_TOPIC,
    Notes,
    Producer,
    Rows,
    assert_every_row_once,
    copy,
    copy_through_a_kill,
    in_target,
    send,
    send_rows,
    stream,
)
from tests.support.member_cluster import MemberCluster
from tests.support.waiting import wait_until

TOPIC = "Raft"


@pytest.fixture(params=sorted(CLUSTERS))
def make_cluster(request) -> Callable[..., MemberCluster]:
    return CLUSTERS[request.param]


def _held(cluster: MemberCluster) -> list[tuple[int, int, str]]:
    """(queueId, queueOffset, name) of every message the group holds, as RocketMQ's Java pull consumer reads them
    (a message's name: its body up to ``|``, as ``Rows`` keeps it)."""
    return [
        (m["queueId"], m["queueOffset"], base64.b64decode(m["bodyBase64"]).split(b"|")[0].decode())
        for m in cluster.consume(TOPIC)
        if m["topic"] == TOPIC
    ]


@pytest.mark.ha
@pytest.mark.timeout(1800)  # four JVMs and a stream: minutes on two loaded cores
def test_a_stream_delivers_every_message_once_through_a_master_kill(spark, tmp_path, make_cluster):
    """A stream (failOnDataLoss: the default, true) reads while the master is SIGKILLed under sends: it delivers
    every message the group holds once, fails on no data loss, and goes on once the killed member is back as a
    slave."""
    note = Notes()
    with make_cluster(tmp_path / "rocketmq") as cluster:
        cluster.create_topic(TOPIC, queues=QUEUES)
        note(f"cluster up: master {cluster.master(GROUP).name}, slaves {[p.name for p in cluster.slaves(GROUP)]}")
        sink = Rows()
        query = stream(spark, cluster, TOPIC, sink, tmp_path / "checkpoint")
        producer = Producer(cluster.name_server, TOPIC, "during")
        try:
            before = send(cluster, TOPIC, "before", 50)
            wait_for(lambda: sink.has(before), 180, "the query to read the messages before the kill", query)
            note(f"{len(before)} messages read before the kill")

            producer.start()
            wait_until(lambda: len(producer.acked) >= 100, 120, "100 sends under way", producer.check)
            master = cluster.master(GROUP)
            at_kill = len(producer.acked)
            cluster.kill_member(master)
            note(f"SIGKILL {master.name} after {at_kill} acknowledged sends of the producer")
            elected = cluster.wait_new_master(GROUP, master, timeout=180)
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

            after = send(cluster, TOPIC, "after", 50)
            held = _held(cluster)
            note(f"the group holds {len(held)} messages after the election")
            wait_for(
                lambda: sink.has({b for _, _, b in held}),
                240,
                "the query to read every message the group holds after the election",
                query,
            )
            note("every held message read")

            cluster.restart_member(master)
            cluster.wait_slave(GROUP, master, timeout=180)
            note(f"{master.name} rejoined as a slave; master {cluster.master(GROUP).name}")
            later = send(cluster, TOPIC, "later", 20)
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
    # what the replication promises, not the connector: every acknowledged send is held
    lost = set(before + producer.acked + after + later) - {b for _, _, b in held}
    assert not lost, f"{len(lost)} acknowledged sends are not held, e.g. {sorted(lost)[:5]}\n{report}"
    print(report)


@pytest.mark.ha
@pytest.mark.timeout(1800)
def test_an_exactly_once_copy_keeps_every_row_once_through_a_master_kill(spark, tmp_path, make_cluster):
    """An exactly-once copy whose commit is ending halves when the master is SIGKILLed. A commit step sent into the
    dying master has lost its answer (it may have been applied), so the query fails with a CommitError, by design;
    restarted on its checkpoint once the group has a master again, it completes the batch: every source row is in
    the target once. A first batch makes the commit records topic, which the slaves copy before the kill (a topic
    is not in the replicated log)."""
    notes = Notes()
    checkpoint = tmp_path / "checkpoint"
    with make_cluster(tmp_path / "rocketmq", **COPY_BROKER_CONFIG) as cluster:
        cluster.create_topic("CopySource", queues=QUEUES)
        cluster.create_topic("CopyTarget", queues=QUEUES)
        send_rows(cluster, "first", 200)
        first = copy(spark, cluster, checkpoint, 200)
        try:
            assert first.awaitTermination(300), "the first copy did not end within 300 s"
        finally:
            first.stop()
        assert first.exception() is None, first.exception()
        cluster.wait_topic_on_members(RECORDS_TOPIC)
        notes("first batch of 200 rows copied; the records topic is on every member")
        send_rows(cluster, "second", 1000)
        copy_through_a_kill(spark, cluster, checkpoint, 1000, notes, in_target(cluster, 250, 1000))
        read = cluster.consume("CopySource", "CopyTarget")
    assert_every_row_once(read, 1200, notes)
    print(notes)


@pytest.mark.ha
@pytest.mark.timeout(1800)
def test_an_exactly_once_copy_whose_first_commit_is_cut_keeps_every_row_once(spark, tmp_path, make_cluster):
    """The master is SIGKILLed inside the copy's first commit as it begins ending halves, a moment after that commit
    made the commit records topic on it and wrote its first record: slaves copy topic configs from their master now
    and then, so the elected one may lack the topic (the notes say), though the records are in its log, and the name
    server still routes the topic to the group (a master's registration adds topics, never drops one). The
    restarted query must complete the batch: every row once."""
    notes = Notes()
    with make_cluster(tmp_path / "rocketmq", **COPY_BROKER_CONFIG) as cluster:
        cluster.create_topic("CopySource", queues=QUEUES)
        cluster.create_topic("CopyTarget", queues=QUEUES)
        send_rows(cluster, "only", 1000)
        copy_through_a_kill(spark, cluster, tmp_path / "checkpoint", 1000, notes, in_target(cluster, 10, 1000))
        read = cluster.consume("CopySource", "CopyTarget")
    assert_every_row_once(read, 1000, notes)
    print(notes)
