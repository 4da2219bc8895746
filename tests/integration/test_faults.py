"""Streaming through real faults of the real RocketMQ (docs/DESIGN.md §10), through both transports: a broker down for
longer than the task deadline, a one-broker cluster restarted, every name server down, a master down while its
slave serves. Each ends with every (queue, offset) delivered exactly once. Deadlines and polls are shortened through
options so that each takes seconds."""

from __future__ import annotations

import json
import threading
import time

import pytest

from rmq_spark.client import ConnectionLostError, MessageQueue
from tests.conftest import TRANSPORTS, new_client, record_error, running, unique_topic
from tests.integration.streaming import (
    Collect,
    assert_exactly_once,
    start_query,
    stream_around_a_master_outage,
    wait_for,
)

BROKERS = ("broker-a", "broker-b")


def end_offsets(query, topic: str) -> dict[str, int]:
    """The end offsets of the query's last batch, for ``topic``."""
    return json.loads(query.lastProgress["sources"][0]["endOffset"])[topic]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_range_read_rides_out_a_restart_within_its_deadline_and_names_the_broker_after_it(rocketmq, topic, transport):
    """One outage for two reads of the same queue: a patient one (60 s deadline), in the middle of its range, waits
    it out in a thread of its own; a hasty one (2 s) gives up naming the broker, before the broker is back."""
    rocketmq.produce(topic, [{"body": f"m{i}", "broker": "broker-b", "queueId": 0} for i in range(200)])
    queue = MessageQueue(topic, "broker-b", 0)
    with new_client(rocketmq, transport) as client, new_client(rocketmq, transport) as other:
        patient = client.read_range(queue, 0, 200, depth=1, retry_timeout=60)
        got = [next(patient).queue_offset for _ in range(10)]  # the task is in the middle of its range
        hasty = other.read_range(queue, 0, 200, depth=1, retry_timeout=2)
        next(hasty)
        errors: list[BaseException] = []
        rocketmq.stop_broker("broker-b")
        waiting = threading.Thread(target=record_error(errors, lambda: got.extend(m.queue_offset for m in patient)))
        waiting.start()
        try:
            with pytest.raises(
                ConnectionLostError, match="broker broker-b did not serve offset 32 .*brokerRetryTimeoutMs=2000"
            ):
                list(hasty)
            assert waiting.is_alive(), f"the patient read ended while the broker was away: {errors}"
        finally:
            rocketmq.start_broker("broker-b")
            waiting.join(120)
        assert not errors, errors
        assert got == list(range(200))


@pytest.mark.parametrize("transport, fail_on_data_loss", [("remoting", "true"), ("grpc", "false")])
def test_a_broker_down_longer_than_the_task_deadline_is_waited_for(
    spark, rocketmq, topic, tmp_path, transport, fail_on_data_loss
):
    def produce(brokers, tag):
        rocketmq.produce(
            topic, [{"body": f"{tag}{i}", "broker": b, "queueId": i % 4} for b in brokers for i in range(40)]
        )

    sink = Collect()
    produce(BROKERS, "a")
    q = start_query(
        spark,
        rocketmq,
        transport,
        topic,
        sink,
        tmp_path / "c",
        failOnDataLoss=fail_on_data_loss,
        brokerRetryTimeoutMs="2000",
        pollNameServerIntervalMs="300",
    )
    try:
        wait_for(lambda: len(sink) == 80, 120, "the first 80 messages", q)
        rocketmq.stop_broker("broker-b")
        try:
            produce(["broker-a"], "b")
            wait_for(lambda: len(sink) == 120, 60, "broker-a's messages while broker-b is down", q)
            time.sleep(3)  # longer than brokerRetryTimeoutMs and several name-server polls
            assert q.isActive and q.exception() is None
            # broker-b's queues are unavailable, not lost: their offsets are carried in every batch's end
            assert {k: v for k, v in end_offsets(q, topic).items() if k.startswith("broker-b/")} == {
                f"broker-b/{i}": 10 for i in range(4)
            }
        finally:
            rocketmq.start_broker("broker-b")
        produce(BROKERS, "c")
        wait_for(lambda: len(sink) == 200, 120, "the messages sent after broker-b came back", q)
        time.sleep(1)  # nothing more may arrive
    finally:
        q.stop()
    assert_exactly_once(sink, rocketmq, topic)


def test_a_queue_named_in_startingOffsets_whose_broker_group_is_away_starts_there_when_it_is_back(
    spark, rocketmq, topic, tmp_path
):
    """Remoting only: what is transport-specific here goes through gRPC elsewhere (the gateway's route without
    broker-b and its queues read again once it is back: the gRPC case of the broker-down test above; queues that
    enter a running stream over gRPC: test_stream's new queues); where a named queue starts (offset_specs) is the
    same code over either transport."""
    rocketmq.produce(
        topic, [{"body": f"a{i}", "broker": b, "queueId": q_} for b in BROKERS for q_ in range(4) for i in range(10)]
    )
    named = {"broker-a/0": 7, "broker-b/1": 6}  # queues left out start at their first offset
    want = {(b, q_, o) for b in BROKERS for q_ in range(4) for o in range(named.get(f"{b}/{q_}", 0), 10)}
    sink = Collect()
    rocketmq.stop_broker("broker-b")
    q = start_query(
        spark,
        rocketmq,
        "remoting",
        topic,
        sink,
        tmp_path / "c",
        startingOffsets=json.dumps({topic: named}),
        brokerRetryTimeoutMs="2000",
        pollNameServerIntervalMs="300",
    )
    try:
        try:
            wait_for(lambda: len(sink) == 33, 120, "broker-a's messages while broker-b is away", q)
        finally:
            rocketmq.start_broker("broker-b")
        wait_for(lambda: len(sink) >= len(want), 120, "broker-b's messages once it is back", q)
        time.sleep(1)  # nothing more may arrive
    finally:
        q.stop()
    assert len(set(sink.keys)) == len(sink.keys), "some messages were delivered twice"
    assert set(sink.keys) == want


