"""The native gathering of a gRPC pull's answer frames (``ArrowBatchDecoder.add_frames``) against the oracle:
``reference_codec.decode_frames`` into a ``MessageBatcher`` with the same window and tags, row for row (gzip bodies
too)."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.gathering import MessageCollector
from rmq_spark.client.grpc.messages import FLAG_PROPERTY
from rmq_spark.client.grpc.v2 import definition_pb2 as pb
from rmq_spark.client.grpc.v2 import service_pb2 as svc
from rmq_spark.client.model import MessageQueue
from rmq_spark.compiled import MalformedError, v2_queue_offset
from rmq_spark.source.arrow_decoder import ArrowBatchDecoder
from rmq_spark.source.schema import ARROW_SCHEMA, COLUMNS
from tests.support.batches import assert_same
from tests.support.reference_codec import MessageBatcher, decode_frames

MQ = MessageQueue("T", "broker-a", 2)
FUZZ = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def frame(
    offset: int,
    *,
    tag: str | None = "TagA",
    topic: str = "T",
    body: bytes = b"body",
    props=None,
    keys=("k1", "k2"),
    attempt: int | None = None,
    born_ms: int = 1_700_000_000_123,
    store=True,
    encoding=pb.IDENTITY,
    born_seconds: int | None = None,
) -> bytes:
    sp = pb.SystemProperties(
        queue_id=2,
        queue_offset=offset,
        message_id=f"ID{offset}",
        keys=list(keys),
        born_host="1.2.3.4:5",
        store_host="[::1]:10911",
        body_encoding=encoding,
    )
    if tag is not None:
        sp.tag = tag
    if attempt is not None:
        sp.delivery_attempt = attempt
    sp.born_timestamp.FromMilliseconds(born_ms)
    if born_seconds is not None:  # past what FromMilliseconds accepts
        sp.born_timestamp.seconds = born_seconds
    if store:
        sp.store_timestamp.FromMilliseconds(born_ms + 5)
    message = pb.Message(
        topic=pb.Resource(name=topic),
        body=body,
        system_properties=sp,
        user_properties=props if props is not None else {"a": "1"},
    )
    return svc.PullMessageResponse(message=message).SerializeToString()


def native(frames, *, tags=None, low=-(1 << 63), high=(1 << 63) - 1, columns=COLUMNS) -> pa.RecordBatch:
    decoder = ArrowBatchDecoder(MQ.broker_name, tags=tags, columns=columns, queue=MQ)
    decoder.add_frames(tuple(frames), low, high)
    return decoder.flush()


def reference(frames, *, tags=None, low=-(1 << 63), high=(1 << 63) - 1) -> pa.RecordBatch:
    batcher = MessageBatcher()
    batcher.add(decode_frames(frames, MQ, tags), low, high)
    return batcher.flush()


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@FUZZ
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "tag": st.one_of(st.none(), st.sampled_from(["TagA", "TagB", "", "é"])),
                "topic": st.sampled_from(["T", "", "тема"]),
                "body": st.binary(max_size=40),
                "props": st.dictionaries(text, text, max_size=4) | st.just({FLAG_PROPERTY: "-12", "x": "y"}),
                "keys": st.lists(st.sampled_from(["k", "", "κ 2"]), max_size=3),
                "attempt": st.one_of(st.none(), st.integers(-3, 5)),
                "born_ms": st.integers(-(10**12), 10**13),
                "store": st.booleans(),
                "gzipped": st.booleans(),
            }
        ),
        max_size=12,
    ),
    st.one_of(st.none(), st.just(frozenset({"TagA", "é"}))),
    st.integers(0, 12),
    st.integers(0, 12),
)
def test_native_rows_equal_the_reference(messages, tags, low, high):
    frames = [
        frame(i, **{k: v for k, v in m.items() if k != "gzipped"}, **({"encoding": pb.GZIP} if m["gzipped"] else {}))
        for i, m in enumerate(messages)
    ]
    frames = [
        f
        if not m["gzipped"]
        else frame(
            i, **{**{k: v for k, v in m.items() if k != "gzipped"}, "body": gzip.compress(m["body"])}, encoding=pb.GZIP
        )
        for i, (f, m) in enumerate(zip(frames, messages))
    ]
    assert_same(
        native(frames, tags=tags, low=low, high=high),
        reference(frames, tags=tags, low=low, high=high),
        unordered_maps=True,
    )


@FUZZ
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "tag": st.one_of(st.none(), st.just("TagA")),
                "topic": st.sampled_from(["T", ""]),
                "body": st.binary(max_size=20),
                "gzipped": st.booleans(),
                "attempt": st.one_of(st.none(), st.integers(-3, 5)),
            }
        ),
        max_size=6,
    ),
    st.one_of(st.none(), st.just(frozenset({"TagA"}))),
    st.integers(0, 6),
)
def test_read_range_messages_are_the_oracles(messages, tags, low):
    """The Messages ``read_range`` builds from gathered frames are the oracle's."""
    frames = [
        frame(
            i,
            tag=m["tag"],
            topic=m["topic"],
            attempt=m["attempt"],
            body=gzip.compress(m["body"]) if m["gzipped"] else m["body"],
            encoding=pb.GZIP if m["gzipped"] else pb.IDENTITY,
        )
        for i, m in enumerate(messages)
    ]
    collector = MessageCollector(MQ, tags=tags)
    collector.add_frames(frames, low, 100)
    assert collector.take() == [m for m in decode_frames(frames, MQ, tags) if m.queue_offset >= low]


