"""Robustness: whatever bytes arrive, the decoders return a value or raise ProtocolError, never anything else."""

from __future__ import annotations

import json
import struct

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.model import OutgoingMessage
from rmq_spark.client.remoting.frame import (
    JSON,
    ROCKETMQ,
    RemotingCommand,
    decode_frame,
    encode_command,
    parse_loose_json,
)
from rmq_spark.client.remoting.send_codec import encode_batch
from tests.support.reference_codec import decode_messages
from tests.support.stored_messages import INNER_BATCH, MAGIC_V2, NEED_UNWRAP, encode_stored_message, mutated_prefix

FUZZ = settings(max_examples=300, deadline=500, database=None, suppress_health_check=[HealthCheck.too_slow])


def _frame_or_protocol_error(buf) -> RemotingCommand | None:
    try:
        return decode_frame(buf)
    except ProtocolError:
        return None


def _messages_or_protocol_error(buf):
    try:
        return decode_messages(buf, "b", tags=frozenset({"A"}))
    except ProtocolError:
        return None


def _json_or_protocol_error(text):
    try:
        return parse_loose_json(text)
    except ProtocolError:
        return None


# ---------------------------------------------------------------------------------------------- frames

ext_text = st.text(max_size=20)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-32768, 32767),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    remark=st.none() | st.text(max_size=30),
    ext_fields=st.dictionaries(ext_text, ext_text, max_size=5),
    body=st.binary(max_size=64),
    language=st.sampled_from(["JAVA", "PYTHON", "GO", "RUST"]),
    version=st.integers(0, 32767),
    serialize_type=st.sampled_from([JSON, ROCKETMQ]),
)


def _encodable(cmd: RemotingCommand) -> bool:
    try:
        encode_command(cmd)
        return True
    except UnicodeEncodeError:  # lone surrogates from st.text
        return False


@FUZZ
@given(commands)
def test_frame_round_trip(cmd):
    if not _encodable(cmd):
        return
    back = decode_frame(encode_command(cmd)[4:])
    assert (back.code, back.opaque, back.flag, back.body, back.language, back.version, back.serialize_type) == (
        cmd.code,
        cmd.opaque,
        cmd.flag,
        cmd.body,
        cmd.language,
        cmd.version,
        cmd.serialize_type,
    )
    assert back.ext_fields == cmd.ext_fields
    assert back.remark == (cmd.remark or None if cmd.serialize_type == ROCKETMQ else cmd.remark)


@FUZZ
@given(st.binary(max_size=300))
def test_decode_frame_arbitrary_bytes(data):
    _frame_or_protocol_error(data)
    for stype in (0, 1, 7):  # a plausible header length so the header decoders see the bytes
        _frame_or_protocol_error(struct.pack(">i", (stype << 24) | len(data)) + data)


