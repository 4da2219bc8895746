"""Hostile input and hostile networks against the real broker: a decompression bomb stored by a producer, a filter
the broker cannot compile, request ids past 2^31, a blackholed broker beside a healthy one, black-holed name
servers under the stream driver. Each ends in a clear
error and nothing lost."""

from __future__ import annotations

import itertools
import socket
import threading
import time
import tracemalloc

import pytest
import zstandard
from pyspark.sql.streaming.datasource import ReadAllAvailable

from rmq_spark.client import ConnectionLostError, MessageQueue, RemotingClient
from rmq_spark.client.errors import MessageTooLargeError
from rmq_spark.client.model import OutgoingMessage
from rmq_spark.client.remoting import broker as req
from rmq_spark.client.remoting import connection
from rmq_spark.options import parse_options
from rmq_spark.source.stream import RocketMQStreamReader
from tests.conftest import TRANSPORTS, record_error, transport_options
from tests.support.loopback_peer import Relay
from tests.support.reference_codec import decode_messages

ZSTD_BODY = 0x1 | (2 << 8)  # sysFlag: COMPRESSED, compression type zstd


def send_raw_compressed(client: RemotingClient, mq: MessageQueue, body: bytes, sys_flag: int) -> None:
    """Store ``body`` as a compressed message, as any producer may (the broker keeps bodies as sent)."""
    cmd = req.send_request("hostile-producer", mq, [OutgoingMessage(body).with_unique_id()])
    cmd.ext_fields["f"] = str(sys_flag)
    client._request(mq, cmd, lambda r, a: req.check(r, "raw send", a), master=True).result()


def test_a_stored_zstd_bomb_fails_the_read_naming_the_message(spark, rocketmq, topic):
    mq = MessageQueue(topic, "broker-a", 1)
    bomb = zstandard.ZstdCompressor().compress(b"\0" * (64 << 20))  # 64 MiB in ~2 KiB
    with RemotingClient(rocketmq.name_server) as client:
        client.send(mq, OutgoingMessage(b"before"))
        send_raw_compressed(client, mq, bomb, ZSTD_BODY)
        client.send(mq, OutgoingMessage(b"after"))
        tracemalloc.start()
        try:
            with pytest.raises(
                MessageTooLargeError,
                match=rf"{topic}:broker-a/1 offset 1: the zstd-compressed message "
                r"body expands past 16777216 bytes.*maxMessageBytes",
            ):
                list(client.read_range(mq, 0, 3))
            assert tracemalloc.get_traced_memory()[1] < 32 << 20  # the limit's 16 MiB, never the 64
        finally:
            tracemalloc.stop()
    reader = (
        spark.read.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .option("topic", topic)
        .option("maxMessageBytes", str(1 << 20))
    )
    with pytest.raises(
        Exception,
        match=rf"{topic}:broker-a/1 offset 1: the zstd-compressed message body expands past "
        "1048576 bytes.*maxMessageBytes",
    ):
        reader.load().collect()
    # the other messages are all there once the limit allows the body
    rows = reader.option("maxMessageBytes", str(128 << 20)).load().selectExpr("queueOffset", "length(body)").collect()
    assert sorted((r[0], r[1]) for r in rows) == [(0, 6), (1, 64 << 20), (2, 5)]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_invalid_sql92_filter_is_refused_before_anything_is_read(spark, rocketmq, topic, transport, tmp_path):
    rocketmq.produce(topic, [{"body": "a", "properties": {"n": "1"}, "broker": "broker-a", "queueId": 0}])
    options = {
        **transport_options(rocketmq, transport),
        "topic": topic,
        "expressionType": "SQL92",
        "subExpression": "n = = 1 (",
    }
    with pytest.raises(
        Exception,
        match=r"option subExpression 'n = = 1 \(' \(expressionType SQL92\) cannot be used "
        "by broker broker-a",
    ):
        spark.read.format("rocketmq").options(**options).load().collect()
    query = (
        spark.readStream.format("rocketmq")
        .options(**options)
        .load()
        .writeStream.format("memory")
        .queryName(f"badsql_{transport}")
        .option("checkpointLocation", str(tmp_path / "c"))
        .start()
    )
    with pytest.raises(Exception, match="option subExpression 'n = = 1 \\(' .* cannot be used"):
        query.awaitTermination(120)
        raise AssertionError("the streaming query did not fail")
    good = spark.read.format("rocketmq").options(**{**options, "subExpression": "n = 1"}).load().count()
    assert good == 1


