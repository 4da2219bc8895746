"""spark.readStream.format("rocketmq") against the real embedded RocketMQ: read limits, Trigger.AvailableNow, new
and vanished queues (exactly once across hard kills and a broker restart: test_kills)."""

from __future__ import annotations

import time

import pytest

from tests.conftest import TRANSPORTS, transport_options, unique_topic
from tests.integration.streaming import Collect, assert_exactly_once, start_query, wait_for

BROKERS = ("broker-a", "broker-b")


def _stream(spark, rocketmq, transport, topic, *, schema=None, **options):
    reader = spark.readStream.format("rocketmq").option("topic", topic)
    if schema is not None:
        reader = reader.schema(schema)
    for k, v in {**transport_options(rocketmq, transport), **options}.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_rate_limit_and_available_now(spark, rocketmq, transport, topic, tmp_path):
    rocketmq.produce_bulk(topic, 1000, 40, tags=["TagA"])
    q = (
        _stream(spark, rocketmq, transport, topic, startingOffsets="earliest", maxMessagesPerTrigger="150")
        .writeStream.format("memory")
        .queryName(f"ratelimited_{transport}")
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    rocketmq.produce_bulk(topic, 500, 40, tags=["TagB"])  # arrives after the start: not read by this run
    q.awaitTermination(180)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == spark.sql(f"select count(*) from ratelimited_{transport}").first()[0]
    assert 1000 <= sum(sizes) <= 1500
    assert len(sizes) >= 7 and max(sizes) <= 150 + 8, sizes
    assert spark.sql(f"select count(distinct brokerName, queueId, queueOffset) from ratelimited_{transport}").first()[
        0
    ] == sum(sizes)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_user_schema_streams_only_its_columns(spark, rocketmq, transport, topic, tmp_path):
    rocketmq.produce_bulk(topic, 300, 20, tags=["TagA"])
    q = (
        _stream(
            spark,
            rocketmq,
            transport,
            topic,
            schema="queueId INT, queueOffset BIGINT, brokerName STRING",
            startingOffsets="earliest",
        )
        .writeStream.format("memory")
        .queryName(f"narrow_{transport}")
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(180)
    df = spark.sql(f"select * from narrow_{transport}")
    assert df.columns == ["queueId", "queueOffset", "brokerName"]
    held = {(o["brokerName"], o["queueId"]): (o["minOffset"], o["maxOffset"]) for o in rocketmq.offsets(topic)}
    want = sorted((b, q_, i) for (b, q_), (lo, hi) in held.items() for i in range(lo, hi))
    assert sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in df.collect()) == want
    assert len(want) == 300


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_new_queues_are_picked_up_and_only_vanished_queues_with_unread_messages_are_data_loss(
    spark, rocketmq, transport, topic, tmp_path
):
    rocketmq.produce(
        topic, [{"body": f"a{i}", "broker": b, "queueId": q} for b in BROKERS for q in range(4) for i in range(2)]
    )
    sink, checkpoint = Collect(), tmp_path / "c"
    options = {"pollNameServerIntervalMs": "500"}
    q = start_query(spark, rocketmq, transport, topic, sink, checkpoint, **options)
    try:
        wait_for(lambda: len(sink) == 16, 120, "the first 16 messages", q)
        rocketmq.create_topic(topic, queues=6)
        rocketmq.produce(topic, [{"body": f"n{i}", "broker": b, "queueId": 5} for b in BROKERS for i in range(3)])
        wait_for(lambda: len(sink) == 22, 120, "the messages of the new queues", q)
        assert sorted(o for b, q_, o in sink.keys if q_ == 5) == [0, 0, 1, 1, 2, 2]
        # queues 2..5 leave the route after they were read to their end: nothing was lost, the query goes on (over
        # gRPC they wait: the gateway answers no offset of a queue outside the route, so nothing proves them drained)
        rocketmq.create_topic(topic, queues=2)
        time.sleep(2)  # several triggers and name-server polls
        rocketmq.produce(topic, [{"body": "k", "broker": b, "queueId": 0} for b in BROKERS])
        wait_for(lambda: len(sink) == 24, 120, "messages after the topic shrank", q)
    finally:
        q.stop()
    assert len(set(sink.keys)) == len(sink.keys), "some messages were delivered twice"
    assert set(sink.keys) == (
        {(b, q_, o) for b in BROKERS for q_ in range(4) for o in range(2)}
        | {(b, 5, o) for b in BROKERS for o in range(3)}
        | {(b, 0, 2) for b in BROKERS}
    )
    # a queue that leaves the route with messages this query has not read is data loss, named with its offsets (over
    # gRPC nothing proves it: it waits)
    rocketmq.produce(topic, [{"body": "u", "broker": b, "queueId": 1} for b in BROKERS])
    rocketmq.create_topic(topic, queues=1)
    q = start_query(spark, rocketmq, transport, topic, Collect(), checkpoint, **options)
    try:
        if transport == "grpc":
            time.sleep(3)
            assert q.isActive and q.exception() is None, q.exception()
            return
        with pytest.raises(Exception, match=r"broker-a/1 \(read to 2, end 3\).* no longer in the topic route") as e:
            q.awaitTermination(120)
            raise AssertionError("the query did not fail")
        assert "broker-a/0" not in str(e.value).split("no longer in the topic route")[0]
    finally:
        q.stop()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_queues_that_left_the_route_drained_resume_at_their_offset_when_the_topic_grows_back(
    spark, rocketmq, transport, topic, tmp_path
):
    """RocketMQ keeps the consume queues of a shrunk topic: grown back, they hold what was read before, which must
    not be delivered again."""

    def produce(queues, tag):
        rocketmq.produce(
            topic,
            [{"body": f"{tag}{i}", "broker": b, "queueId": q_} for b in BROKERS for q_ in queues for i in range(3)],
        )

    produce(range(4), "a")
    sink = Collect()
    q = start_query(spark, rocketmq, transport, topic, sink, tmp_path / "c", pollNameServerIntervalMs="300")
    try:
        wait_for(lambda: len(sink) == 24, 120, "the first 24 messages", q)
        rocketmq.create_topic(topic, queues=2)  # shrunk after queues 2 and 3 drained
        time.sleep(2)  # several triggers and name-server polls without them
        assert q.isActive and q.exception() is None, q.exception()
        rocketmq.create_topic(topic, queues=4)
        produce(range(4), "b")
        wait_for(lambda: len(sink) >= 48, 120, "the messages sent after the topic grew back", q)
        time.sleep(1)  # nothing more may arrive
    finally:
        q.stop()
    assert_exactly_once(sink, rocketmq, topic)


def test_a_pattern_topic_whose_brokers_all_left_the_name_server_waits_for_them(spark, rocketmq, request, tmp_path):
    """A name server drops a topic from its topic list when every broker of the topic unregisters: its queues are
    unavailable, not vanished, and are read on from their offsets when the broker is back."""
    topic = unique_topic(request)
    rocketmq.create_topic(topic, queues=2, broker="broker-b")
    rocketmq.produce(topic, [{"body": f"a{i}", "broker": "broker-b", "queueId": q} for q in range(2) for i in range(4)])
    sink = Collect()
    q = start_query(
        spark, rocketmq, "remoting", None, sink, tmp_path / "c", topicPattern=topic, pollNameServerIntervalMs="500"
    )
    try:
        wait_for(lambda: len(sink) == 8, 120, "the first 8 messages", q)
        rocketmq.stop_broker("broker-b")
        try:
            time.sleep(3)  # several triggers and name-server polls without the topic
            assert q.isActive and q.exception() is None, q.exception()
        finally:
            rocketmq.start_broker("broker-b")
        rocketmq.produce(
            topic, [{"body": f"b{i}", "broker": "broker-b", "queueId": q_} for q_ in range(2) for i in range(2)]
        )
        wait_for(lambda: len(sink) == 12, 120, "the messages sent after the broker came back", q)
    finally:
        q.stop()
    assert_exactly_once(sink, rocketmq, topic)
