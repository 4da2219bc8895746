"""The differential tests of the native gatherer: the columnar decoder (rmq_spark.source.arrow_decoder) against the oracle
(tests/support/reference_codec.py), ``to_record_batch(decode_messages(...))`` filtered by the same window and tags,
row for row, for plain, compressed (every codec) and inner-batch records; and the same errors."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq_spark.client.errors import MessageTooLargeError, ProtocolError
from rmq_spark.client.gathering import MessageCollector
from rmq_spark.client.model import MessageQueue, OutgoingMessage
from rmq_spark.client.remoting.send_codec import encode_batch
from rmq_spark.source.arrow_decoder import ArrowBatchDecoder, decode_to_arrow
from rmq_spark.source.schema import ARROW_SCHEMA
from tests.support.batches import assert_same
from tests.support.reference_codec import MessageBatcher, decode_messages, to_record_batch
from tests.support.stored_messages import (
    INNER_BATCH,
    MAGIC_V1,
    MAGIC_V2,
    NEED_UNWRAP,
    blank_record,
    compress,
    encode_batch_record,
    encode_stored_message,
    mutated_prefix,
)
from tests.unit.test_codec_fuzz import SAMPLE, _boundaries

# 150 examples each keep these under 10 s; the cargo fuzz target (scripts/fuzz.sh) explores the native scanner further
FUZZ = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
TYPICAL = {
    "TAGS": "TagA",
    "KEYS": "k1 k2  k3",
    "UNIQ_KEY": "7F0000010A2B18B4AAC27A1B2C3D0001",
    "WAIT": "true",
    "CLUSTER": "DefaultCluster",
    "MIN_OFFSET": "0",
    "MAX_OFFSET": "99",
}


def expected(data, broker="broker-a", tags=None, low=None, high=None) -> pa.RecordBatch:
    """What the per-message path gives for the same block, window and tags."""
    msgs = [
        m
        for m in decode_messages(data, broker, tags=tags)
        if (low is None or m.queue_offset >= low) and (high is None or m.queue_offset < high)
    ]
    return to_record_batch(msgs)


def check(data, broker="broker-a", tags=None, low=None, high=None) -> pa.RecordBatch:
    got = decode_to_arrow(data, broker, tags=tags, low=low, high=high)
    assert got.schema == ARROW_SCHEMA
    assert_same(got, expected(data, broker, tags, low, high))
    return got


_CODEC_WORDS = re.compile(
    r"the (\w+)-compressed message body is truncated|cannot decompress the (\w+) message body: .*"
)


def comparable(text: str) -> str:
    """An error's text without the words of the codec library (the oracle's Python codecs and the core's crates
    word a broken stream differently, and may not agree whether it is truncated or corrupt)."""
    return _CODEC_WORDS.sub(lambda m: f"the {m[1] or m[2]} body does not decompress", text)


def same_error(data, tags=None) -> str:
    """decode_to_arrow raises the ProtocolError decode_messages raises, with the same text (but for the codec
    library's words)."""
    with pytest.raises(ProtocolError) as want:
        decode_messages(data, "b", tags=tags)
    with pytest.raises(ProtocolError) as got:
        decode_to_arrow(data, "b", tags=tags)
    assert type(got.value) is type(want.value) and comparable(str(got.value)) == comparable(str(want.value))
    return str(got.value)


# ---------------------------------------------------------------------------------------------- hand-built blocks


def test_typical_block_every_column():
    data = b"".join(
        encode_stored_message(
            body=bytes([i]) * 100,
            queue_offset=10 + i,
            commit_log_offset=1000 * i,
            properties={**TYPICAL, "UNIQ_KEY": f"U{i}"},
            queue_id=3,
            flag=i % 3,
            reconsume_times=i,
            born_timestamp=1_700_000_000_000 + i,
        )
        for i in range(32)
    )
    got = check(data)
    assert got.num_rows == 32
    row = got.slice(5, 1).to_pylist()[0]
    assert row["queueOffset"] == 15 and row["msgId"] == "U5" and row["keys"] == ["k1", "k2", "k3"]
    assert row["tags"] == "TagA" and row["body"] == b"\x05" * 100 and row["brokerName"] == "broker-a"
    assert row["bornHost"] == "10.0.0.1:50000" and row["storeHost"] == "10.0.0.2:10911"
    assert dict(row["properties"]) == {**TYPICAL, "UNIQ_KEY": "U5"}


def test_empty_block():
    got = check(b"")
    assert got.num_rows == 0 and got.schema == ARROW_SCHEMA


@pytest.mark.parametrize(
    "born, store",
    [
        (("10.1.2.3", 1), ("10.1.2.4", 10911)),
        (("2001:db8::1", 40000), ("10.1.2.4", 10911)),
        (("10.1.2.3", 1), ("fe80::1:2", 10911)),
        (("::1", 5), ("2001:db8:0:0:1::ff", 10911)),
        (("::ffff:10.9.8.7", 7), ("::ffff:10.9.8.8", 8)),
    ],
)
def test_ipv4_and_ipv6_hosts(born, store):
    check(encode_stored_message(born_host=born, store_host=store, commit_log_offset=0x0102030405060708))
    # mixed in one block, and several hosts per column
    check(
        encode_stored_message(born_host=born, store_host=store, queue_offset=1)
        + encode_stored_message(queue_offset=2)
        + encode_stored_message(born_host=store, store_host=born, queue_offset=3)
    )


def test_both_magics():
    check(
        encode_stored_message(topic="t" * 200, magic=MAGIC_V2, queue_offset=1)
        + encode_stored_message(topic="short", magic=MAGIC_V2, queue_offset=2)
        + encode_stored_message(topic="v1", magic=MAGIC_V1, queue_offset=3)
    )


@pytest.mark.parametrize("kind", ["zlib", "zlib-legacy", "lz4", "zstd"])
def test_compressed_bodies(kind):
    body = b"The quick brown fox jumps over the lazy dog. " * 50
    got = check(
        encode_stored_message(body=b"before", queue_offset=1, properties={"TAGS": "A"})
        + encode_stored_message(
            body=body, compression=kind, queue_offset=2, properties={"TAGS": "z"}, born_host=("::1", 5)
        )
        + encode_stored_message(body=b"after", queue_offset=3)
    )
    assert got.column("body").to_pylist() == [b"before", body, b"after"]
    check(encode_stored_message(body=b"", sys_flag=0x301))  # compressed flag on an empty body: kept as is


def test_inner_batches():
    inner = (
        encode_batch_record(b"one", {"TAGS": "A", "UNIQ_KEY": "U1", "KEYS": "k1"}, flag=1)
        + encode_batch_record(b"two", {"TAGS": "B", "UNIQ_KEY": "U2"}, flag=2)
        + encode_batch_record(b"three", {"TAGS": "A"}, flag=3)
        + encode_batch_record(b"", {}, flag=4)
    )
    data = (
        encode_stored_message(body=b"first", queue_offset=39, properties={"TAGS": "A"})
        + encode_stored_message(
            body=inner,
            queue_offset=40,
            queue_id=2,
            commit_log_offset=777,
            sys_flag=INNER_BATCH | NEED_UNWRAP,
            store_host=("2001:db8::2", 9),
            properties={"UNIQ_KEY": "BATCH", "INNER_NUM": "4"},
        )
        + encode_stored_message(body=inner, queue_offset=44, sys_flag=INNER_BATCH)  # not unwrapped
        + encode_stored_message(body=inner, queue_offset=45, compression="zstd", sys_flag=INNER_BATCH | NEED_UNWRAP)
        + encode_stored_message(body=b"last", queue_offset=49, properties={"TAGS": "B", "UNIQ_KEY": "U9"})
    )
    got = check(data)
    assert got.column("queueOffset").to_pylist() == [39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49]
    for tags in (frozenset({"A"}), frozenset({"B"}), frozenset({"Z"})):
        for low, high in ((None, None), (41, 47), (40, 41), (44, 45), (48, 100)):
            check(data, tags=tags, low=low, high=high)
    check(
        encode_stored_message(
            body=encode_batch([OutgoingMessage(b"x", tags="T").with_unique_id()]), sys_flag=INNER_BATCH | NEED_UNWRAP
        )
    )
    check(encode_stored_message(body=b"", sys_flag=INNER_BATCH | NEED_UNWRAP))  # unwraps into nothing


@pytest.mark.parametrize(
    "raw",
    [
        b"",  # no properties at all
        b"\x02",
        b"TAGS\x01a",  # no final separator
        b"TAGS\x01a\x02KEYS\x01\x02\x01v\x02noval\x02\x02",  # empty value, empty name, no \x01: dropped
        b"x\x01v\x01w\x02",  # a value holding \x01
        b"a\x011\x02b\x012\x02a\x013\x02",  # a name twice: first position, last value
        b"r\x010\x02" + b"".join(b"p%d\x01v\x02" % i for i in range(300)) + b"r\x01last\x02",  # a repeat far apart
        b"TAGS\x01t1\x02TAGS\x01t2\x02KEYS\x01a\x02KEYS\x01b c\x02UNIQ_KEY\x01u1\x02UNIQ_KEY\x01u2\x02",
        b"KEYS\x01  a  b \x02",
        b"KEYS\x01   \x02",
        b"KEYS\x01one\x02",
        "TAGS\x01t\u00e4g\x02KEYS\x01\u65e5\u672c \u8a9e\x02\u540d\x01\u5024\u5024\x02UNIQ_KEY\x01\U0001f600\x02".encode(),
    ],
)
def test_properties_edge_cases(raw):
    data = (
        encode_stored_message(raw_properties=raw, queue_offset=1, commit_log_offset=5)
        + encode_stored_message(properties=TYPICAL, queue_offset=2)
        + encode_stored_message(raw_properties=raw, queue_offset=3, store_host=("::2", 1))
    )
    check(data)
    check(data, tags=frozenset({"TagA", "t2", "a"}))


def test_absent_tags_keys_and_uniq_key():
    data = b"".join(
        encode_stored_message(queue_offset=i, commit_log_offset=i * 97, properties=p)
        for i, p in enumerate([{}, {"TAGS": "A"}, {"KEYS": "k"}, {"UNIQ_KEY": "U"}, {"OTHER": "x"}, TYPICAL])
    )
    got = check(data)
    assert got.column("keys").to_pylist() == [[], [], ["k"], [], [], ["k1", "k2", "k3"]]
    assert got.column("tags").to_pylist() == [None, "A", None, None, None, "TagA"]
    assert got.column("msgId").to_pylist()[3] == "U"


def test_unicode_topic_body_properties():
    check(
        encode_stored_message(
            topic="th\u00e9\u00e2tre-\u65e5\u672c",
            body="\u00e9\u00e9".encode(),
            properties={
                "TAGS": "\u00e9t\u00e9",
                "KEYS": "\u00fcber stra\u00dfe",
                "\u540d": "\u5024",
                "UNIQ_KEY": "\U0001f600",
            },
        )
    )


def test_blank_records_and_empty_bodies():
    check(
        encode_stored_message(queue_offset=1, body=b"")
        + blank_record(16)
        + encode_stored_message(queue_offset=2)
        + blank_record(8)
    )


@pytest.mark.parametrize(
    "low, high",
    [(None, None), (0, 32), (5, 32), (0, 7), (5, 7), (6, 7), (7, 7), (40, 50), (-5, 3), (None, 10), (20, None)],
)
def test_windows_cut_the_block(low, high):
    data = b"".join(encode_stored_message(queue_offset=i, properties={"TAGS": "AB"[i % 2]}) for i in range(32))
    got = check(data, low=low, high=high)
    lo, hi = 0 if low is None else max(low, 0), 32 if high is None else min(high, 32)
    assert got.column("queueOffset").to_pylist() == list(range(lo, hi))
    check(data, tags=frozenset({"A"}), low=low, high=high)


@pytest.mark.parametrize(
    "tags",
    [
        None,
        frozenset(),
        frozenset({"*"}),
        frozenset({"A", "*"}),
        frozenset({"A"}),
        frozenset({"A", "C"}),
        frozenset({"Z"}),
        {"B"},
    ],
)
def test_tag_filters(tags):
    data = b"".join(
        encode_stored_message(queue_offset=i, properties=p)
        for i, p in enumerate(
            [{"TAGS": "A"}, {"TAGS": "B"}, {}, {"TAGS": "C"}, {"TAGS": "A"}, {"TAGS": "a"}, {"TAGS": "A "}]
        )
    )
    check(data, tags=tags)


def test_buffer_inputs():
    data = b"".join(encode_stored_message(body=f"m{i}".encode(), queue_offset=i) for i in range(5))
    for buf in (memoryview(data), bytearray(data), memoryview(bytearray(b"xx" + data))[2:]):
        assert_same(decode_to_arrow(buf, "broker-a"), expected(data))


def test_decoder_collects_blocks_with_their_windows():
    blocks = [
        b"".join(
            encode_stored_message(
                queue_offset=32 * j + i, body=bytes([j, i]), properties={"TAGS": "AB"[i % 2], "UNIQ_KEY": f"{j}-{i}"}
            )
            for i in range(32)
        )
        for j in range(6)
    ]
    blocks.insert(
        3,
        encode_stored_message(
            body=encode_batch_record(b"in", {"TAGS": "A"}),
            queue_offset=999,
            sys_flag=INNER_BATCH | NEED_UNWRAP,
            compression="lz4",
        ),
    )
    windows = [(0, 32), (40, 50), (None, None), (999, 1000), (96, 200), (130, 140), (160, 161)]
    for tags in (None, frozenset({"A"})):
        decoder = ArrowBatchDecoder("broker-a", tags=tags)
        for block, (low, high) in zip(blocks, windows):
            decoder.add(block, low, high)
        # rows counts the rows to output: inside the windows (32 + 10 + 32 + 1 + 32 + 10 + 1), and with the tag
        # re-check only the even ones and the inner message (16 + 5 + 16 + 1 + 16 + 5 + 1)
        assert decoder.rows == (118 if tags is None else 60) and decoder.nbytes > 6 * 32 * 100
        got = decoder.flush()
        want = (
            pa.Table.from_batches([expected(b, tags=tags, low=lo, high=hi) for b, (lo, hi) in zip(blocks, windows)])
            .combine_chunks()
            .to_batches()[0]
        )
        assert_same(got, want)
        assert decoder.rows == 0 and decoder.flush().num_rows == 0
        decoder.add(blocks[0], 0, 1)  # usable again after a flush
        assert decoder.flush().column("queueOffset").to_pylist() == [0]


def test_large_message_block():
    data = b"".join(encode_stored_message(body=bytes(200_000), queue_offset=i) for i in range(3))
    check(data)


# ---------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r[:-1],
        lambda r: r + b"\0\0\0",
        lambda r: struct.pack(">i", 20) + r[4:],
        lambda r: struct.pack(">i", len(r) + 5) + r[4:] + b"\0" * 5,
        lambda r: r[:4] + b"\x12\x34\x56\x78" + r[8:],
        lambda r: r[:84] + struct.pack(">i", -1) + r[88:],
        lambda r: r[:84] + struct.pack(">i", 1 << 20) + r[88:],
        lambda r: r[:93] + b"\xff" + r[94:],
        lambda r: r[:93] + b"\x7f" + r[94:],
        lambda r: r[:94] + b"\xff" + r[95:],  # topic not UTF-8
        lambda r: r[:-2] + b"\xc3\x28",  # properties not UTF-8
        lambda r: r[:-2] + b"\xed\xa0",  # a UTF-16 surrogate
        lambda r: r[:36] + struct.pack(">i", 0x30) + r[40:],
    ],
)
def test_malformed_records_raise_what_decode_messages_raises(mutate):
    rec = encode_stored_message(topic="TT", body=b"hello", properties={"A": "bc"})
    good = encode_stored_message(queue_offset=7)
    same_error(mutate(rec))
    same_error(good + mutate(rec))
    same_error(good + mutate(rec) + good)