@pytest.mark.parametrize("columns", [("queueOffset", "body"), ("properties", "msgId", "flag"), ("bornHost", "keys")])
def test_a_projection_builds_the_columns_asked_for(columns):
    frames = [frame(i, props={"a": "1", FLAG_PROPERTY: "9"}) for i in range(5)]
    assert_same(native(frames, columns=columns), reference(frames).select(list(columns)), unordered_maps=True)


def test_gzip_bodies_and_odd_flags_are_read_as_the_reference_reads_them():
    frames = [frame(0), frame(1, body=gzip.compress(b"x" * 100), encoding=pb.GZIP), frame(2)]
    decoder = ArrowBatchDecoder(MQ.broker_name, queue=MQ)
    decoder.add_frames((frame(7, tag="TagB"),), 0, 100)
    decoder.add_frames(tuple(frames), 0, 100)
    decoder.add_frames((frame(3, props={FLAG_PROPERTY: "+4"}),), 0, 100)  # Python's int() reads "+4"
    got = decoder.flush()
    assert got.column("queueOffset").to_pylist() == [7, 0, 1, 2, 3]
    assert got.column("body")[2].as_py() == b"x" * 100 and got.column("flag")[4].as_py() == 4
    assert_same(
        got, reference([frame(7, tag="TagB"), *frames, frame(3, props={FLAG_PROPERTY: "+4"})]), unordered_maps=True
    )


def test_bad_frames_are_protocol_errors_and_leave_nothing():
    good = frame(0)
    decoder = ArrowBatchDecoder(MQ.broker_name, queue=MQ)
    for bad in (good[:-1], good[:5], svc.PullMessageResponse(next_offset=3).SerializeToString()):
        with pytest.raises(ProtocolError):
            decoder.add_frames((good, bad), 0, 10)
        with pytest.raises(ProtocolError):
            decode_frames([good, bad], MQ)
    invalid_utf8 = good.replace(b"ID0", b"I\xff0")
    with pytest.raises(ProtocolError):
        decoder.add_frames((invalid_utf8,), 0, 10)
    with pytest.raises(ProtocolError):
        decode_frames([invalid_utf8], MQ)
    far = frame(1, born_seconds=1 << 60)
    with pytest.raises(ProtocolError, match="timestamp"):
        decoder.add_frames((far,), 0, 10)
    with pytest.raises(ProtocolError, match="timestamp"):
        reference([far])
    assert decoder.rows == 0 and decoder.flush().num_rows == 0
    empty_gzip = frame(3, body=b"", encoding=pb.GZIP)
    with pytest.raises(ProtocolError):
        decoder.add_frames((good, empty_gzip), 0, 10)
    with pytest.raises(ProtocolError):
        reference([good, empty_gzip])
    assert v2_queue_offset(frame(2**40)) == 2**40
    with pytest.raises(MalformedError):
        v2_queue_offset(good[:-1])
    assert ARROW_SCHEMA.names == list(COLUMNS)


def test_a_timestamp_out_of_range_counts_only_in_a_row_kept():
    """Only the rows kept are converted to microseconds, so a message outside the window or dropped by the tag
    re-check reads, as in the reference; a kept one is an error even when a later frame is fine."""
    far = frame(1, born_seconds=1 << 60, tag="TagB")
    frames = [frame(0), far, frame(2)]
    for kw in ({"low": 2}, {"high": 1}, {"tags": frozenset({"TagA"})}):
        assert_same(native(frames, **kw), reference(frames, **kw), unordered_maps=True)
        assert native(frames, **kw).num_rows == (2 if "tags" in kw else 1)
    with pytest.raises(ProtocolError, match="timestamp"):
        native(frames, low=1)
    with pytest.raises(ProtocolError, match="timestamp"):
        reference(frames, low=1)