@FUZZ
@given(commands, st.data())
def test_decode_frame_mutated(cmd, data):
    if not _encodable(cmd):
        return
    frame = bytearray(encode_command(cmd)[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    _frame_or_protocol_error(bytes(frame))
    _frame_or_protocol_error(memoryview(frame))


def test_decode_frame_every_prefix():
    for stype in (JSON, ROCKETMQ):
        cmd = RemotingCommand(
            code=0, opaque=9, flag=1, remark="r", ext_fields={"a": "1", "bb": "22"}, body=b"xyz", serialize_type=stype
        )
        frame = encode_command(cmd)[4:]
        hlen = struct.unpack(">i", frame[:4])[0] & 0xFFFFFF
        for cut in range(len(frame) + 1):
            got = _frame_or_protocol_error(frame[:cut])
            if cut >= 4 + hlen:  # header complete: decodes with a shorter body
                assert got is not None and got.body == b"xyz"[: cut - 4 - hlen]
            else:
                assert got is None


# ---------------------------------------------------------------------------------------------- loose JSON

json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
json_values = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.integers(-5, 10**6) | st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _fastjson(v) -> str:
    """Render like fastjson without quoting integer map keys."""
    if isinstance(v, dict):
        return (
            "{"
            + ",".join((str(k) if isinstance(k, int) else json.dumps(k)) + ":" + _fastjson(x) for k, x in v.items())
            + "}"
        )
    if isinstance(v, list):
        return "[" + ",".join(_fastjson(x) for x in v) + "]"
    return json.dumps(v)


def _stringify_keys(v):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            assume(str(k) not in out)  # 1 and "1" collide once stringified
            out[str(k)] = _stringify_keys(x)
        return out
    if isinstance(v, list):
        return [_stringify_keys(x) for x in v]
    return v


@FUZZ
@given(json_values)
def test_parse_loose_json_matches_standard(value):
    text = _fastjson(value)
    expected = _stringify_keys(value)
    assert parse_loose_json(text) == expected


@FUZZ
@given(st.text(max_size=200))
def test_parse_loose_json_arbitrary_text(text):
    _json_or_protocol_error(text)


@FUZZ
@given(
    st.lists(
        st.sampled_from(["{", "}", "[", "]", ":", ",", '"', "\\", "0", "-1", "a", " ", "true", '"k"']), max_size=40
    )
)
def test_parse_loose_json_json_like_tokens(tokens):
    _json_or_protocol_error("".join(tokens))


# ---------------------------------------------------------------------------------------------- stored messages


def _sample_block() -> bytes:
    inner = encode_batch(
        [OutgoingMessage(b"i1", tags="A", properties={"UNIQ_KEY": "X1"}), OutgoingMessage(b"i2", tags="B")]
    )
    return b"".join(
        [
            encode_stored_message(
                body=b"plain", properties={"TAGS": "A", "KEYS": "k1 k2", "UNIQ_KEY": "U0"}, queue_offset=1
            ),
            encode_stored_message(
                body=b"z" * 300, compression="zlib", born_host=("::1", 5), queue_offset=2, properties={"TAGS": "A"}
            ),
            encode_stored_message(
                body=b"l" * 300, compression="lz4", store_host=("2001:db8::2", 10911), magic=MAGIC_V2, queue_offset=3
            ),
            encode_stored_message(body=b"s" * 300, compression="zstd", queue_offset=4, properties={"TAGS": "B"}),
            encode_stored_message(body=inner, sys_flag=INNER_BATCH | NEED_UNWRAP, queue_offset=5),
        ]
    )


SAMPLE = _sample_block()


def _boundaries(block: bytes) -> list[int]:
    out, pos = [0], 0
    while pos < len(block):
        pos += struct.unpack_from(">i", block, pos)[0]
        out.append(pos)
    return out


def test_decode_messages_every_prefix():
    bounds = _boundaries(SAMPLE)
    full = decode_messages(SAMPLE, "b")
    assert [m.queue_offset for m in full] == [1, 2, 3, 4, 5, 6]
    for cut in range(len(SAMPLE) + 1):
        try:
            got = decode_messages(SAMPLE[:cut], "b")
        except ProtocolError:
            assert cut not in bounds, cut
        else:
            assert cut in bounds, cut
            assert got == full[: len(got)]


def test_decode_messages_every_single_byte_corruption_terminates():
    block = SAMPLE
    for i in range(len(block)):
        for value in (0x00, 0xFF, block[i] ^ 0x80):
            mutated = block[:i] + bytes([value]) + block[i + 1 :]
            _messages_or_protocol_error(mutated)


@FUZZ
@given(st.binary(max_size=400))
def test_decode_messages_arbitrary_bytes(data):
    _messages_or_protocol_error(data)


@FUZZ
@given(st.data())
def test_decode_messages_mutated_block(data):
    block = mutated_prefix(data, SAMPLE, min_mutations=1)
    _messages_or_protocol_error(bytes(block))
    _messages_or_protocol_error(memoryview(block))


@FUZZ
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8).filter(lambda s: "\x01" not in s and "\x02" not in s),
        st.text(min_size=1, max_size=12).filter(lambda s: "\x02" not in s),
        max_size=6,
    ),
    st.binary(max_size=64),
    st.text(min_size=1, max_size=200),
    st.integers(0, 2**62),
)
def test_stored_message_round_trip(props, body, topic, offset):
    try:
        topic_len = len(topic.encode("utf-8"))
        rec = encode_stored_message(
            topic=topic,
            body=body,
            properties=props,
            queue_offset=offset,
            magic=MAGIC_V2 if topic_len > 127 else -626843481,
        )
    except UnicodeEncodeError:
        return
    [m] = decode_messages(rec, "b")
    assert (m.topic, m.body, m.properties, m.queue_offset) == (topic, body, props, offset)


@FUZZ
@given(st.sampled_from(["zlib", "lz4", "zstd"]), st.binary(min_size=1, max_size=4000), st.data())
def test_compressed_bodies_arbitrary_or_mutated_stay_bounded(kind, body, data):
    """A compressed body that is garbage, mutated, or expands past the limit: a value within the limit, or a
    ProtocolError (MessageTooLargeError is one), whatever the bytes."""
    block = bytearray(encode_stored_message(body=body, compression=kind))
    for _ in range(data.draw(st.integers(0, 4))):  # a few bytes past the fixed header changed
        block[data.draw(st.integers(40, len(block) - 1))] = data.draw(st.integers(0, 255))
    try:
        out = decode_messages(bytes(block), "b", max_body=2048)
    except ProtocolError:
        return
    assert all(len(m.body) <= 2048 for m in out)
