"""Static topics (RocketMQ 5 logic queues, created as mqadmin updateStaticTopic does): each logic queue is served by
the broker group that leads it, which translates its logic offsets; the connector reads, streams, mirrors offsets
and writes them by logic queue (brokerName ``__syslo__global__``, as RocketMQ's own clients name them), across a
remapping that moves queues to another broker group (its gap of logic offsets is no data loss; the old leader's
NOT_LEADER_FOR_QUEUE answer sends the client to the route again). The gRPC gateway refuses them."""

from __future__ import annotations

import base64
import time
import uuid

import pytest

from tests.integration.streaming import Collect, assert_exactly_once, start_query, wait_for

LOGIC = "__syslo__global__"


def _static(rocketmq, messages: int = 8) -> str:
    name = f"Static-{uuid.uuid4().hex[:8]}"
    rocketmq.create_static_topic(name, queues=4)
    rocketmq.produce(name, [{"body": f"s{i}"} for i in range(messages)])
    return name


@pytest.fixture(scope="module")
def static_topic(rocketmq) -> str:
    return _static(rocketmq)


def _java(rocketmq, topic: str) -> list[tuple[str, int, int, bytes]]:
    return sorted(
        (m["brokerName"], m["queueId"], m["queueOffset"], base64.b64decode(m["bodyBase64"]))
        for m in rocketmq.consume(topic)
    )


def _batch(spark, rocketmq, topic: str | None, **options) -> list[tuple[str, int, int, bytes]]:
    """A batch read of ``topic`` (None: the options name the queues)."""
    df = (
        spark.read.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .options(**({"topic": topic} if topic else {}), **options)
        .load()
    )
    return sorted((r.brokerName, r.queueId, r.queueOffset, bytes(r.body)) for r in df.collect())


def test_the_embedded_broker_serves_the_static_topic(rocketmq, static_topic):
    """What the reads below are compared with: RocketMQ's own consumer reads all its messages by logic queue."""
    got = rocketmq.consume(static_topic)
    assert sorted(base64.b64decode(m["bodyBase64"]) for m in got) == sorted(f"s{i}".encode() for i in range(8))
    assert {m["brokerName"] for m in got} == {LOGIC}


def test_a_batch_read_gives_the_logic_queues_and_offsets(spark, rocketmq, static_topic):
    got = _batch(spark, rocketmq, static_topic)
    assert got == _java(rocketmq, static_topic)
    assert {(b, q) for b, q, _, _ in got} == {(LOGIC, i) for i in range(4)}


def test_offsets_json_names_logic_queues(spark, rocketmq, static_topic):
    got = _batch(
        spark,
        rocketmq,
        None,
        startingOffsets=f'{{"{static_topic}": {{"{LOGIC}/1": 1}}}}',
        endingOffsets=f'{{"{static_topic}": {{"{LOGIC}/1": 2}}}}',
        assign=f'{{"{static_topic}": ["{LOGIC}/1"]}}',
    )
    assert got == [r for r in _java(rocketmq, static_topic) if r[1] == 1 and r[2] == 1]


def test_a_batch_read_over_grpc_is_refused(spark, rocketmq, static_topic):
    df = spark.read.format("rocketmq").option("endpoint", rocketmq.gateway).option("topic", static_topic).load()
    with pytest.raises(
        Exception,
        match=f"topic {static_topic} is a static topic \\(RocketMQ 5 logic queues\\), .*"
        "read it over the remoting protocol \\(option nameServer\\)",
    ):
        df.collect()


def test_a_batch_read_across_a_remapping(spark, rocketmq):
    """Queues moved to broker-b go on at the next logic block there: the offsets between are a gap, not loss
    (failOnDataLoss is true), and every message is read with the logic offsets RocketMQ's consumer sees."""
    topic = _static(rocketmq)
    rocketmq.remap_static_topic(topic, ["broker-b"])
    time.sleep(0.05)
    after = int(time.time() * 1000)
    rocketmq.produce(topic, [{"body": f"t{i}"} for i in range(8)])
    got = _batch(spark, rocketmq, topic)
    assert got == _java(rocketmq, topic)
    assert len(got) == 16 and max(o for _, _, o, _ in got) >= 10000  # a moved queue's new block
    since = _batch(spark, rocketmq, topic, startingTimestamp=str(after))
    assert sorted(body for *_, body in since) == sorted(f"t{i}".encode() for i in range(8))


def test_a_client_with_the_route_before_a_remapping_follows_the_new_leaders(rocketmq):
    """The old leader answers NOT_LEADER_FOR_QUEUE (501) to offset queries and pulls of a moved logic queue: the
    client reads the route again and asks the new leader."""
    from rmq_spark.client import RemotingClient

    topic = _static(rocketmq)
    with RemotingClient(rocketmq.name_server) as stale, RemotingClient(rocketmq.name_server) as fresh:
        queues = stale.queues(topic)
        moved = [mq for mq in queues if stale.route(topic).serving_broker(mq) == "broker-a"]
        rocketmq.remap_static_topic(topic, ["broker-b"])
        rocketmq.produce(topic, [{"body": f"t{i}"} for i in range(8)])
        assert moved and dict(stale.max_offsets(moved)) == dict(fresh.max_offsets(moved))
        mq = moved[0]
        end = fresh.max_offset(mq)
        last = [m.body for m in fresh.read_range(mq, end - 1, end)]
        assert [m.body for m in stale.read_range(mq, end - 1, end)] == last
        # the client's own range read steps over the remapping's gap
        whole = [(mq.broker_name, mq.queue_id, m.queue_offset, m.body) for m in fresh.read_range(mq, 0, end)]
        assert whole == [r for r in _java(rocketmq, topic) if r[1] == mq.queue_id]


