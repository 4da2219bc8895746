"""Option assign (as Spark's Kafka source has it): a query reads only the queues it names, in batch and in
streaming, through both transports, on the real embedded RocketMQ."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TRANSPORTS, transport_options
from tests.integration.streaming import Collect, start_query, wait_for
from tests.support.checkpoints import logged

ASSIGNED = {"broker-a": [1, 3], "broker-b": [0]}


@pytest.fixture(params=TRANSPORTS)
def transport(request) -> str:
    return request.param


def _assign(topic: str) -> str:
    return json.dumps({topic: [f"{b}/{q}" for b, qs in ASSIGNED.items() for q in qs]})


def _assigned_keys(rocketmq, topic: str) -> list[tuple[str, int, int]]:
    return sorted(
        (m["brokerName"], m["queueId"], m["queueOffset"])
        for m in rocketmq.consume(topic)
        if m["queueId"] in ASSIGNED[m["brokerName"]]
    )


def test_a_batch_read_takes_only_the_assigned_queues(spark, rocketmq, topic, transport):
    rocketmq.produce_bulk(topic, 160, 20)
    df = spark.read.format("rocketmq").options(**transport_options(rocketmq, transport), assign=_assign(topic)).load()
    got = sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in df.collect())
    assert got == _assigned_keys(rocketmq, topic)
    assert 0 < len(got) < 160


def test_a_queue_that_does_not_exist_is_named(spark, rocketmq, topic):
    df = (
        spark.read.format("rocketmq")
        .options(nameServer=rocketmq.name_server, assign=json.dumps({topic: ["broker-a/0", "broker-a/9"]}))
        .load()
    )
    with pytest.raises(
        Exception,
        match=r"option assign names queues that do not exist: .*broker-a/9 \(broker group "
        r"broker-a has 4 readable queues",
    ):
        df.collect()


def test_a_stream_reads_only_the_assigned_queues_and_their_offsets(spark, rocketmq, topic, transport, tmp_path):
    rocketmq.produce_bulk(topic, 80, 20)
    sink, checkpoint = Collect(), tmp_path / "checkpoint"
    query = start_query(spark, rocketmq, transport, None, sink, checkpoint, assign=_assign(topic))
    try:
        wait_for(lambda: len(sink) >= len(_assigned_keys(rocketmq, topic)), 120, "the first messages", query)
        rocketmq.produce_bulk(topic, 80, 20)  # more arrive on every queue, the assigned ones included
        expected = _assigned_keys(rocketmq, topic)
        wait_for(lambda: len(sink) >= len(expected), 120, "the messages sent later", query)
    finally:
        query.stop()
    assert sorted(sink.keys) == expected
    last = json.loads((checkpoint / "offsets" / str(logged(checkpoint, "offsets")[-1])).read_text().splitlines()[-1])
    assert sorted(last[topic]) == sorted(f"{b}/{q}" for b, qs in ASSIGNED.items() for q in qs)
