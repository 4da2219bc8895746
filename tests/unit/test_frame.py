"""The remoting frame codec against hand-built frames of the documented layout (RemotingCommand.encode,
RocketMQSerializable) and round trips."""

from __future__ import annotations

import json
import struct

import pytest

from rmq_spark.client.errors import ProtocolError, RocketMQError
from rmq_spark.client.remoting.frame import (
    CLIENT_VERSION,
    JSON,
    ROCKETMQ,
    RemotingCommand,
    decode_frame,
    encode_command,
    parse_loose_json,
)

# A response with a JSON header, as a Java broker (fastjson) writes it.
JSON_HEADER = (
    b'{"code":0,"extFields":{"queueId":"3","nextBeginOffset":"100"},"flag":1,"language":"JAVA",'
    b'"opaque":42,"remark":"ok","serializeTypeCurrentRPC":"JSON","version":473}'
)
JSON_FRAME = (
    b"\x00\x00\x00\xaa"  # total length 170 = 4 (header-length int) + 162 (header) + 4 (body)
    b"\x00\x00\x00\xa2"  # serialize type 0 (JSON) << 24 | header length 162
    + JSON_HEADER
    + b"BODY"  # body: the rest of the frame
)

# The same kind of response with a RocketMQ binary header.
BINARY_FRAME = (
    b"\x00\x00\x00\x43"  # total length 67 = 4 + 61 (header) + 2 (body)
    b"\x01\x00\x00\x3d"  # serialize type 1 (ROCKETMQ) << 24 | header length 61
    b"\x00\x13"  # code short: 19 (PULL_NOT_FOUND)
    b"\x00"  # language byte: 0 = JAVA
    b"\x01\xd9"  # version short: 473
    b"\x00\x00\x00\x2a"  # opaque int: 42
    b"\x00\x00\x00\x01"  # flag int: 1 (response)
    b"\x00\x00\x00\x02OK"  # remark: int length 2, UTF-8 "OK"
    b"\x00\x00\x00\x26"  # ext fields: int length 38, then entries
    b"\x00\x07queueId"
    b"\x00\x00\x00\x013"  # short key length 7 "queueId", int value length 1 "3"
    b"\x00\x0fnextBeginOffset"
    b"\x00\x00\x00\x03100"  # key length 15, value length 3 "100"
    b"\x01\x02"  # body
)


def test_known_json_frame_decodes_every_field():
    assert len(JSON_HEADER) == 162 and len(JSON_FRAME) == 4 + 170
    cmd = decode_frame(JSON_FRAME[4:])
    assert cmd.code == 0
    assert cmd.language == "JAVA"
    assert cmd.version == 473
    assert cmd.opaque == 42
    assert cmd.flag == 1 and cmd.is_response and not cmd.is_oneway
    assert cmd.remark == "ok"
    assert cmd.ext_fields == {"queueId": "3", "nextBeginOffset": "100"}
    assert all(type(v) is str for v in cmd.ext_fields.values())
    assert cmd.body == b"BODY" and type(cmd.body) is bytes
    assert cmd.serialize_type == JSON


def test_known_binary_frame_decodes_every_field():
    assert len(BINARY_FRAME) == 4 + 0x43
    for buf in (BINARY_FRAME[4:], memoryview(bytearray(BINARY_FRAME))[4:]):
        cmd = decode_frame(buf)
        assert cmd.code == 19
        assert cmd.language == "JAVA"
        assert cmd.version == 473
        assert cmd.opaque == 42
        assert cmd.flag == 1 and cmd.is_response
        assert cmd.remark == "OK"
        assert cmd.ext_fields == {"queueId": "3", "nextBeginOffset": "100"}
        assert cmd.body == b"\x01\x02" and type(cmd.body) is bytes
        assert cmd.serialize_type == ROCKETMQ


def test_encode_binary_matches_documented_layout():
    cmd = RemotingCommand(
        code=19,
        opaque=42,
        flag=1,
        remark="OK",
        language="JAVA",
        version=473,
        ext_fields={"queueId": "3", "nextBeginOffset": "100"},
        body=b"\x01\x02",
        serialize_type=ROCKETMQ,
    )
    assert encode_command(cmd) == BINARY_FRAME


def test_encode_json_layout():
    cmd = RemotingCommand(code=105, opaque=7, ext_fields={"topic": "T"}, body=b"xyz")
    frame = encode_command(cmd)
    total, mark = struct.unpack(">ii", frame[:8])
    assert total == len(frame) - 4
    assert mark >> 24 == 0
    hlen = mark & 0xFFFFFF
    header = json.loads(frame[8 : 8 + hlen])
    assert header == {
        "code": 105,
        "language": "PYTHON",
        "version": CLIENT_VERSION,
        "opaque": 7,
        "flag": 0,
        "extFields": {"topic": "T"},
        "serializeTypeCurrentRPC": "JSON",
    }
    assert frame[8 + hlen :] == b"xyz"


def test_client_version_is_recent():
    # MQVersion.Version.V4_9_4.ordinal() == 401: from there the name server answers with standard JSON
    assert CLIENT_VERSION >= 401
    assert CLIENT_VERSION == 473  # V5_3_0