def test_corrupt_compressed_and_inner_batch_records():
    stream = compress("zstd", bytes(range(256)) * 8)
    good = encode_stored_message(queue_offset=7)
    same_error(good + encode_stored_message(body=stream[:-3], sys_flag=0x201))
    same_error(good + encode_stored_message(body=b"abc", sys_flag=0x1 | (5 << 8)))
    inner = bytearray(encode_batch_record(b"one", {"TAGS": "A"}))
    struct.pack_into(">i", inner, 0, 999)
    same_error(good + encode_stored_message(body=bytes(inner), sys_flag=INNER_BATCH | NEED_UNWRAP))
    bad_props = encode_batch_record(b"one", {"TAGS": "A"})[:-1] + b"\xff"
    same_error(good + encode_stored_message(body=bad_props, sys_flag=INNER_BATCH | NEED_UNWRAP))
    # an earlier record with bad text wins over a later bad compressed one, as in decode_messages
    same_error(encode_stored_message(raw_properties=b"\xff") + encode_stored_message(body=stream[:-3], sys_flag=0x201))


def test_not_a_byte_buffer():
    same_error("text")  # type: ignore[arg-type]


@pytest.mark.parametrize("compression", [None, "zlib"])
def test_unrepresentable_timestamp_is_protocol_error(compression):
    rec = encode_stored_message(born_timestamp=(1 << 62), compression=compression)
    decode_messages(rec, "b")  # decodes, but no microsecond timestamp holds it
    with pytest.raises(ProtocolError, match="timestamp"):
        decode_to_arrow(rec, "b")
    decoder = ArrowBatchDecoder("b")
    good = encode_stored_message(queue_offset=1, compression=compression)
    decoder.add(good)
    with pytest.raises(ProtocolError, match="timestamp"):
        decoder.add(rec)
    assert_same(decoder.flush(), expected(good, "b"))  # the failed block was not collected


