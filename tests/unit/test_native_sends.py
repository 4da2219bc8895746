"""The native core's encoding of the sink's rows against the row-by-row Python path (the oracle): the same Arrow
batches give the same SEND_BATCH_MESSAGE bodies per queue, the same half messages and row keys, UNIQ_KEYs made
alike, the same errors."""

from __future__ import annotations

import re
import struct
import zlib
from collections import defaultdict

import pyarrow as pa
import pytest

from rmq_spark.client import unique_ids
from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.model import MessageQueue, OutgoingMessage
from rmq_spark.client.namespaces import NO_NAMESPACE, Namespace
from rmq_spark.client.remoting import broker as req
from rmq_spark.client.remoting.frame import RemotingCommand, decode_frame
from rmq_spark.client.remoting.send_codec import COMPRESSED_FLAG, compressed_for_send, encode_batch
from rmq_spark.compiled import unique_ids_at
from rmq_spark.sink.columns import to_rows
from rmq_spark.sink.native_sends import HalfSpec, NativeSends, takes
from rmq_spark.sink.routing import Router
from rmq_spark.sink.row_keys import ROW_KEY_PROPERTY, batch_prefix, row_key
from rmq_spark.sink.sender import Sender

QUEUES = {
    "ta": [MessageQueue("ta", b, q) for b in ("broker-a", "broker-b") for q in range(3)],
    "tb": [MessageQueue("tb", "broker-a", q) for q in range(5)],
}
UNIQ = re.compile(rb"UNIQ_KEY\x01[0-9A-F]{32}\x02")


class _Route:
    def __init__(self, topic: str) -> None:
        self._topic = topic

    def write_queues(self) -> list[MessageQueue]:
        return QUEUES[self._topic]


class _Done:
    replica = False

    def result(self) -> None:
        return None


class _Recorder:
    """A client that keeps each send's body (the Python path encodes every send as a batch body here)."""

    def __init__(self) -> None:
        self.sends: dict[MessageQueue, list[tuple[int, bytes]]] = defaultdict(list)

    def route(self, topic: str) -> _Route:
        return _Route(topic)

    def wire_message(self, m: OutgoingMessage) -> tuple[OutgoingMessage, int]:
        return compressed_for_send(m)

    def send_async(self, mq: MessageQueue, messages: list[OutgoingMessage], *, group: str, sys_flag: int) -> _Done:
        self.sends[mq].append((sys_flag, encode_batch(messages)))
        return _Done()


def _python(batches: list[pa.RecordBatch], default_topic: str | None, start: int = 3) -> dict:
    client = _Recorder()
    router = Router(client, start=start)  # type: ignore[arg-type]
    sender = Sender(client, "g", transactional=False, retry_timeout=1.0)  # type: ignore[arg-type]
    for batch in batches:
        rows = to_rows(batch, default_topic)
        for i, m in enumerate(rows.messages):
            named = rows.queues[i] if rows.queues is not None else (None, None)
            sender.add(router.route(rows.topics[i], m.sharding_key, *named), m)
    sender.finish()
    return dict(client.sends)


def _native(batches: list[pa.RecordBatch], default_topic: str | None, start: int = 3) -> dict:
    native = NativeSends(Router(_Recorder(), start=start), default_topic)  # type: ignore[arg-type]
    sends: dict[MessageQueue, list[tuple[int, bytes]]] = defaultdict(list)
    for batch in batches:
        assert takes(batch)
        for s in native.add(batch):
            sends[s.mq].append((s.sys_flag, s.body))
    for s in native.finish():
        sends[s.mq].append((s.sys_flag, s.body))
    return dict(sends)


def _records(sys_flag: int, body: bytes) -> list[tuple[int, bytes, bytes]]:
    """(flag, body inflated, properties without the UNIQ_KEY's value) of each message of a batch body."""
    out, i = [], 0
    while i < len(body):
        total, magic, crc, flag, n = struct.unpack_from(">iiiii", body, i)
        assert (magic, crc) == (0, 0)
        data = body[i + 20 : i + 20 + n]
        (plen,) = struct.unpack_from(">h", body, i + 20 + n)
        props = body[i + 22 + n : i + 22 + n + plen]
        assert total == 22 + n + plen
        out.append((flag, zlib.decompress(data) if sys_flag & COMPRESSED_FLAG else data, UNIQ.sub(b"UNIQ", props)))
        i += total
    return out


