"""The reference decoder (the oracle of the native gatherer) and the batch encoder against records built by the
documented layout."""

from __future__ import annotations

import pickle
import struct

import pytest

from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.model import Message, OutgoingMessage
from rmq_spark.client.remoting.send_codec import encode_batch, encode_properties
from rmq_spark.client.unique_ids import new_unique_id
from tests.support.reference_codec import decode_messages, decode_properties
from tests.support.stored_messages import (
    BLANK_MAGIC,
    COMPRESSION_BITS,
    INNER_BATCH,
    MAGIC_V1,
    MAGIC_V2,
    NEED_UNWRAP,
    blank_record,
    compress,
    encode_batch_record,
    encode_stored_message,
)

# One stored message written out byte by byte (MessageDecoder.encode layout, magic V1, IPv4 hosts).
KNOWN_RECORD = (
    b"\x00\x00\x00\x68"  # totalSize 104 = 88 fixed + 2 body + 2 topic + 12 properties
    b"\xda\xa3\x20\xa7"  # magic code V1 (-626843481)
    b"\x12\x34\x56\x78"  # bodyCRC
    b"\x00\x00\x00\x03"  # queueId 3
    b"\x00\x00\x00\x05"  # flag 5
    b"\x00\x00\x00\x00\x00\x00\x00\x2a"  # queueOffset 42
    b"\x00\x00\x00\x00\x00\x01\x00\x00"  # physicOffset (commit log) 65536
    b"\x00\x00\x00\x00"  # sysFlag 0: IPv4 hosts, not compressed
    b"\x00\x00\x01\x8b\xcf\xe5\x68\x00"  # bornTimestamp 1700000000000
    b"\xc0\xa8\x01\x02"
    b"\x00\x00\x30\x39"  # bornHost 192.168.1.2, port 12345
    b"\x00\x00\x01\x8b\xcf\xe5\x68\x07"  # storeTimestamp 1700000000007
    b"\x0a\x00\x00\x01"
    b"\x00\x00\x2a\x9f"  # storeHost 10.0.0.1, port 10911
    b"\x00\x00\x00\x02"  # reconsumeTimes 2
    b"\x00\x00\x00\x00\x00\x00\x00\x00"  # preparedTransactionOffset 0
    b"\x00\x00\x00\x02"
    b"hi"  # body length 2, body
    b"\x01"
    b"T"  # topic length (1 byte in V1), topic
    b"\x00\x0a"
    b"TAGS\x01tg\x02"
    b"K\x02"  # properties length 10: "TAGS"="tg", then a pair without value
)


def test_known_record_decodes_every_field():
    assert len(KNOWN_RECORD) == 104
    [m] = decode_messages(KNOWN_RECORD, "broker-a")
    assert m.topic == "T"
    assert m.broker_name == "broker-a"
    assert m.queue_id == 3
    assert m.queue_offset == 42
    assert m.flag == 5
    assert m.body_crc == 0x12345678
    assert m.commit_log_offset == 65536
    assert m.sys_flag == 0
    assert m.born_timestamp == 1_700_000_000_000 and m.store_timestamp == 1_700_000_000_007
    assert m.born_host == "192.168.1.2:12345" and m.store_host == "10.0.0.1:10911"
    assert m.reconsume_times == 2
    assert m.body == b"hi" and type(m.body) is bytes
    assert m.properties == {"TAGS": "tg"}  # "K" without a value is dropped, as in Java
    assert m.tags == "tg" and m.keys == ()
    # no UNIQ_KEY: the offset message id = store IP | port | commit-log offset in upper-case hex
    assert m.msg_id == "0A00000100002A9F0000000000010000"
    assert type(m) is Message


def test_helper_matches_known_record():
    rec = encode_stored_message(
        topic="T",
        body=b"hi",
        raw_properties=b"TAGS\x01tg\x02K\x02",
        queue_id=3,
        queue_offset=42,
        flag=5,
        commit_log_offset=65536,
        body_crc=0x12345678,
        born_timestamp=1_700_000_000_000,
        born_host=("192.168.1.2", 12345),
        store_timestamp=1_700_000_000_007,
        store_host=("10.0.0.1", 10911),
        reconsume_times=2,
    )
    assert rec == KNOWN_RECORD