@pytest.mark.parametrize("compression", [None, "zlib"])
def test_unrepresentable_timestamp_outside_the_window_or_tags_is_not_read(compression):
    far = encode_stored_message(
        queue_offset=1, born_timestamp=(1 << 62), properties={"TAGS": "B"}, compression=compression
    )
    block = encode_stored_message(queue_offset=0, properties={"TAGS": "A"}) + far
    assert check(block, low=0, high=1).num_rows == 1
    assert check(block, tags=frozenset({"A"})).num_rows == 1
    with pytest.raises(ProtocolError, match="timestamp"):
        decode_to_arrow(block, "b", low=1)


def test_failed_add_leaves_the_decoder_as_it_was():
    decoder = ArrowBatchDecoder("broker-a")
    good = encode_stored_message(queue_offset=1)
    decoder.add(good)
    with pytest.raises(ProtocolError):
        decoder.add(good + good[:-1])
    with pytest.raises(ProtocolError):
        decoder.add(good + encode_stored_message(body=b"zz", sys_flag=0x301))
    assert decoder.rows == 1
    assert_same(decoder.flush(), expected(good))


# ---------------------------------------------------------------------------------------------- properties


def test_every_prefix_of_a_sample_block():
    bounds = _boundaries(SAMPLE)
    for cut in range(len(SAMPLE) + 1):
        try:
            got = decode_to_arrow(SAMPLE[:cut], "b")
        except ProtocolError:
            assert cut not in bounds, cut
            with pytest.raises(ProtocolError):
                decode_messages(SAMPLE[:cut], "b")
        else:
            assert cut in bounds, cut
            assert_same(got, expected(SAMPLE[:cut], "b"))