def _same(python: dict, native: dict) -> None:
    assert python.keys() == native.keys()
    for mq in python:
        assert [f for f, _ in python[mq]] == [f for f, _ in native[mq]], mq
        assert [_records(*s) for s in python[mq]] == [_records(*s) for s in native[mq]], mq
        for (flag, a), (_, b) in zip(python[mq], native[mq], strict=True):
            if not flag & COMPRESSED_FLAG:  # zlib and the core's deflate may pick other (valid) encodings
                assert UNIQ.sub(b"U", a) == UNIQ.sub(b"U", b), mq


def _batch(n: int, offset: int = 0) -> pa.RecordBatch:
    big = {7, 30}
    props = pa.array(
        [
            None
            if i % 5 == 0
            else [("a", f"v{i}"), ("UNIQ_KEY", "x"), ("b", None), ("__RMQ.TRANSIENT.T", "y"), ("a", "again")]
            if i % 5 == 1
            else [(f"k{i % 3}", "é€")]
            for i in range(n)
        ],
        pa.map_(pa.string(), pa.string()),
    )
    return pa.RecordBatch.from_pydict(
        {
            "body": [(("x" * 5000) if i in big else f"body-{i + offset}") for i in range(n)],
            "topic": ["ta" if i % 3 else "tb" for i in range(n)],
            "tags": [None if i % 4 == 0 else "" if i % 4 == 1 else f"tag{i % 2}" for i in range(n)],
            "keys": pa.array([None if i % 6 == 0 else [f"k{i}", "", None, "k two"] for i in range(n)]),
            "properties": props,
            "flag": pa.array([None if i % 2 else i for i in range(n)], pa.int32()),
            "shardingKey": [None if i % 3 else f"order-{i % 7}" for i in range(n)],
        }
    )


def test_rows_of_every_column_give_the_same_bodies():
    batches = [_batch(40), _batch(600, 40), _batch(3, 640)]  # > 256 per queue: full sends and leftovers
    _same(_python(batches, None), _native(batches, None))


def test_text_keys_binary_bodies_and_the_default_topic():
    batch = pa.RecordBatch.from_pydict(
        {"body": pa.array([b"\x00\x01", b"", b"z" * 4096], pa.binary()), "keys": ["a  b", None, " c "]}
    )
    _same(_python([batch], "tb"), _native([batch], "tb"))


def test_named_queues():
    batch = pa.RecordBatch.from_pydict(
        {
            "body": [f"b{i}" for i in range(10)],
            "topic": ["ta"] * 10,
            "brokerName": [None if i % 4 == 0 else "broker-b" for i in range(10)],
            "queueId": pa.array([None if i % 4 == 0 else i % 3 for i in range(10)], pa.int32()),
        }
    )
    _same(_python([batch], None), _native([batch], None))


def test_a_batch_with_timer_rows_is_left_to_python():
    times = pa.array([None, 5], pa.int64())
    assert not takes(pa.RecordBatch.from_pydict({"body": ["a", "b"], "deliverTimeMs": times}))
    assert takes(pa.RecordBatch.from_pydict({"body": ["a", "b"], "deliverTimeMs": pa.array([None, None], pa.int64())}))
    assert not takes(pa.RecordBatch.from_pydict({"body": [b"a", b"x" * (1 << 20)]}))  # fills a send alone


@pytest.mark.parametrize(
    "column, value",
    [("properties", [("a\x02", "v")]), ("properties", [("a", "v\x02")]), ("tags", "t\x02"), ("shardingKey", "\x02")],
)
def test_a_property_the_wire_cannot_carry_fails_on_both_paths(column, value):
    t = pa.map_(pa.string(), pa.string()) if column == "properties" else pa.string()
    batch = pa.RecordBatch.from_pydict({"body": ["a"], column: pa.array([value], t)})
    with pytest.raises(ProtocolError, match="separator"):
        _python([batch], "ta")
    with pytest.raises(ProtocolError, match="separator"):
        _native([batch], "ta")


def test_too_many_property_bytes_fail_on_both_paths():
    batch = pa.RecordBatch.from_pydict(
        {"body": ["a"], "properties": pa.array([[("p", "v" * 40000)]], pa.map_(pa.string(), pa.string()))}
    )
    with pytest.raises(ProtocolError, match="32767"):
        _python([batch], "ta")
    with pytest.raises(ProtocolError, match="32767"):
        _native([batch], "ta")


