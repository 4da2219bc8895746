"""The gRPC transport's pieces that need no server: signing, routes, message conversion, error mapping."""

from __future__ import annotations

import gzip
import re
import threading
import time

import grpc
import pytest

from rmq_spark.client.errors import AuthError, ConnectionLostError, RocketMQError, TopicNotFoundError
from rmq_spark.client.gathering import MessageCollector
from rmq_spark.client.grpc import client as grpc_client
from rmq_spark.client.grpc import messages, status
from rmq_spark.client.grpc.auth import Metadata, signature
from rmq_spark.client.grpc.client import GrpcClient, route_from_queues
from rmq_spark.client.grpc.v2 import definition_pb2 as pb
from rmq_spark.client.grpc.v2 import service_pb2 as svc
from rmq_spark.client.model import Credentials, MessageQueue, MessageType, OutgoingMessage

MQ = MessageQueue("T", "broker-a", 2)


def test_signature_is_hex_hmac_sha1_of_the_date_time():
    # RFC 2202, HMAC-SHA1 test case 2
    assert signature("Jefe", "what do ya want for nothing?") == "EFFCDF6AE5EB2FA2D27416D5F184DF9C259A7C79"


def test_metadata_signs_without_showing_the_secret():
    md = dict(Metadata(Credentials("AK", "s3cr3t", "tok"), "v")(("x-mq-broker-name", "b")))
    assert re.fullmatch(r"\d{8}T\d{6}Z", md["x-mq-date-time"])
    assert md["authorization"] == (
        f"MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, "
        f"Signature={signature('s3cr3t', md['x-mq-date-time'])}"
    )
    assert md["x-mq-session-token"] == "tok" and md["x-mq-broker-name"] == "b" and md["x-mq-protocol"] == "v2"
    assert not any("s3cr3t" in v for v in md.values())
    assert "authorization" not in dict(Metadata(None, "v")())


def test_route_from_queues_counts_leading_readable_and_writable_ids():
    def q(broker, i, perm):
        return pb.MessageQueue(topic=pb.Resource(name="T"), id=i, permission=perm, broker=pb.Broker(name=broker))

    route = route_from_queues(
        "T",
        "gw:1",
        [
            q("b", 0, pb.READ_WRITE),
            q("b", 1, pb.READ),
            q("a", 1, pb.READ_WRITE),
            q("a", 0, pb.READ_WRITE),
            q("c", 0, pb.WRITE),
        ],
    )
    assert [str(mq) for mq in route.read_queues()] == ["T:a/0", "T:a/1", "T:b/0", "T:b/1"]
    assert [str(mq) for mq in route.write_queues()] == ["T:a/0", "T:a/1", "T:b/0", "T:c/0"]
    assert route.broker("a").master_address == "gw:1"


def _pulled(**system) -> pb.Message:
    sp = pb.SystemProperties(
        queue_id=2,
        queue_offset=41,
        message_id="ID1",
        keys=["k1", "k2"],
        born_host="1.2.3.4:5",
        store_host="6.7.8.9:10911",
        **system,
    )
    sp.born_timestamp.FromMilliseconds(1_700_000_000_123)
    sp.store_timestamp.FromMilliseconds(1_700_000_000_456)
    return pb.Message(
        topic=pb.Resource(name="T"),
        body=b"hello",
        system_properties=sp,
        user_properties={"TAGS": "tagA", "KEYS": "k1 k2", "a": "1", messages.FLAG_PROPERTY: "7"},
    )


def _read(m: pb.Message):
    """``m`` as ``read_range`` gives it: gathered natively from its answer frame."""
    collector = MessageCollector(MQ)
    collector.add_frames((svc.PullMessageResponse(message=m).SerializeToString(),), 0, 1 << 62)
    (got,) = collector.take()
    return got


def test_a_pulled_message_becomes_the_same_row_as_over_remoting():
    m = _read(_pulled(tag="tagA", delivery_attempt=3))
    assert (m.topic, m.broker_name, m.queue_id, m.queue_offset, m.msg_id) == ("T", "broker-a", 2, 41, "ID1")
    assert (m.tags, m.keys, m.body, m.flag, m.reconsume_times) == ("tagA", ("k1", "k2"), b"hello", 7, 2)
    assert (m.born_timestamp, m.store_timestamp) == (1_700_000_000_123, 1_700_000_000_456)
    assert (m.born_host, m.store_host) == ("1.2.3.4:5", "6.7.8.9:10911")
    assert m.properties == {"TAGS": "tagA", "KEYS": "k1 k2", "a": "1"}
    bare = _read(pb.Message(system_properties=pb.SystemProperties(queue_offset=1)))
    assert (bare.tags, bare.flag, bare.reconsume_times, bare.topic) == (None, 0, 0, "T")


def test_gzip_bodies_are_decompressed_and_broken_ones_named():
    good = _pulled(body_encoding=pb.GZIP)
    good.body = gzip.compress(b"x" * 1000)
    assert _read(good).body == b"x" * 1000
    good.body = b"not gzip"
    with pytest.raises(RocketMQError, match="T:broker-a/2 offset 41: .*gzip"):
        _read(good)