def _agree(data, tags=None, low=None, high=None) -> None:
    """decode_to_arrow and the per-message path agree: the same rows, or the same ProtocolError (or, for a
    timestamp no Arrow timestamp holds, a ProtocolError where to_record_batch fails)."""
    try:
        msgs = decode_messages(data, "b", tags=tags)
    except ProtocolError as e:
        with pytest.raises(ProtocolError) as got:
            decode_to_arrow(data, "b", tags=tags, low=low, high=high)
        assert type(got.value) is type(e) and comparable(str(got.value)) == comparable(str(e))
        return
    try:
        want = expected(data, "b", tags, low, high)
    except (OverflowError, pa.ArrowInvalid):
        with pytest.raises(ProtocolError):
            decode_to_arrow(data, "b", tags=tags, low=low, high=high)
        return
    assert msgs is not None
    assert_same(decode_to_arrow(data, "b", tags=tags, low=low, high=high), want)


@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes(data):
    _agree(data)


@FUZZ
@given(st.data())
def test_mutated_and_truncated_sample(data):
    block = mutated_prefix(data, SAMPLE)
    _agree(bytes(block), tags=frozenset({"A"}))
    _agree(memoryview(block))


# random message sets
_names = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "a", "\u540d", ""]) | st.text(max_size=5)
_values = st.sampled_from(["A", "B", "k1 k2", " k ", "", "x\x01y"]) | st.text(max_size=8)