def test_request_ids_past_two_to_the_31_keep_matching(rocketmq, topic, monkeypatch):
    monkeypatch.setattr(connection, "_opaques", itertools.count(2**31 - 5))
    rocketmq.produce(topic, [{"body": f"m{i}", "broker": "broker-a", "queueId": 2} for i in range(300)])
    mq = MessageQueue(topic, "broker-a", 2)
    with RemotingClient(rocketmq.name_server) as client:  # single pulls go over the shared connection
        calls = [client.pull_async(mq, offset, 32) for offset in range(0, 300, 32)]
        got = [m.queue_offset for c in calls for m in decode_messages(c.result().body, "broker-a")]
    assert got == list(range(300))
    assert next(connection._opaques) > 2**31 + 5  # the ids passed 2^31 - 1 and wrapped to 1, 2, ... on the wire


def test_a_blackholed_broker_does_not_hold_up_a_healthy_one(rocketmq, topic):
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(0)  # never accepts: once its queue is full, connects hang until their timeout
    fillers = [socket.socket() for _ in range(8)]
    for s in fillers:
        s.setblocking(False)
        s.connect_ex(blackhole.getsockname())
    dead = f"127.0.0.1:{blackhole.getsockname()[1]}"
    try:
        with RemotingClient(rocketmq.name_server, connect_timeout=5) as client:
            errors: list[BaseException] = []
            stuck = threading.Thread(target=record_error(errors, client._pool.get, dead))
            stuck.start()
            time.sleep(0.2)
            mq = MessageQueue(topic, "broker-a", 0)
            assert client.max_offset(mq) == 0  # served by the healthy broker ...
            assert stuck.is_alive()  # ... while the connect to the blackhole still hangs
            stuck.join(10)
            assert not stuck.is_alive() and len(errors) == 1 and isinstance(errors[0], ConnectionLostError)
    finally:
        for s in fillers:
            s.close()
        blackhole.close()


def test_nothing_is_lost_around_a_broken_connection(rocketmq, topic):
    """A connection that breaks under a read with pulls in flight is replaced; the read completes exactly."""
    rocketmq.produce(topic, [{"body": f"m{i}", "broker": "broker-b", "queueId": 3} for i in range(500)])
    with RemotingClient(rocketmq.name_server) as client:
        messages = client.read_range(MessageQueue(topic, "broker-b", 3), 0, 500, depth=4, retry_timeout=30)
        got = [next(messages).queue_offset for _ in range(40)]
        for conn in list(client._pool._conns.values()):
            conn._sock.shutdown(socket.SHUT_RDWR)  # as if the network dropped it
        got += [m.queue_offset for m in messages]
    assert got == list(range(500))


def test_latest_offset_does_not_wait_on_black_holed_name_servers(rocketmq, topic):
    """Spark asks latestOffset every few milliseconds: while the name servers take packets and never answer, it
    answers from the cached routes (refreshed in the background) in well under a request timeout, and still sees
    new messages, which the brokers announce; so does Trigger.AvailableNow's preparation, which reads the routes."""
    relay = Relay(rocketmq.name_server)
    timeout_ms = 2000
    reader = RocketMQStreamReader(
        parse_options(
            {
                "nameServer": relay.address,
                "topic": topic,
                "requestTimeoutMs": str(timeout_ms),
                "connectTimeoutMs": "2000",
                "pollNameServerIntervalMs": "200",
            },
            streaming=True,
        )
    )
    try:
        start = reader.initialOffset()
        relay.black_hole()
        slowest, sent, end = 0.0, 0, start
        began = time.monotonic()
        while time.monotonic() < began + 3 * timeout_ms / 1000:  # failed background reads age the cached routes
            if time.monotonic() > began + sent:  # a message a second: each ends a held pull, and its queue is asked
                rocketmq.produce(topic, [{"body": f"m{sent}", "broker": "broker-a", "queueId": 0}])
                sent += 1
            called = time.monotonic()
            end = reader.latestOffset(start, ReadAllAvailable())
            slowest = max(slowest, time.monotonic() - called)
            time.sleep(0.05)
        assert slowest < timeout_ms / 1000 / 2, f"latestOffset blocked {slowest:.1f} s on the name servers"
        called = time.monotonic()
        reader.prepareForTriggerAvailableNow()  # asks every queue, and the routes at once
        took = time.monotonic() - called
        assert took < timeout_ms / 1000 / 2, f"prepareForTriggerAvailableNow blocked {took:.1f} s"
        time.sleep(0.5)
        assert reader.latestOffset(start, ReadAllAvailable())[topic]["broker-a/0"] == sent
    finally:
        reader.stop()
        relay.close()