def test_outgoing_messages_carry_tag_keys_id_and_flag():
    out = OutgoingMessage(b"b", tags="t", keys=("k",), properties={"p": "v"}, flag=3).with_unique_id()
    (m,) = messages.to_v2("T", 1, [out])
    assert (m.topic.name, m.body, m.system_properties.tag, list(m.system_properties.keys)) == ("T", b"b", "t", ["k"])
    assert m.system_properties.message_id == out.unique_id and m.system_properties.queue_id == 1
    assert m.user_properties[messages.FLAG_PROPERTY] == "3" and m.user_properties["p"] == "v"
    assert m.system_properties.message_type == pb.NORMAL and not m.system_properties.HasField("message_group")


def test_timer_and_keyed_messages_carry_their_time_and_group_as_the_v2_api_has_them():
    timer, keyed = messages.to_v2(
        "T",
        0,
        [OutgoingMessage(b"t", deliver_time_ms=1_700_000_000_123), OutgoingMessage(b"k", sharding_key="order-7")],
    )
    assert timer.system_properties.message_type == pb.DELAY
    assert timer.system_properties.delivery_timestamp.ToMilliseconds() == 1_700_000_000_123
    assert keyed.system_properties.message_type == pb.FIFO and keyed.system_properties.message_group == "order-7"


def test_a_route_tells_the_topic_message_type_from_the_types_its_queues_accept():
    def route(*accepts):
        return route_from_queues(
            "T",
            "gw:1",
            [
                pb.MessageQueue(
                    topic=pb.Resource(name="T"),
                    id=0,
                    permission=pb.READ_WRITE,
                    broker=pb.Broker(name="a"),
                    accept_message_types=accepts,
                )
            ],
        )

    assert route().message_type is None and route(pb.FIFO).message_type is MessageType.FIFO
    assert route(pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION).message_type is MessageType.MIXED


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


def test_errors_name_the_fix():
    e = status.rpc_error(_RpcError(grpc.StatusCode.UNIMPLEMENTED, "Method not found"), "pull of T", "px:8081")
    assert "no pull API" in str(e) and "nameServer" in str(e) and "px:8081" in str(e)
    e = status.rpc_error(_RpcError(grpc.StatusCode.UNAVAILABLE, "Socket closed"), "route of topic 'T'", "ns:9876")
    assert isinstance(e, ConnectionLostError) and "nameServer" in str(e) and "Socket closed" in str(e)
    assert isinstance(status.rpc_error(_RpcError(grpc.StatusCode.UNAUTHENTICATED, "x"), "w", "e"), AuthError)
    e = status.error_for(pb.Status(code=pb.Code.TOPIC_NOT_FOUND, message="no route for Nope"), "route", "gw:1")
    assert isinstance(e, TopicNotFoundError) and e.code == 40402 and "create the topic" in str(e)
    assert "no route for Nope" in str(e) and "TOPIC_NOT_FOUND" in str(e)
    assert isinstance(status.error_for(pb.Status(code=pb.Code.UNAUTHORIZED), "w", "e"), AuthError)
    status.check(pb.Status(code=pb.Code.OK), "w", "e")
    with pytest.raises(RocketMQError, match="59999"):
        status.check(pb.Status(code=59999), "w", "e")


def test_a_channel_whose_tls_handshaker_could_not_be_built_is_replaced():
    """gRPC core only logs why it could not use a channel's certificates, and every call of that channel fails: the
    client names the TLS options and drops the channel, so that its retry builds a new one. Other failures keep it."""
    client = GrpcClient("127.0.0.1:1")
    channel = client._open()
    e = client.rpc_error(
        _RpcError(
            grpc.StatusCode.UNAVAILABLE,
            "failed to connect to all addresses; last error: "
            "UNKNOWN: ipv4:127.0.0.1:1: Failed to create security handshaker.",
        ),
        "max offset",
    )
    assert isinstance(e, ConnectionLostError) and "tlsKeyFile" in str(e) and "127.0.0.1:1" in str(e)
    assert client._channel is None and client._open() is not channel
    kept = client._open()
    client.rpc_error(_RpcError(grpc.StatusCode.UNAVAILABLE, "Socket closed"), "max offset")
    assert client._open() is kept
    client.close()
    channel.close()


def test_threads_making_their_first_calls_at_once_share_one_channel(monkeypatch):
    opened = []
    real = grpc.insecure_channel

    def slow_channel(*args, **kwargs):  # widens the window between the check and the assignment
        time.sleep(0.05)
        opened.append(real(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(grpc_client.grpc, "insecure_channel", slow_channel)
    client = GrpcClient("127.0.0.1:1")
    start = threading.Barrier(8)

    def first_call():
        start.wait()
        client._method("QueryRoute", svc.QueryRouteResponse)

    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    assert len(opened) == 1