TYPICAL = {
    "TAGS": "TagA",
    "KEYS": "k1 k2  k3",
    "UNIQ_KEY": "7F0000010A2B18B4AAC27A1B2C3D0001",
    "WAIT": "true",
    "CLUSTER": "DefaultCluster",
    "MIN_OFFSET": "0",
}


def test_properties_tags_keys_uniq_key():
    rec = encode_stored_message(properties=TYPICAL, body=b"payload")
    [m] = decode_messages(rec, "b")
    assert m.properties == TYPICAL
    assert m.tags == "TagA"
    assert m.keys == ("k1", "k2", "k3")
    assert m.msg_id == TYPICAL["UNIQ_KEY"]


@pytest.mark.parametrize(
    "born, store, flags",
    [
        (("10.1.2.3", 1), ("10.1.2.4", 10911), 0x00),
        (("2001:db8::1", 40000), ("10.1.2.4", 10911), 0x10),
        (("10.1.2.3", 1), ("fe80::1:2", 10911), 0x20),
        (("::1", 5), ("2001:db8:0:0:1::ff", 10911), 0x30),
    ],
)
def test_ipv4_and_ipv6_hosts(born, store, flags):
    rec = encode_stored_message(
        born_host=born, store_host=store, commit_log_offset=0x0102030405060708, properties={"TAGS": "x"}
    )
    [m] = decode_messages(rec, "b")
    assert m.sys_flag == flags
    expected_born = {"2001:db8::1": "2001:db8::1", "::1": "::1"}.get(born[0], born[0])
    expected_store = {"fe80::1:2": "fe80::1:2", "2001:db8:0:0:1::ff": "2001:db8::1:0:0:ff"}.get(store[0], store[0])
    assert m.born_host == f"{expected_born}:{born[1]}"
    assert m.store_host == f"{expected_store}:{store[1]}"
    assert m.body == b"hello" and m.topic == "TopicTest"
    if flags & 0x20:  # 16-byte IP + port + offset = 28 bytes = 56 hex chars
        assert len(m.msg_id) == 56 and m.msg_id.endswith("00002A9F0102030405060708")
    else:
        assert m.msg_id == "0A01020400002A9F0102030405060708"


def test_ipv4_mapped_ipv6_rendered_as_ipv4():
    rec = encode_stored_message(born_host=("::ffff:10.9.8.7", 7))
    [m] = decode_messages(rec, "b")
    assert m.born_host == "10.9.8.7:7"


def test_magic_v2_two_byte_topic_length():
    long_topic = "t" * 200  # > 127: the broker writes magic V2
    recs = (
        encode_stored_message(topic=long_topic, magic=MAGIC_V2, queue_offset=1)
        + encode_stored_message(topic="short", magic=MAGIC_V2, queue_offset=2)
        + encode_stored_message(topic="v1", magic=MAGIC_V1, queue_offset=3)
    )
    ms = decode_messages(recs, "b")
    assert [(m.topic, m.queue_offset) for m in ms] == [(long_topic, 1), ("short", 2), ("v1", 3)]


@pytest.mark.parametrize("kind, bits", [("zlib", 0x300), ("zlib-legacy", 0), ("lz4", 0x100), ("zstd", 0x200)])
def test_compressed_bodies(kind, bits):
    body = b"The quick brown fox jumps over the lazy dog. " * 200
    rec = encode_stored_message(body=body, compression=kind, properties={"TAGS": "z"})
    assert len(rec) < len(body)  # really compressed on the wire
    [m] = decode_messages(rec, "b")
    assert m.body == body
    assert m.sys_flag == bits  # COMPRESSED_FLAG cleared after inflating, as the Java client does
    assert m.tags == "z"