@pytest.fixture(scope="module")
def single():
    """A cluster of one broker, whose restart leaves no broker at all."""
    with running(brokers=1) as mq:
        yield mq


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_one_broker_restart_and_a_name_server_outage(spark, single, transport, tmp_path, request):
    topic = unique_topic(request)
    single.create_topic(topic, queues=4)
    sink = Collect()
    single.produce_bulk(topic, 200, 50)
    q = start_query(
        spark,
        single,
        transport,
        topic,
        sink,
        tmp_path / "c",
        brokerRetryTimeoutMs="60000",
        pollNameServerIntervalMs="300",
    )
    try:
        wait_for(lambda: len(sink) == 200, 120, "the first 200 messages", q)
        single.stop_broker("broker-a")  # the topic has no route and no broker answers
        time.sleep(2)
        assert q.isActive and q.exception() is None
        single.start_broker("broker-a")
        single.produce_bulk(topic, 200, 50)
        wait_for(lambda: len(sink) == 400, 120, "the messages sent after the restart", q)

        single.stop_name_server()
        try:
            single.produce_bulk(topic, 200, 50)  # the producer still knows the route
            wait_for(lambda: len(sink) == 600, 120, "the messages sent while no name server runs", q)
            assert q.isActive and q.exception() is None
        finally:
            single.start_name_server()
        single.produce_bulk(topic, 100, 50)
        wait_for(lambda: len(sink) == 700, 120, "the messages sent after the name server came back", q)
        time.sleep(1)
    finally:
        q.stop()
    assert_exactly_once(sink, single, topic)


@pytest.fixture(scope="module")
def replicated():
    """broker-a with a slave (classic master-slave replication, slaveReadEnable)."""
    with running(brokers=1, slaves=1) as mq:
        yield mq


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_slave_serves_while_its_master_is_down(spark, replicated, transport, tmp_path, request):
    topic = unique_topic(request)
    group = f"slave-{topic}"[:100]
    replicated.create_topic(topic, queues=2)
    replicated.produce_bulk(topic, 1200, 50)  # returns once the slave has it too
    sink = Collect()
    q = start_query(
        spark,
        replicated,
        transport,
        topic,
        sink,
        tmp_path / "c",
        maxMessagesPerTrigger="100",
        consumerGroup=group,
        brokerRetryTimeoutMs="60000",
        pollNameServerIntervalMs="300",
    )
    try:
        wait_for(lambda: len(sink) >= 200, 120, "the first batches", q)
        sink.hold()  # else the query may read the rest while the broker shuts down
        try:
            replicated.stop_broker("broker-a")
            read_before = len(sink)
            sink.release()
            wait_for(lambda: len(sink) == 1200, 120, "the rest, from the slave", q)
            assert len(sink) - read_before >= 500, "the query did not keep advancing while the master was down"
        finally:
            sink.release()
            replicated.start_broker("broker-a")
        # the offsets kept while the master was away reach it once it is back
        wait_for(
            lambda: [replicated.query_consumer_offset(group, topic, "broker-a", i) for i in (0, 1)] == [600, 600],
            60,
            "the group's offsets on the master",
            q,
        )
    finally:
        q.stop()
    assert_exactly_once(sink, replicated, topic)


def test_a_group_whose_master_is_away_and_whose_slave_refuses_reads_waits_while_the_others_commit(
    spark, replicated_pair, tmp_path, request
):
    topic = unique_topic(request)
    replicated_pair.create_topic(topic, queues=2)
    replicated_pair.produce_bulk(topic, 400, 50)  # returns once the slaves have it too
    replicated_pair.stop_broker("broker-a")

    def more_on_b(sink, q, held_b):
        replicated_pair.produce(topic, [{"body": f"b{i}", "broker": "broker-b", "queueId": i % 2} for i in range(20)])
        wait_for(lambda: len(sink) == held_b + 20, 60, "broker-b's new messages", q)

    stream_around_a_master_outage(spark, replicated_pair, topic, tmp_path / "c", 420, more_on_b)


def test_a_range_read_refused_by_a_slave_goes_back_to_the_master_when_it_answers(replicated_pair, request):
    topic = unique_topic(request)
    replicated_pair.create_topic(topic, queues=1)
    replicated_pair.produce_bulk(topic, 100, 20)
    queue = MessageQueue(topic, "broker-b", 0)
    held = next(o["maxOffset"] for o in replicated_pair.offsets(topic) if o["brokerName"] == "broker-b")
    replicated_pair.stop_broker("broker-b")
    timer = threading.Timer(3, replicated_pair.start_broker, ["broker-b"])
    timer.start()
    try:
        with new_client(replicated_pair, "remoting") as client:
            # the deadline is far below the route's 30 s cache: the read must look for the master by itself
            got = [m.queue_offset for m in client.read_range(queue, 0, held, retry_timeout=20)]
    finally:
        timer.join()
    assert got == list(range(held))
