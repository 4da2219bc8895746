"""Static topics (RocketMQ 5 logic queues, created as mqadmin updateStaticTopic does): their logic queues and
offsets span the queues of several brokers, which rmq-spark's plans by broker queue and offset would misread, so
every use of one is refused with an error that names the feature, through both transports and in the source, the
stream and the sink."""

from __future__ import annotations

import base64
import uuid

import pytest

from tests.conftest import TRANSPORTS, transport_options

STATIC = "static topic \\(RocketMQ 5 logic queues\\)"


@pytest.fixture(scope="module")
def static_topic(rocketmq) -> str:
    name = f"Static-{uuid.uuid4().hex[:8]}"
    rocketmq.create_static_topic(name, queues=4)
    rocketmq.produce(name, [{"body": f"s{i}"} for i in range(8)])
    return name


@pytest.fixture(params=TRANSPORTS)
def transport(request) -> str:
    return request.param


def test_the_embedded_broker_serves_the_static_topic(rocketmq, static_topic):
    """The refusals below are of a real static topic: RocketMQ's own consumer reads all its messages."""
    got = rocketmq.consume(static_topic)
    assert sorted(base64.b64decode(m["bodyBase64"]) for m in got) == sorted(f"s{i}".encode() for i in range(8))
    assert {m["brokerName"] for m in got} == {"__syslo__global__"}  # logic queues, as RocketMQ's clients see them


def test_a_batch_read_is_refused(spark, rocketmq, static_topic, transport):
    df = spark.read.format("rocketmq").options(**transport_options(rocketmq, transport), topic=static_topic).load()
    with pytest.raises(Exception, match=f"topic '?{static_topic}'? .*{STATIC}"):
        df.collect()


def test_a_stream_is_refused(spark, rocketmq, static_topic, tmp_path):
    df = (
        spark.readStream.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .option("topic", static_topic)
        .load()
    )
    with pytest.raises(Exception, match=STATIC):
        query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
        try:
            query.awaitTermination(60)
        finally:
            query.stop()


def test_a_write_is_refused(spark, rocketmq, static_topic):
    df = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match=STATIC):
        (
            df.write.format("rocketmq")
            .mode("append")
            .option("nameServer", rocketmq.name_server)
            .option("topic", static_topic)
            .save()
        )


def test_a_pattern_leaves_a_static_topic_out_and_reads_the_others(rocketmq, static_topic, caplog):
    # a topicPattern query died of UnsupportedError whenever a static topic anywhere in the cluster matched it
    from rmq_spark.client import RemotingClient
    from rmq_spark.options import parse_options
    from rmq_spark.source.planning import resolve_queues

    plain = static_topic.replace("Static-", "Static-plain-")
    rocketmq.create_topic(plain, queues=2, broker="broker-a")
    options = parse_options({"nameServer": rocketmq.name_server, "topicPattern": f"{static_topic}|{plain}"})
    with RemotingClient(rocketmq.name_server) as client, caplog.at_level("WARNING", logger="rmq_spark.source.planning"):
        planned = {mq.topic for mq in resolve_queues(client, options)}
    assert planned == {plain}
    assert f"topic {static_topic} matches topicPattern but is left out" in caplog.text and "static topic" in caplog.text
