"""RocketMQ 5 topic message types (attribute message.type) against the sink, on the real embedded 5.x brokers: a
write of a kind the topic does not take is refused before its first send, naming the topic, its type and the fix
(as the proxy would refuse each send); the kinds it takes are written, and keyed rows carry the sharding key that
RocketMQ 5 FIFO consumers order by, through both transports."""

from __future__ import annotations

import base64
import collections
import time
import uuid

import pytest

from tests.conftest import transport_options


def _typed(rocketmq, message_type: str) -> str:
    name = f"{message_type.title()}-{uuid.uuid4().hex[:12]}"
    rocketmq.create_topic(name, queues=2, attributes={"+message.type": message_type})
    return name


def _write(spark, rocketmq, transport, topic, rows, schema, **options):
    df = spark.createDataFrame(rows, schema).coalesce(1)
    (
        df.write.format("rocketmq")
        .mode("append")
        .options(**transport_options(rocketmq, transport))
        .options(topic=topic, brokerRetryTimeoutMs="30000", producerGroup=f"pg-{topic}"[:60], **options)
        .save()
    )


def _bodies(rocketmq, topic) -> list[str]:
    return sorted(base64.b64decode(m["bodyBase64"]).decode() for m in rocketmq.consume(topic))


@pytest.mark.parametrize(
    "transport, topic_type, schema, rows, options, refused",
    [
        ("remoting", "FIFO", "body STRING", [("a",)], {}, "NORMAL messages: rows without a shardingKey"),
        (
            "grpc",
            "NORMAL",
            "body STRING, shardingKey STRING",
            [("a", "k")],
            {},
            "FIFO messages: rows with a shardingKey .*or drop the shardingKey column",
        ),
        (
            "remoting",
            "FIFO",
            "body STRING, deliverTimeMs BIGINT",
            [("a", 4102444800000)],
            {},
            "DELAY messages: rows with a deliverTimeMs",
        ),
        (
            "remoting",
            "NORMAL",
            "body STRING",
            [("a",)],
            {"deliveryGuarantee": "exactly_once"},
            "TRANSACTION messages.*Create the topic with message.type=TRANSACTION or MIXED, or use "
            "deliveryGuarantee=at_least_once",
        ),
    ],
)
def test_a_write_the_topic_does_not_take_is_refused_before_its_first_send(
    spark, rocketmq, transport, topic_type, schema, rows, options, refused
):
    topic = _typed(rocketmq, topic_type)
    with pytest.raises(
        Exception, match=f"topic '{topic}' has message.type={topic_type}, which does not take {refused}"
    ):
        _write(spark, rocketmq, transport, topic, rows, schema, **options)
    assert rocketmq.consume(topic) == []


def test_writes_of_kinds_the_topic_takes(spark, rocketmq):
    transactional = _typed(rocketmq, "TRANSACTION")
    _write(
        spark, rocketmq, "remoting", transactional, [("t0",), ("t1",)], "body STRING", deliveryGuarantee="exactly_once"
    )
    assert _bodies(rocketmq, transactional) == ["t0", "t1"]
    mixed = _typed(rocketmq, "MIXED")
    _write(spark, rocketmq, "remoting", mixed, [("m0", "k"), ("m1", None)], "body STRING, shardingKey STRING")
    _write(spark, rocketmq, "remoting", mixed, [("m2",)], "body STRING", deliveryGuarantee="exactly_once")
    assert _bodies(rocketmq, mixed) == ["m0", "m1", "m2"]


@pytest.mark.parametrize("transport", ["remoting", "grpc"])
def test_keyed_rows_carry_the_sharding_key_fifo_consumers_order_by(spark, rocketmq, transport):
    topic = _typed(rocketmq, "FIFO")
    rows = [(f"{key}:{seq}", key) for seq in range(20) for key in ("order-1", "order-2", "order-3")]
    _write(spark, rocketmq, transport, topic, rows, "body STRING, shardingKey STRING")
    per_key = collections.defaultdict(list)
    for m in sorted(rocketmq.consume(topic), key=lambda m: (m["brokerName"], m["queueId"], m["queueOffset"])):
        key, seq = base64.b64decode(m["bodyBase64"]).decode().split(":")
        assert m["properties"]["__SHARDINGKEY"] == key
        per_key[key].append(int(seq))
    assert per_key == {key: list(range(20)) for key in ("order-1", "order-2", "order-3")}


def test_a_timer_row_written_over_grpc_is_delivered_at_its_time(spark, rocketmq, topic):
    at = int(time.time() * 1000) + 4000
    _write(spark, rocketmq, "grpc", topic, [("later", at), ("now", None)], "body STRING, deliverTimeMs BIGINT")
    assert _bodies(rocketmq, topic) == ["now"]
    deadline = time.monotonic() + 30
    while len(rocketmq.consume(topic)) < 2:
        assert time.monotonic() < deadline, "the timer message never arrived"
        time.sleep(0.5)
    later = next(m for m in rocketmq.consume(topic) if base64.b64decode(m["bodyBase64"]) == b"later")
    assert later["storeTimestamp"] >= at - 1000  # the timer wheel's precision is one second