def test_a_stream_across_a_remapping_delivers_each_message_once_and_mirrors_logic_offsets(spark, rocketmq, tmp_path):
    """A stream started before the remapping: its cached route names the old leaders, which answer
    NOT_LEADER_FOR_QUEUE; it reads the route again and goes on, every message once; its group's offsets are
    stored by logic queue."""
    from rmq_spark.client import RemotingClient

    topic = _static(rocketmq)
    group = f"g-{topic}"
    sink = Collect()
    q = start_query(
        spark, rocketmq, "remoting", topic, sink, tmp_path / "c", consumerGroup=group, pollNameServerIntervalMs="300"
    )
    try:
        wait_for(lambda: len(sink) == 8, 60, "the messages before the remapping", q)
        rocketmq.remap_static_topic(topic, ["broker-b"])
        rocketmq.produce(topic, [{"body": f"t{i}"} for i in range(8)])
        wait_for(lambda: len(sink) == 16, 60, "the messages after the remapping", q)
        assert_exactly_once(sink, rocketmq, topic)
        ends: dict[tuple[str, int], int] = {}
        for b, i, o in sink.keys:
            ends[(b, i)] = max(ends.get((b, i), 0), o + 1)
        with RemotingClient(rocketmq.name_server) as client:
            queues = client.queues(topic)
            wait_for(
                lambda: (
                    {(mq.broker_name, mq.queue_id): o for mq, o in client.query_consumer_offsets(group, queues).items()}
                    == ends
                ),
                30,
                "the group's offsets of the logic queues",
                q,
            )
    finally:
        q.stop()


def test_a_write_goes_to_the_logic_queues(spark, rocketmq):
    topic = _static(rocketmq, messages=0)
    df = spark.createDataFrame([(f"w{i}", f"k{i % 3}") for i in range(12)], "body string, shardingKey string")
    (
        df.write.format("rocketmq")
        .mode("append")
        .option("nameServer", rocketmq.name_server)
        .option("topic", topic)
        .save()
    )
    got = rocketmq.consume(topic)
    assert sorted(base64.b64decode(m["bodyBase64"]) for m in got) == sorted(f"w{i}".encode() for i in range(12))
    assert {m["brokerName"] for m in got} == {LOGIC}
    per_key = {}
    for m in got:
        per_key.setdefault(m["properties"]["__SHARDINGKEY"], set()).add(m["queueId"])
    assert all(len(queues) == 1 for queues in per_key.values())  # one key, one logic queue


def test_an_exactly_once_batch_write_goes_to_the_logic_queues(spark, rocketmq):
    topic = _static(rocketmq, messages=0)
    (
        spark.createDataFrame([(f"e{i}",) for i in range(10)], "body string")
        .write.format("rocketmq")
        .mode("append")
        .option("nameServer", rocketmq.name_server)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly_once")
        .option("producerGroup", f"pg-{topic}")
        .save()
    )
    got = rocketmq.consume(topic)
    assert sorted(base64.b64decode(m["bodyBase64"]) for m in got) == sorted(f"e{i}".encode() for i in range(10))
    assert {m["brokerName"] for m in got} == {LOGIC}


def test_an_exactly_once_stream_is_refused_before_it_sends(spark, rocketmq, static_topic, tmp_path):
    """Its commit records name broker queues, which a static topic's logic queues are not: refused at the start
    (it waited brokerRetryTimeoutMs for a broker queue that no broker serves, then failed)."""
    source = tmp_path / "in"
    spark.createDataFrame([("e",)], "body string").write.json(str(source))
    writer = (
        spark.readStream.schema("body string")
        .json(str(source))
        .writeStream.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .option("topic", static_topic)
        .option("deliveryGuarantee", "exactly_once")
        .option("producerGroup", f"pg-{static_topic}")
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
    )
    with pytest.raises(
        Exception,
        match=f"topic '{static_topic}' is a static topic .*write it at_least_once, or exactly_once from a batch",
    ):
        q = writer.start()
        try:
            q.awaitTermination(60)
        finally:
            q.stop()
    assert len(rocketmq.consume(static_topic)) == 8


def test_a_pattern_reads_a_static_topic(rocketmq, static_topic):
    from rmq_spark.client import RemotingClient
    from rmq_spark.options import parse_options
    from rmq_spark.source.planning import resolve_queues

    options = parse_options({"nameServer": rocketmq.name_server, "topicPattern": static_topic})
    with RemotingClient(rocketmq.name_server) as client:
        planned = resolve_queues(client, options)
    assert {(mq.topic, mq.broker_name) for mq in planned} == {(static_topic, LOGIC)} and len(planned) == 4