@st.composite
def _raw_properties(draw) -> bytes:
    """Properties text with any mix of separators, names and values (valid UTF-8, or rarely not)."""
    parts = []
    for _ in range(draw(st.integers(0, 6))):
        parts.append(
            draw(_names)
            + draw(st.sampled_from(["\x01", "", "\x01\x01"]))
            + draw(_values)
            + draw(st.sampled_from(["\x02", "\x02", "", "\x02\x02"]))
        )
    raw = "".join(parts).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 30)) == 0:
        raw += draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"]))
    return raw


@st.composite
def _record(draw, offset: int) -> bytes:
    host = st.sampled_from(
        [("10.0.0.1", 1), ("10.0.0.2", 10911), ("::1", 5), ("2001:db8::7", 9), ("::ffff:1.2.3.4", 2)]
    )
    kind = draw(st.sampled_from(["plain"] * 8 + ["compressed", "inner", "inner-compressed", "blank"]))
    if kind == "blank":
        return blank_record(draw(st.integers(8, 24)))
    if draw(st.booleans()):
        props = draw(
            st.dictionaries(
                st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "x"]),
                st.sampled_from(["A", "B", "k1 k2", " k ", "U1"]),
                max_size=5,
            )
        )
        raw = "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode()
    else:
        raw = draw(_raw_properties())
    body = draw(st.binary(max_size=40))
    kw = {}
    sys_flag = 0
    if kind in ("inner", "inner-compressed"):
        body = b"".join(
            encode_batch_record(draw(st.binary(max_size=8)), p, flag=draw(st.integers(0, 3)))
            for p in draw(
                st.lists(
                    st.dictionaries(
                        st.sampled_from(["TAGS", "UNIQ_KEY", "KEYS"]),
                        st.sampled_from(["A", "B", "u", "k l"]),
                        max_size=3,
                    ),
                    max_size=3,
                )
            )
        )
        sys_flag = INNER_BATCH | NEED_UNWRAP
    if kind in ("compressed", "inner-compressed"):
        kw["compression"] = draw(st.sampled_from(["zlib", "zlib-legacy", "lz4", "zstd"]))
    topic = draw(st.sampled_from(["T", "topic-\u00e9", "t" * 130]))
    return encode_stored_message(
        topic=topic,
        body=body,
        raw_properties=raw,
        queue_id=draw(st.integers(0, 7)),
        queue_offset=offset,
        flag=draw(st.integers(-2, 5)),
        commit_log_offset=draw(st.integers(0, 2**63 - 1)),
        sys_flag=sys_flag,
        born_timestamp=(1 << 62) if draw(st.integers(0, 15)) == 0 else draw(st.integers(-(10**12), 4 * 10**12)),
        born_host=draw(host),
        store_timestamp=draw(st.integers(0, 4 * 10**12)),
        store_host=draw(host),
        reconsume_times=draw(st.integers(0, 3)),
        magic=MAGIC_V2 if len(topic) > 127 or draw(st.booleans()) else MAGIC_V1,
        **kw,
    )