def test_unique_ids_match_the_python_generator(monkeypatch):
    gen = unique_ids._UniqueIds()
    start = gen._month_start_ms
    times = [start + 5, start + 5, start + 3, start + 9] + [start + 20] * 65_540 + [start + 19, start + 25]
    clock = iter(times)
    monkeypatch.setattr(gen, "_now_ms", lambda: next(clock))
    python = [gen.next() for _ in times]
    native = unique_ids_at(gen._prefix, start, times)
    assert native == python
    assert len(set(native)) == len(native)


# -- half messages (exactly once) ------------------------------------------------------------------------------
GROUP, QUERY, BATCH_ID = "pg", "3f2a-query", 7


def _props(text: str) -> dict[str, str]:
    return dict(pair.split("\x01", 1) for pair in text.split("\x02") if pair)


def _half(cmd: RemotingCommand) -> tuple:
    """A SEND_MESSAGE_V2 request with its born timestamp left out, its properties as a dict without the UNIQ_KEY
    (returned beside), its body inflated."""
    ext = dict(cmd.ext_fields)
    del ext["g"]
    props = _props(ext.pop("i"))
    uniq = props.pop("UNIQ_KEY")
    body = zlib.decompress(cmd.body) if int(ext["f"]) & COMPRESSED_FLAG else cmd.body
    return (cmd.code, cmd.language, cmd.version, ext, props, body), uniq


def _python_halves(batches, default_topic, keyed: bool, ns: Namespace) -> list[tuple]:
    """What the row-by-row path sends (write_task's loop): each row's half request and its row key."""
    router = Router(_Recorder(), start=3)  # type: ignore[arg-type]
    out = []
    for batch in batches:
        rows = to_rows(batch, default_topic)
        for i, m in enumerate(rows.messages):
            named = rows.queues[i] if rows.queues is not None else (None, None)
            mq = router.route(rows.topics[i], m.sharding_key, *named)
            key = ""
            if keyed:
                queue = None if named[0] is None else (mq.broker_name, mq.queue_id)
                key = row_key(GROUP, QUERY, BATCH_ID, rows.topics[i], m, queue)
                m.properties[ROW_KEY_PROPERTY] = key
            wire, sys_flag = compressed_for_send(m)
            half, uniq = _half(req.half_request(ns.wrap(GROUP), ns.queue(mq), wire, sys_flag=sys_flag))
            assert uniq == m.unique_id
            out.append((mq, half, key))
    return out


def _native_halves(batches, default_topic, keyed: bool, ns: Namespace) -> list[tuple]:
    native = NativeSends(Router(_Recorder(), start=3), default_topic, ns)  # type: ignore[arg-type]
    spec = HalfSpec(GROUP, batch_prefix(GROUP, QUERY, BATCH_ID) if keyed else None)
    out = []
    for batch in batches:
        assert takes(batch)
        for h in native.halves(batch, spec):
            cmd = decode_frame(h.frame[4:])
            assert struct.unpack_from(">i", h.frame)[0] == len(h.frame) - 4 and cmd.opaque == h.opaque
            half, uniq = _half(cmd)
            assert uniq == h.msg_id and re.fullmatch("[0-9A-F]{32}", uniq)
            assert h.size == len(cmd.body)
            out.append((h.mq, half, h.key))
    return out


@pytest.mark.parametrize("keyed", [True, False], ids=["streaming", "batch"])
def test_half_messages_and_row_keys_are_the_python_paths(keyed):
    batches = [_batch(40), _batch(60, 40)]
    python = _python_halves(batches, None, keyed, NO_NAMESPACE)
    native = _native_halves(batches, None, keyed, NO_NAMESPACE)
    assert len(native) == 100 and native == python


def test_half_messages_of_named_queues_text_keys_and_a_namespace():
    ns = Namespace("MQ_INST_1")
    named = pa.RecordBatch.from_pydict(
        {
            "body": [f"b{i}" for i in range(10)],
            "topic": ["ta"] * 10,
            "brokerName": [None if i % 4 == 0 else "broker-b" for i in range(10)],
            "queueId": pa.array([None if i % 4 == 0 else i % 3 for i in range(10)], pa.int32()),
        }
    )
    texts = pa.RecordBatch.from_pydict(
        {"body": pa.array([b"\x00\x01", b"", b"z" * 4096], pa.binary()), "keys": ["a  b", None, " c "]}
    )
    for batch, topic in ((named, None), (texts, "tb")):
        python = _python_halves([batch], topic, True, ns)
        assert python == _native_halves([batch], topic, True, ns)
        assert all(h[1][3]["b"].startswith("MQ_INST_1%") and h[1][3]["a"] == "MQ_INST_1%pg" for h in python)
