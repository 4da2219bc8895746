"""LiteTopic (message.type=LITE, RocketMQ 5.5), created on the real embedded 5.5.0 brokers: its messages are kept per
lite topic and consumed through lite subscriptions, not read by queue offset, so a batch read, a stream and a write
are refused before anything is read or sent, with an error that names the topic and the feature."""

from __future__ import annotations

import uuid

import pytest

LITE = "is a LiteTopic \\(message.type=LITE"


@pytest.fixture(scope="module")
def lite_topic(rocketmq) -> str:
    name = f"Lite-{uuid.uuid4().hex[:8]}"
    rocketmq.create_topic(name, queues=2, attributes={"+message.type": "LITE"})
    return name


def test_a_batch_read_is_refused_at_planning(spark, rocketmq, lite_topic):
    df = spark.read.format("rocketmq").option("nameServer", rocketmq.name_server).option("topic", lite_topic).load()
    with pytest.raises(Exception, match=f"topic '{lite_topic}' {LITE}"):
        df.collect()


def test_a_stream_is_refused_at_planning(spark, rocketmq, lite_topic, tmp_path):
    df = (
        spark.readStream.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .option("topic", lite_topic)
        .load()
    )
    with pytest.raises(Exception, match=f"topic '{lite_topic}' {LITE}"):
        query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
        try:
            query.awaitTermination(60)
        finally:
            query.stop()


def test_a_write_is_refused_before_its_first_send(spark, rocketmq, lite_topic):
    df = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match=f"topic '{lite_topic}' {LITE}"):
        (
            df.write.format("rocketmq")
            .mode("append")
            .option("nameServer", rocketmq.name_server)
            .option("topic", lite_topic)
            .save()
        )
    assert rocketmq.consume(lite_topic) == []


def test_a_pattern_leaves_a_lite_topic_out(rocketmq, lite_topic, caplog):
    from rmq_spark.client import RemotingClient
    from rmq_spark.options import parse_options
    from rmq_spark.source.planning import resolve_queues

    options = parse_options({"nameServer": rocketmq.name_server, "topicPattern": lite_topic})
    with RemotingClient(rocketmq.name_server) as client, caplog.at_level("WARNING", logger="rmq_spark.source.planning"):
        assert resolve_queues(client, options) == []
    assert f"topic {lite_topic} matches topicPattern but is left out" in caplog.text and "LiteTopic" in caplog.text