@pytest.mark.parametrize("stype", [JSON, ROCKETMQ])
@pytest.mark.parametrize("remark", [None, "", "ünïcode ✓"])
def test_round_trip(stype, remark):
    cmd = RemotingCommand(
        code=11,
        opaque=123456,
        flag=2,
        remark=remark,
        ext_fields={"topic": "Tøpic", "queueId": "0", "empty": "", "subExpression": "a || b"},
        body=bytes(range(256)) * 3,
        language="PYTHON",
        version=473,
        serialize_type=stype,
    )
    frame = encode_command(cmd)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    back = decode_frame(frame[4:])
    assert back.code == 11 and back.opaque == 123456 and back.flag == 2 and back.is_oneway
    assert back.remark == (remark or None) if stype == ROCKETMQ else back.remark == remark
    assert back.ext_fields == cmd.ext_fields
    assert back.body == cmd.body
    assert back.language == "PYTHON" and back.version == 473 and back.serialize_type == stype


def test_round_trip_negative_and_empty():
    for stype in (JSON, ROCKETMQ):
        cmd = RemotingCommand(code=-1, opaque=-5, flag=0, serialize_type=stype)
        back = decode_frame(encode_command(cmd)[4:])
        assert (back.code, back.opaque, back.body, back.ext_fields, back.remark) == (-1, -5, b"", {}, None)


def test_json_header_defaults_and_lenient_values():
    header = b'{"code":17,"extFields":{"n":5,"b":true,"z":null}}'
    cmd = decode_frame(struct.pack(">i", len(header)) + header)
    assert cmd.code == 17 and cmd.opaque == 0 and cmd.flag == 0 and cmd.remark is None
    assert cmd.ext_fields == {"n": "5", "b": "true"}


def test_parse_loose_json_integer_keys():
    old = '{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"b"}]}'
    assert parse_loose_json(old) == {
        "brokerDatas": [{"brokerAddrs": {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}, "brokerName": "b"}]
    }
    assert parse_loose_json('{ 0 : "a" , -1:{2:[]} }') == {"0": "a", "-1": {"2": []}}
    assert parse_loose_json(b'{"a":1}') == {"a": 1}


def test_parse_loose_json_keeps_quoted_text():
    text = '{"remark":"see {0:x} and ,1:y","m":{0:"{0:\\"q\\",2:"}}'
    assert parse_loose_json(text) == {"remark": "see {0:x} and ,1:y", "m": {"0": '{0:"q",2:'}}


@pytest.mark.parametrize("bad", ["", "{", '{0:"a"', "{a:1}", '{"a":}', "[1,,2]", '"\\', "\xff{0:", "[" * 100000])
def test_parse_loose_json_garbage(bad):
    with pytest.raises(ProtocolError):
        parse_loose_json(bad)


def test_parse_loose_json_invalid_utf8():
    with pytest.raises(ProtocolError):
        parse_loose_json(b'{"a":"\xff"}')


@pytest.mark.parametrize(
    "buf, what",
    [
        (b"", "too short"),
        (b"\x00\x00", "too short"),
        (b"\x00\x00\x00\x10{}", "header length"),
        (b"\x02\x00\x00\x02{}", "serialize type"),
        (b"\x00\x00\x00\x02[]", "not an object"),
        (b"\x00\x00\x00\x03{x}", "not valid JSON"),
        (b'\x00\x00\x00\x09{"code":"', "not valid JSON"),
        (b'\x00\x00\x00\x03"\xff"', "UTF-8"),
        (b'\x00\x00\x00\x0c{"code":"1"}', "'code'"),
        (b'\x00\x00\x00\x0c{"flag":1.5}', "'flag'"),
        (b'\x00\x00\x00\x10{"extFields":[]}', "extFields"),
        (b'\x00\x00\x00\x16{"extFields":{"a":[]}}', "ext field"),
        (b'\x00\x00\x00\x0e{"remark":123}', "remark"),
        (b'\x00\x00\x00\x16{"opaque":99999999999}', "range"),
        (b"\x01\x00\x00\x05\x00\x01\x00\x00\x00", "fixed part"),
    ],
)
def test_malformed_frames_raise_protocol_error(buf, what):
    with pytest.raises(ProtocolError) as info:
        decode_frame(buf)
    assert what in str(info.value)


def _binary(header: bytes) -> bytes:
    return struct.pack(">i", (1 << 24) | len(header)) + header


FIXED = b"\x00\x01\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00"  # code 1, JAVA, version 0, opaque 1, flag 0


@pytest.mark.parametrize(
    "header, what",
    [
        (FIXED + b"\x00\x00\x00\x09ab" + b"\x00\x00\x00\x00", "remark length"),
        (FIXED + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00", "remark length"),
        (FIXED + b"\x00\x00\x00\x02\xc3\x28" + b"\x00\x00\x00\x00", "UTF-8"),
        (FIXED + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x09\x00\x01", "ext fields length"),
        (FIXED + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01\x00", "name length truncated"),
        (FIXED + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x03\x00\x05a", "name length"),
        (FIXED + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x05\x00\x01a\x00\x00", "value length truncated"),
        (FIXED + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x07\x00\x01a\x00\x00\x00\x09", "value length"),
        (FIXED + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00" + b"junk", "trailing"),
        (FIXED + b"\x00\x00\x00\x00", "fixed part"),
    ],
)
def test_malformed_binary_headers(header, what):
    with pytest.raises(ProtocolError) as info:
        decode_frame(_binary(header))
    assert what in str(info.value)


def test_every_truncation_of_valid_frames_is_protocol_error_or_decodes():
    for frame in (JSON_FRAME, BINARY_FRAME):
        body = frame[4:]
        for cut in range(len(body)):
            try:
                decode_frame(body[:cut])
            except RocketMQError as e:
                assert isinstance(e, ProtocolError)