@st.composite
def _block(draw) -> tuple[bytes, int]:
    start = draw(st.integers(0, 1000))
    n = draw(st.integers(0, 12))
    return b"".join(draw(_record(start + 4 * i)) for i in range(n)), start


@FUZZ
@given(_block(), st.sampled_from([None, frozenset({"A"}), frozenset({"A", "B"}), frozenset({"*"})]), st.data())
def test_random_message_sets(block, tags, data):
    raw, start = block
    low = data.draw(st.none() | st.integers(start - 2, start + 50))
    high = data.draw(st.none() | st.integers(start - 2, start + 60))
    _agree(raw, tags=tags, low=low, high=high)


@FUZZ
@given(st.lists(_block(), min_size=1, max_size=4), st.sampled_from([None, frozenset({"B"})]))
def test_random_blocks_in_one_batch(blocks, tags):
    try:
        wants = [expected(raw, "b", tags, start + 4, start + 30) for raw, start in blocks]
    except (ProtocolError, OverflowError, pa.ArrowInvalid):
        return  # errors are covered block by block above
    decoder = ArrowBatchDecoder("b", tags=tags)
    for raw, start in blocks:
        decoder.add(raw, start + 4, start + 30)
    want = pa.Table.from_batches(wants, schema=ARROW_SCHEMA).combine_chunks().to_batches()
    got = decoder.flush()
    if want:
        assert_same(got, want[0])
    else:
        assert got.num_rows == 0