@pytest.mark.parametrize("kind", ["zlib", "lz4", "zstd"])
def test_corrupt_compressed_body_is_protocol_error(kind):
    body = bytes(range(256)) * 8
    stream = compress(kind, body)
    flags = 0x1 | COMPRESSION_BITS[kind]
    for bad in (stream[: len(stream) // 2], stream[:-1], b"\0" * 16, stream[:4] + b"\xff" * (len(stream) - 4)):
        rec = encode_stored_message(body=bad, sys_flag=flags)  # a consistent record, a broken stream
        with pytest.raises(ProtocolError, match="decompress|truncated"):
            decode_messages(rec, "b")
    [m] = decode_messages(encode_stored_message(body=stream + stream, sys_flag=flags), "b")
    # concatenated frames are all read (LZ4FrameInputStream, ZstdInputStream); Java's InflaterInputStream stops
    # at the end of the first zlib stream
    assert m.body == (body if kind == "zlib" else body * 2)


def test_unknown_compression_type():
    rec = bytearray(encode_stored_message(body=b"abc"))
    struct.pack_into(">i", rec, 36, 0x1 | (5 << 8))
    with pytest.raises(ProtocolError, match="compression type 5"):
        decode_messages(bytes(rec), "b")


def test_several_messages_and_memoryview_input():
    recs = b"".join(
        encode_stored_message(
            body=f"m{i}".encode(),
            queue_offset=100 + i,
            commit_log_offset=i * 300,
            properties={"TAGS": "A" if i % 2 else "B", "UNIQ_KEY": f"ID{i}"},
        )
        for i in range(10)
    )
    for data in (recs, memoryview(recs), bytearray(recs), memoryview(bytearray(b"xx" + recs))[2:]):
        ms = decode_messages(data, "b")
        assert [m.queue_offset for m in ms] == list(range(100, 110))
        assert [m.body for m in ms] == [f"m{i}".encode() for i in range(10)]
        assert all(type(m.body) is bytes for m in ms)
        assert [m.msg_id for m in ms] == [f"ID{i}" for i in range(10)]
    assert decode_messages(b"", "b") == []


def test_tag_recheck():
    recs = b"".join(
        encode_stored_message(queue_offset=i, properties=p)
        for i, p in enumerate([{"TAGS": "A"}, {"TAGS": "B"}, {}, {"TAGS": "C"}, {"TAGS": "A"}])
    )
    assert [m.queue_offset for m in decode_messages(recs, "b", tags=frozenset({"A", "C"}))] == [0, 3, 4]
    assert len(decode_messages(recs, "b", tags=None)) == 5
    assert len(decode_messages(recs, "b", tags=frozenset({"*"}))) == 5
    assert len(decode_messages(recs, "b", tags=frozenset())) == 5  # empty tag set = subscribe all (Java)
    assert decode_messages(recs, "b", tags=frozenset({"Z"})) == []


def test_offset_delta():
    recs = encode_stored_message(queue_offset=5) + encode_stored_message(queue_offset=6)
    assert [m.queue_offset for m in decode_messages(recs, "b", offset_delta=1000)] == [1005, 1006]


def test_inner_batch_record_is_unwrapped():
    inner = (
        encode_batch_record(b"one", {"TAGS": "A", "UNIQ_KEY": "U1", "KEYS": "k1"}, flag=1)
        + encode_batch_record(b"two", {"TAGS": "B", "UNIQ_KEY": "U2"}, flag=2)
        + encode_batch_record(b"three", {"TAGS": "A"}, flag=3)
    )
    outer = encode_stored_message(
        body=inner,
        queue_offset=40,
        queue_id=2,
        commit_log_offset=777,
        sys_flag=INNER_BATCH | NEED_UNWRAP,
        properties={"UNIQ_KEY": "BATCH", "INNER_NUM": "3", "INNER_BASE": "40"},
    )
    after = encode_stored_message(body=b"plain", queue_offset=43, properties={"TAGS": "A", "UNIQ_KEY": "U4"})
    ms = decode_messages(outer + after, "b")
    assert [(m.queue_offset, m.body, m.flag, m.tags) for m in ms] == [
        (40, b"one", 1, "A"),
        (41, b"two", 2, "B"),
        (42, b"three", 3, "A"),
        (43, b"plain", 0, "A"),
    ]
    assert ms[0].keys == ("k1",) and ms[0].msg_id == "U1" and ms[1].msg_id == "U2"
    assert ms[2].msg_id == "0A00000200002A9F0000000000000309"  # no UNIQ_KEY: the batch record's offset id
    assert all(m.queue_id == 2 and m.topic == "TopicTest" and m.commit_log_offset == 777 for m in ms[:3])
    assert ms[0].properties == {"TAGS": "A", "UNIQ_KEY": "U1", "KEYS": "k1"}
    # the tag re-check applies to the unwrapped messages
    assert [m.queue_offset for m in decode_messages(outer + after, "b", tags=frozenset({"B"}))] == [41]


def test_inner_batch_without_unwrap_flag_is_kept_whole():
    inner = encode_batch_record(b"one", {"TAGS": "A"})
    outer = encode_stored_message(body=inner, sys_flag=INNER_BATCH, queue_offset=9)
    [m] = decode_messages(outer, "b")
    assert m.body == inner and m.queue_offset == 9


def test_inner_batch_inconsistent_is_protocol_error():
    inner = bytearray(encode_batch_record(b"one", {"TAGS": "A"}))
    struct.pack_into(">i", inner, 0, 999)
    outer = encode_stored_message(body=bytes(inner), sys_flag=INNER_BATCH | NEED_UNWRAP)
    with pytest.raises(ProtocolError, match="inner-batch"):
        decode_messages(outer, "b")
    outer = encode_stored_message(
        body=encode_batch_record(b"x", {})[:-2],  # no properties length
        sys_flag=INNER_BATCH | NEED_UNWRAP,
    )
    with pytest.raises(ProtocolError, match="inner-batch"):
        decode_messages(outer, "b")


def test_blank_records_are_skipped():
    recs = encode_stored_message(queue_offset=1) + blank_record(16) + encode_stored_message(queue_offset=2)
    assert [m.queue_offset for m in decode_messages(recs, "b")] == [1, 2]
    assert [m.queue_offset for m in decode_messages(encode_stored_message(queue_offset=1) + blank_record(8), "b")] == [
        1
    ]


@pytest.mark.parametrize(
    "mutate, what",
    [
        (lambda r: r[:-1], "totalSize"),
        (lambda r: r + b"\0\0\0", "truncated"),
        (lambda r: struct.pack(">i", 20) + r[4:], "totalSize"),
        (lambda r: struct.pack(">i", len(r) + 5) + r[4:] + b"\0" * 5, "properties length"),
        (lambda r: r[:4] + b"\x12\x34\x56\x78" + r[8:], "magic"),
        (lambda r: r[:84] + struct.pack(">i", -1) + r[88:], "body length"),
        (lambda r: r[:84] + struct.pack(">i", 1 << 20) + r[88:], "body length"),
        (lambda r: r[:93] + b"\xff" + r[94:], "topic length"),
        (lambda r: r[:93] + b"\x7f" + r[94:], "topic length"),
        (lambda r: r[:94] + b"\xff" + r[95:], "UTF-8"),
        (lambda r: r[:-2] + b"\xc3\x28", "UTF-8"),
        (lambda r: r[:36] + struct.pack(">i", 0x30) + r[40:], "message at byte 0"),
    ],
)
def test_malformed_records(mutate, what):
    rec = encode_stored_message(topic="TT", body=b"hello", properties={"A": "bc"})
    assert rec[88:93] == b"hello" and rec[93] == 2  # layout the mutations rely on
    with pytest.raises(ProtocolError, match=what):
        decode_messages(mutate(rec), "b")


def test_properties_codec():
    props = {"TAGS": "a", "KEYS": "k1 k2", "x": "v\x01w"}
    text = encode_properties(props)
    assert text == "TAGS\x01a\x02KEYS\x01k1 k2\x02x\x01v\x01w\x02"
    assert decode_properties(text) == props
    assert decode_properties("") == {}
    assert decode_properties("a\x01\x02\x01b\x02c\x02dd\x01e") == {"dd": "e"}  # Java drops empty names/values
    assert encode_properties({"a": None, "b": "1"}) == "b\x011\x02"
    with pytest.raises(ProtocolError):
        encode_properties({"a\x02": "1"})
    with pytest.raises(ProtocolError):
        encode_properties({"a": "1\x022"})


def test_outgoing_wire_properties():
    m = OutgoingMessage(b"x", tags="T", keys=("a", "b"), properties={"TAGS": "old", "p": "1"}, flag=3)
    assert m.wire_properties() == {"TAGS": "T", "p": "1", "KEYS": "a b"}
    assert OutgoingMessage(b"x").wire_properties() == {}
    u = m.with_unique_id()
    assert len(u.unique_id) == 32 and u.with_unique_id() is u and m.unique_id is None


def test_encode_batch_layout():
    msgs = [
        OutgoingMessage(b"body-1", tags="A", properties={"UNIQ_KEY": "U1"}, flag=7),
        OutgoingMessage(b"", keys=("k",)),
    ]
    data = encode_batch(msgs)
    p1 = b"UNIQ_KEY\x01U1\x02TAGS\x01A\x02"
    p2 = b"KEYS\x01k\x02"
    expected = (
        struct.pack(">iiiii", 20 + 6 + 2 + len(p1), 0, 0, 7, 6)
        + b"body-1"
        + struct.pack(">h", len(p1))
        + p1
        + struct.pack(">iiiii", 20 + 0 + 2 + len(p2), 0, 0, 0, 0)
        + struct.pack(">h", len(p2))
        + p2
    )
    assert data == expected
    assert encode_batch([]) == b""


def test_encode_batch_round_trips_through_inner_batch_decoding():
    msgs = [OutgoingMessage(f"b{i}".encode(), tags="T", keys=(f"k{i}",)).with_unique_id() for i in range(5)]
    outer = encode_stored_message(body=encode_batch(msgs), sys_flag=INNER_BATCH | NEED_UNWRAP, queue_offset=10)
    ms = decode_messages(outer, "b")
    assert [(m.queue_offset, m.body, m.keys, m.msg_id) for m in ms] == [
        (10 + i, f"b{i}".encode(), (f"k{i}",), msgs[i].unique_id) for i in range(5)
    ]


def test_encode_batch_rejects_oversized_properties():
    with pytest.raises(ProtocolError):
        encode_batch([OutgoingMessage(b"x", properties={"p": "v" * 40000})])


def test_new_unique_id():
    ids = [new_unique_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and i == i.upper() and int(i, 16) >= 0 for i in ids[:100])
    assert len({i[:20] for i in ids}) == 1  # fixed per process: fake IP | pid | random


def test_unique_ids_survive_counter_wrap_and_clock_steps(monkeypatch):
    from rmq_spark.client import unique_ids

    gen = unique_ids._UniqueIds()
    clock = [gen._month_start_ms + 5000]
    monkeypatch.setattr(gen, "_now_ms", lambda: clock[0])
    ids = [gen.next() for _ in range(70_000)]  # > 65536 in one millisecond: the counter wraps
    clock[0] -= 3000  # the clock steps back (NTP)
    ids += [gen.next() for _ in range(70_000)]
    assert len(set(ids)) == len(ids)


def test_messages_pickle_and_compare():
    [m] = decode_messages(encode_stored_message(properties=TYPICAL), "b")
    assert pickle.loads(pickle.dumps(m)) == m
    [m2] = decode_messages(encode_stored_message(properties=TYPICAL), "b")
    assert m == m2 and m is not m2
    with pytest.raises(Exception):
        m.topic = "x"  # still frozen


def test_blank_magic_constant():
    assert struct.pack(">i", BLANK_MAGIC) == bytes.fromhex("cbd43194")
