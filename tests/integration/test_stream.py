"""spark.readStream.format("rocketmq") against the real embedded RocketMQ: read limits, Trigger.AvailableNow, new
and vanished queues (exactly once across hard kills and a broker restart: test_kills)."""
from __future__ import annotations

import time

import pytest

from tests.conftest import TRANSPORTS, transport_options

BROKERS = ("broker-a", "broker-b")


def _wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


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
    q = (_stream(spark, rocketmq, transport, topic, startingOffsets="earliest", maxMessagesPerTrigger="150")
         .writeStream.format("memory").queryName(f"ratelimited_{transport}").option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    rocketmq.produce_bulk(topic, 500, 40, tags=["TagB"])  # arrives after the start: not read by this run
    q.awaitTermination(180)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == spark.sql(f"select count(*) from ratelimited_{transport}").first()[0]
    assert 1000 <= sum(sizes) <= 1500
    assert len(sizes) >= 7 and max(sizes) <= 150 + 8, sizes
    assert spark.sql(f"select count(distinct brokerName, queueId, queueOffset) from ratelimited_{transport}"
                     ).first()[0] == \
        sum(sizes)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_user_schema_streams_only_its_columns(spark, rocketmq, transport, topic, tmp_path):
    rocketmq.produce_bulk(topic, 300, 20, tags=["TagA"])
    q = (_stream(spark, rocketmq, transport, topic, schema="queueId INT, queueOffset BIGINT, brokerName STRING",
                 startingOffsets="earliest")
         .writeStream.format("memory").queryName(f"narrow_{transport}")
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    df = spark.sql(f"select * from narrow_{transport}")
    assert df.columns == ["queueId", "queueOffset", "brokerName"]
    held = {(o["brokerName"], o["queueId"]): (o["minOffset"], o["maxOffset"]) for o in rocketmq.offsets(topic)}
    want = sorted((b, q_, i) for (b, q_), (lo, hi) in held.items() for i in range(lo, hi))
    assert sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in df.collect()) == want
    assert len(want) == 300


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_new_queues_are_picked_up_and_vanished_queues_are_data_loss(spark, rocketmq, transport, topic, tmp_path):
    rocketmq.produce(topic, [{"body": f"a{i}", "broker": b, "queueId": q} for b in BROKERS for q in range(4)
                             for i in range(2)])
    grow = f"grow_{transport}"
    q = (_stream(spark, rocketmq, transport, topic, startingOffsets="earliest", pollNameServerIntervalMs="500")
         .writeStream.format("memory").queryName(grow).option("checkpointLocation", str(tmp_path / "c"))
         .trigger(processingTime="200 milliseconds").start())
    try:
        _wait_for(lambda: spark.sql(f"select count(*) from {grow}").first()[0] == 16, 120, "the first 16 messages")
        rocketmq.create_topic(topic, queues=6)
        rocketmq.produce(topic, [{"body": f"n{i}", "broker": b, "queueId": 5} for b in BROKERS for i in range(3)])
        _wait_for(lambda: spark.sql(f"select count(*) from {grow} where queueId = 5").first()[0] == 6, 120,
                  "the messages of the new queues")
        assert sorted(r[0] for r in spark.sql(f"select queueOffset from {grow} where queueId = 5").collect()) == \
            [0, 0, 1, 1, 2, 2]
        rocketmq.create_topic(topic, queues=2)  # queues 2..5 vanish from the route
        with pytest.raises(Exception, match="no longer in the topic route"):
            q.awaitTermination(120)
            raise AssertionError("the query did not fail")
    finally:
        q.stop()