@FUZZ
@given(_block(), st.sampled_from([None, frozenset({"A"})]), st.booleans())
def test_read_range_messages_are_the_oracles(block, tags, windowed):
    """The Messages ``read_range`` builds from the gathered columns are the oracle's, field for field (sysFlag,
    commit-log offset and body CRC too, and timestamps no Arrow timestamp holds), or the same error."""
    raw, start = block
    low, high = (start + 4, start + 30) if windowed else (None, None)
    collector = MessageCollector(MessageQueue("T", "b", 0), tags=tags)
    try:
        want = [
            m
            for m in decode_messages(raw, "b", tags=tags)
            if (low is None or m.queue_offset >= low) and (high is None or m.queue_offset < high)
        ]
    except ProtocolError as e:
        with pytest.raises(ProtocolError) as got:
            collector.add(raw, low, high)
        assert type(got.value) is type(e) and comparable(str(got.value)) == comparable(str(e))
        return
    collector.add(raw, low, high)
    assert collector.rows == len(want) and collector.take() == want


# ---------------------------------------------------------------------------------------------- column projection


@FUZZ
@given(
    _block(),
    st.sampled_from([None, frozenset({"A"})]),
    st.permutations(ARROW_SCHEMA.names),
    st.integers(1, 15),
    st.booleans(),
)
def test_projection_is_the_full_batch_narrowed(block, tags, order, k, windowed):
    """Any subset of the columns, in any order, with or without a tag filter and a window: the rows and values of
    the full decode, only those columns (the tag filter and window still apply when tags or queueOffset are not
    among them)."""
    raw, start = block
    low, high = (start + 4, start + 30) if windowed else (None, None)
    columns = tuple(order[:k])
    try:
        want = expected(raw, "b", tags, low, high).select(list(columns))
    except (ProtocolError, OverflowError, pa.ArrowInvalid):
        return  # errors of the full decode are covered above
    decoder = ArrowBatchDecoder("b", tags=tags, columns=columns)
    decoder.add(raw, low, high)
    got = decoder.flush()
    assert got.schema.names == list(columns) and got.schema.equals(want.schema)
    assert got.to_pylist() == want.to_pylist()
    got.validate(full=True)


def test_projection_of_an_empty_decoder_has_the_projected_schema():
    got = ArrowBatchDecoder("b", columns=("body", "queueOffset")).flush()
    assert got.num_rows == 0 and got.schema.names == ["body", "queueOffset"]


