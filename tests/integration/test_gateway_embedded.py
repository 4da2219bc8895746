"""The v2 pull gateway that jvm-shim starts beside the embedded cluster, checked with raw gRPC calls (no transport
of rmq_spark): it listens where READY says, leaves the methods it does not serve UNIMPLEMENTED, and answers
QueryOffset from the real broker. The full conformance suite runs on top of the gRPC transport."""

from __future__ import annotations

import socket

import grpc
import pytest

SERVICE = "/apache.rocketmq.v2.MessagingService/"
CODE_OK = 20000
CODE_TOPIC_NOT_FOUND = 40402
QUERY_OFFSET_END = 1


# -- a few lines of protobuf wire format: enough for QueryOffset ---------------------------------------------------
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _fields(data: bytes) -> dict[int, int | bytes]:
    """Field number -> value (varint or length-delimited bytes; the last occurrence wins)."""
    out: dict[int, int | bytes] = {}
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    while pos < len(data):
        key = varint()
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            out[number] = varint()
        elif wire_type == 2:
            n = varint()
            out[number] = data[pos : pos + n]
            pos += n
        else:
            raise AssertionError(f"unexpected wire type {wire_type} in field {number}")
    return out


def _query_offset_end(topic: str, broker: str, queue_id: int) -> bytes:
    resource = _field(2, topic)  # Resource.name
    queue = _field(1, resource) + _field(2, queue_id) + _field(4, _field(1, broker))  # topic, id, broker.name
    return _field(1, queue) + _field(2, QUERY_OFFSET_END)  # message_queue, query_offset_policy


def _query_offset(rocketmq, request: bytes) -> tuple[int, str, int]:
    """(status code, status message, offset) of a QueryOffset call."""
    with grpc.insecure_channel(rocketmq.gateway) as channel:
        call = channel.unary_unary(
            SERVICE + "QueryOffset", request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        response = _fields(call(request, timeout=30))
    status = _fields(response.get(1, b""))
    return status.get(1, 0), status.get(2, b"").decode(), response.get(2, 0)


# -- tests ---------------------------------------------------------------------------------------------------------
def test_ready_reports_a_gateway_that_accepts_connections(rocketmq):
    host, _, port = rocketmq.gateway.rpartition(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert rocketmq.tls_ca is None  # no TLS unless asked
    with socket.create_connection((host, int(port)), timeout=5):
        pass


def test_methods_the_gateway_does_not_serve_are_unimplemented(rocketmq):
    with grpc.insecure_channel(rocketmq.gateway) as channel:
        heartbeat = channel.unary_unary(
            SERVICE + "Heartbeat", request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        with pytest.raises(grpc.RpcError) as e:
            heartbeat(b"", timeout=30)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_query_offset_end_counts_the_produced_messages(rocketmq, topic):
    rocketmq.produce(topic, [{"body": f"m{i}", "broker": "broker-a", "queueId": 1} for i in range(7)])
    code, message, offset = _query_offset(rocketmq, _query_offset_end(topic, "broker-a", 1))
    assert (code, offset) == (CODE_OK, 7), message
    code, message, offset = _query_offset(rocketmq, _query_offset_end(topic, "broker-b", 1))
    assert (code, offset) == (CODE_OK, 0), message


def test_query_offset_of_an_unknown_topic_is_answered_in_the_body(rocketmq):
    code, message, _ = _query_offset(rocketmq, _query_offset_end("NoSuchTopic-gateway", "broker-a", 0))
    assert code == CODE_TOPIC_NOT_FOUND
    assert "NoSuchTopic-gateway" in message
