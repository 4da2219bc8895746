"""Bounded decompression: every codec stops at the limit (decompression bombs), round-trips what fits, and reports
truncated or corrupt input as ProtocolError; the message decoders name the message and the option."""

from __future__ import annotations

import gzip
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq_spark.client.errors import MessageTooLargeError, ProtocolError
from rmq_spark.client.grpc.v2 import definition_pb2 as pb
from rmq_spark.client.model import MessageQueue
from rmq_spark.source.arrow_decoder import decode_to_arrow
from tests.support import reference_compression as compression
from tests.support.reference_codec import decode_messages, from_v2
from tests.support.stored_messages import compress, encode_stored_message

CODECS = {"zlib": compression.ZLIB, "lz4": compression.LZ4, "zstd": compression.ZSTD}
BOMB = b"\0" * (64 << 20)  # compresses to a few KiB with every codec


def _packed(codec: str, data: bytes) -> bytes:
    return gzip.compress(data) if codec == compression.GZIP else compress(codec, data)


@pytest.fixture(scope="module")
def bombs():
    return {c: _packed(c, BOMB) for c in (*CODECS.values(), compression.GZIP)}


@pytest.mark.parametrize("codec", [*CODECS.values(), compression.GZIP])
def test_a_bomb_stops_at_the_limit_with_bounded_memory(bombs, codec):
    bomb = bombs[codec]
    assert len(bomb) < 300_000  # a small body ...
    tracemalloc.start()
    try:
        with pytest.raises(MessageTooLargeError, match=f"{codec}-compressed message body expands past 1048576 bytes"):
            compression.decompress(codec, bomb, 1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"decompressing {codec} took {peak} bytes"  # ... never expanded to its 64 MiB


@given(st.binary(max_size=3000), st.sampled_from([*CODECS.values(), compression.GZIP]), st.integers(0, 4000))
@settings(max_examples=200, deadline=None)
def test_what_fits_round_trips_and_the_limit_is_exact(data, codec, limit):
    packed = _packed(codec, data)
    if len(data) <= limit:
        assert compression.decompress(codec, packed, limit) == data
    else:
        with pytest.raises(MessageTooLargeError):
            compression.decompress(codec, packed, limit)


@pytest.mark.parametrize("codec", [*CODECS.values(), compression.GZIP])
def test_truncated_or_corrupt_bodies_are_protocol_errors(codec):
    packed = _packed(codec, bytes(range(256)) * 40)
    for broken in (packed[:-7], packed[: len(packed) // 2], b"\x01\x02garbage" + packed[10:]):
        with pytest.raises(ProtocolError):
            compression.decompress(codec, broken, 1 << 20)


def test_concatenated_frames_count_together_against_the_limit():
    for codec in (compression.LZ4, compression.ZSTD):
        two = _packed(codec, b"a" * 600) + _packed(codec, b"b" * 600)
        assert compression.decompress(codec, two, 1200) == b"a" * 600 + b"b" * 600
        with pytest.raises(MessageTooLargeError):
            compression.decompress(codec, two, 1199)


@pytest.mark.parametrize("kind", ["zlib", "lz4", "zstd"])
def test_the_decoders_name_the_message_and_the_option(kind):
    block = encode_stored_message(topic="T", queue_id=3, queue_offset=41, body=b"\0" * 5000, compression=kind)
    for decode in (
        lambda: decode_messages(block, "broker-a", max_body=4096),
        lambda: decode_to_arrow(block, "broker-a", max_body=4096),
    ):
        with pytest.raises(
            MessageTooLargeError,
            match=r"T:broker-a/3 offset 41: the \w+-compressed message body "
            r"expands past 4096 bytes.*option maxMessageBytes",
        ) as e:
            decode()
        assert e.value.limit == 4096
    assert decode_messages(block, "broker-a", max_body=5000)[0].body == b"\0" * 5000


def test_a_grpc_gzip_body_is_bounded_too():
    m = pb.Message(
        body=gzip.compress(b"\0" * 5000),
        system_properties=pb.SystemProperties(queue_offset=9, body_encoding=pb.GZIP, message_id="id"),
    )
    with pytest.raises(
        MessageTooLargeError,
        match=r"T:broker-a/0 offset 9: the gzip-compressed message body expands "
        "past 4096 bytes.*maxMessageBytes",
    ):
        from_v2(m, MessageQueue("T", "broker-a", 0), 4096)
    assert from_v2(m, MessageQueue("T", "broker-a", 0), 5000).body == b"\0" * 5000