def test_message_batcher_projects_in_the_given_order():
    data = b"".join(encode_stored_message(body=b"m%d" % i, queue_offset=i, properties=TYPICAL) for i in range(4))
    batcher = MessageBatcher(("queueOffset", "tags", "body"))
    batcher.add(decode_messages(data, "b"), 1, 3)
    assert batcher.flush().to_pylist() == [{"queueOffset": i, "tags": "TagA", "body": b"m%d" % i} for i in (1, 2)]


def test_a_raised_body_limit_holds_for_every_record_of_a_block():
    """A body over the default limit but within the decoder's: the corrupt record after it is what is reported."""
    big = compress("zlib", bytes(17 << 20))  # 17 MiB of zeros, over the 16 MiB default
    block = encode_stored_message(body=big, sys_flag=0x1, queue_offset=1) + encode_stored_message(
        body=compress("zstd", b"x" * 100)[:-3], sys_flag=0x201, queue_offset=2
    )
    decoder = ArrowBatchDecoder("b", max_body=32 << 20)
    with pytest.raises(
        ProtocolError, match="TopicTest:b/0 offset 2: the zstd-compressed message body is truncated"
    ) as e:
        decoder.add(block)
    assert type(e.value) is ProtocolError


@pytest.mark.parametrize("kind", ["zlib", "lz4", "zstd"])
def test_a_body_past_the_limit_names_the_message_and_fails_the_whole_block(kind):
    """MessageTooLargeError as the oracle words it, whichever codec; nothing of the block is collected."""
    block = encode_stored_message(queue_offset=1) + encode_stored_message(
        body=b"\0" * 5000, compression=kind, queue_offset=2, queue_id=3
    )
    decoder = ArrowBatchDecoder("b", max_body=4999)
    with pytest.raises(MessageTooLargeError) as got:
        decoder.add(block)
    with pytest.raises(MessageTooLargeError) as want:
        decode_messages(block, "b", max_body=4999)
    assert str(got.value) == str(want.value) and got.value.limit == want.value.limit == 4999
    assert decoder.rows == 0
    decoder = ArrowBatchDecoder("b", max_body=5000)
    decoder.add(block)
    assert decoder.flush().column("body").to_pylist() == [b"hello", b"\0" * 5000]


def test_a_read_in_a_namespace_names_every_row_by_the_topic_read():
    """Records stored under a namespace name their topic with its prefix; the queue read names it without."""
    mq = MessageQueue("Orders", "broker-a", 0)
    block = b"".join(encode_stored_message(topic="tenant-a%Orders", queue_offset=i, body=b"b%d" % i) for i in range(3))
    decoder = ArrowBatchDecoder(mq.broker_name, queue=mq, topic=mq.topic, columns=("topic", "queueOffset"))
    decoder.add(block)
    assert decoder.flush().to_pydict() == {"topic": ["Orders"] * 3, "queueOffset": [0, 1, 2]}
    collector = MessageCollector(mq, topic=mq.topic)
    collector.add(block)
    assert [(m.topic, m.body) for m in collector.take()] == [("Orders", b"b0"), ("Orders", b"b1"), ("Orders", b"b2")]
    plain = MessageCollector(mq)
    plain.add(block)
    assert {m.topic for m in plain.take()} == {"tenant-a%Orders"}


def test_a_batch_of_every_column_imports_no_pandas():
    """pa.scalar and pa.array of a list import pandas on their first call: ~0.3 CPU-s in every Spark Python worker."""
    script = (
        "import sys\n"
        "from rmq_spark.source.arrow_decoder import ArrowBatchDecoder\n"
        "from rmq_spark.client.model import MessageQueue\n"
        "from tests.support.stored_messages import encode_stored_message\n"
        "d = ArrowBatchDecoder('b', queue=MessageQueue('T', 'b', 0), topic='T')\n"
        "d.add(encode_stored_message(properties={'TAGS': 'a', 'KEYS': 'k'}))\n"
        "assert d.flush().num_rows == 1\n"
        "print('pandas' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.strip() == "False"
