"""Bad input over gRPC gives the same clear errors as over remoting, and a server without the pull API (the stock
RocketMQ proxy, run for real beside the embedded cluster) is named as such with the way out."""

from __future__ import annotations

import time

import pytest

from rmq_spark.client import ConnectionLostError, FilterExpression, GrpcClient, MessageQueue, RocketMQError
from tests.integration.clusters import seeded_cluster


@pytest.fixture(scope="module")
def with_proxy():
    yield from seeded_cluster("Proxied", queues=2, count=3, prefix="p", stock_proxy=True)


def test_the_stock_proxy_routes_but_has_no_pull_api(with_proxy):
    with GrpcClient(with_proxy.stock_proxy) as client:
        assert client.queues("Proxied") == [MessageQueue("Proxied", "broker-a", q) for q in range(2)]
        mq = MessageQueue("Proxied", "broker-a", 0)
        for call in (
            lambda: client.pull(mq, 0),
            lambda: client.max_offset(mq),
            lambda: client.query_consumer_offset("g", mq),
            lambda: client.update_consumer_offset("g", mq, 1),
        ):
            with pytest.raises(RocketMQError, match="UNIMPLEMENTED.*this server has no pull API") as e:
                call()
            assert "nameServer" in str(e.value) and "gateway/README.md" in str(e.value)


def test_a_spark_read_through_the_stock_proxy_says_what_to_do(spark, with_proxy):
    df = spark.read.format("rocketmq").option("endpoint", with_proxy.stock_proxy).option("topic", "Proxied").load()
    with pytest.raises(Exception, match="this server has no pull API.*option nameServer"):
        df.collect()


def test_an_endpoint_that_is_not_grpc_fails_fast_and_points_at_nameServer(rocketmq):
    started = time.monotonic()
    with GrpcClient(rocketmq.name_server, request_timeout=5) as client:  # a remoting port, not gRPC
        with pytest.raises(ConnectionLostError, match="could not talk gRPC to.*option nameServer"):
            client.queues("anything")
    assert time.monotonic() - started < 10


def test_the_gateway_names_unknown_topics_and_groups(rocketmq, topic):
    with GrpcClient(rocketmq.gateway) as client:
        with pytest.raises(RocketMQError, match="no-such-topic-gw.*create the topic"):
            client.queues("no-such-topic-gw")
        mq = client.queues(topic)[0]
        assert client.query_consumer_offset(f"never-used-{topic}"[:100], mq) is None
        with pytest.raises(RocketMQError, match="broker-zz"):
            client.max_offset(MessageQueue(topic, "broker-zz", 0))
        with pytest.raises(RocketMQError, match="subExpression and expressionType"):
            client.pull(mq, 0, expression=FilterExpression("a = ", "SQL92"))
