"""The sink while broker groups lose their master or leave the route, on a real embedded RocketMQ of two broker
groups with one slave each (a group whose master stops stays in the route with its slave only)."""
from __future__ import annotations

import base64
from typing import Iterator

import pytest

from rmq_spark.embedded import EmbeddedRocketMQ
from rmq_spark.sink.routing import java_string_hash
from tests.conftest import unique_topic


@pytest.fixture(scope="module")
def replicated() -> Iterator[EmbeddedRocketMQ]:
    with EmbeddedRocketMQ(2, slaves=1) as mq:
        yield mq


def _body(m: dict) -> str:
    return base64.b64decode(m["bodyBase64"]).decode()


def test_a_group_without_master_takes_no_write(spark, replicated, request):
    topic = unique_topic(request)
    replicated.create_topic(topic, queues=2)
    rows = [(f"r{i}", f"key-{i % 5}" if i % 2 else None) for i in range(20)]
    df = spark.createDataFrame(rows, "body STRING, shardingKey STRING").coalesce(1)
    replicated.stop_broker("broker-a")  # its slave stays in the route
    try:
        (df.write.format("rocketmq").mode("append").option("nameServer", replicated.name_server)
         .option("topic", topic).option("brokerRetryTimeoutMs", "3000").save())
    finally:
        replicated.start_broker("broker-a")
    stored = {_body(m): m for m in replicated.consume(topic)}
    assert sorted(stored) == sorted(body for body, _ in rows)
    assert {m["brokerName"] for m in stored.values()} == {"broker-b"}
    for body, key in rows:  # a key goes to the queue the Java producer picks: one of broker-b's 2 queues
        if key is not None:
            assert stored[body]["queueId"] == abs(java_string_hash(key)) % 2
