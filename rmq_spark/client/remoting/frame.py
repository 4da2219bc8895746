"""The RocketMQ remoting frame: a command header (JSON or RocketMQ binary) plus an opaque body.

Wire layout of one frame (all integers big-endian)::

    int32  total length (everything after this field)
    int32  serialize type << 24 | header length (low 24 bits)
    bytes  header (JSON object, or the binary layout of RocketMQSerializable)
    bytes  body (the rest)

``encode_command`` writes the whole frame; ``decode_frame`` reads a frame without its leading length
(the transport has consumed it). Decoding never raises anything but ``ProtocolError`` on bad input.
"""
from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field

from rmq_spark.client.errors import ProtocolError

# SerializeType codes (the high byte of the second frame int).
JSON = 0
ROCKETMQ = 1

# MQVersion.Version.V5_3_0.ordinal(). The name server answers GET_ROUTEINFO_BY_TOPIC with standard JSON
# (quoted map keys) to any request whose version is >= V4_9_4 (ordinal 401), see ClientRequestProcessor.
CLIENT_VERSION = 473

# LanguageCode: name <-> byte code of the binary header.
LANGUAGE_CODES: dict[str, int] = {
    "JAVA": 0, "CPP": 1, "DOTNET": 2, "PYTHON": 3, "DELPHI": 4, "ERLANG": 5, "RUBY": 6, "OTHER": 7,
    "HTTP": 8, "GO": 9, "PHP": 10, "OMS": 11, "RUST": 12, "NODE_JS": 13,
}
_LANGUAGE_NAMES: dict[int, str] = {v: k for k, v in LANGUAGE_CODES.items()}
_SERIALIZE_NAMES = {JSON: "JSON", ROCKETMQ: "ROCKETMQ"}

_FLAG_RESPONSE = 0x1  # bit RPC_TYPE
_FLAG_ONEWAY = 0x2  # bit RPC_ONEWAY

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_MAX_HEADER_LENGTH = 0xFFFFFF

_FRAME_PREFIX = struct.Struct(">ii")  # total length, serialize type | header length
_HEADER_INT = struct.Struct(">i")
# Binary header fixed part: code short, language byte, version short, opaque int, flag int.
_BIN_FIXED = struct.Struct(">hbhii")
_BIN_FIXED_ENC = struct.Struct(">HBHII")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


@dataclass
class RemotingCommand:
    """One request or response. ``ext_fields`` carries the custom header as string pairs."""

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: str = "PYTHON"
    version: int = CLIENT_VERSION
    serialize_type: int = JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & _FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & _FLAG_ONEWAY)


# ---------------------------------------------------------------------------------------------- encoding

def _json_header(cmd: RemotingCommand) -> bytes:
    obj: dict[str, object] = {
        "code": cmd.code,
        "language": cmd.language,
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
    }
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    if cmd.ext_fields:
        obj["extFields"] = {str(k): str(v) for k, v in cmd.ext_fields.items() if v is not None}
    obj["serializeTypeCurrentRPC"] = "JSON"
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _binary_header(cmd: RemotingCommand) -> bytes:
    parts = [_BIN_FIXED_ENC.pack(cmd.code & 0xFFFF, LANGUAGE_CODES.get(cmd.language, LANGUAGE_CODES["OTHER"]),
                                 cmd.version & 0xFFFF, cmd.opaque & 0xFFFFFFFF, cmd.flag & 0xFFFFFFFF)]
    if cmd.remark:
        remark = cmd.remark.encode("utf-8")
        parts.append(_U32.pack(len(remark)))
        parts.append(remark)
    else:
        parts.append(b"\0\0\0\0")
    entries = []
    for k, v in cmd.ext_fields.items():
        if k is None or v is None:
            continue
        kb = str(k).encode("utf-8")
        vb = str(v).encode("utf-8")
        if len(kb) > 0x7FFF:
            raise ProtocolError(f"ext field name of {len(kb)} bytes does not fit the binary header")
        entries.append(_U16.pack(len(kb)))
        entries.append(kb)
        entries.append(_U32.pack(len(vb)))
        entries.append(vb)
    ext = b"".join(entries)
    parts.append(_U32.pack(len(ext)))
    parts.append(ext)
    return b"".join(parts)


def encode_command(cmd: RemotingCommand) -> bytes:
    """The whole frame of ``cmd``, leading total length included, with the header in ``cmd.serialize_type``."""
    if cmd.serialize_type == JSON:
        header = _json_header(cmd)
    elif cmd.serialize_type == ROCKETMQ:
        header = _binary_header(cmd)
    else:
        raise ProtocolError(f"cannot encode serialize type {cmd.serialize_type} (0 JSON or 1 ROCKETMQ)")
    if len(header) > _MAX_HEADER_LENGTH:
        raise ProtocolError(f"header of {len(header)} bytes exceeds the 24-bit header length")
    body = cmd.body or b""
    prefix = _FRAME_PREFIX.pack(4 + len(header) + len(body), (cmd.serialize_type << 24) | len(header))
    return b"".join((prefix, header, body))


# ---------------------------------------------------------------------------------------------- decoding

def _int_field(obj: dict, name: str, default: int, bits: int = 32) -> int:
    value = obj.get(name, default)
    if value is None:
        return default
    if type(value) is not int:
        raise ProtocolError(f"JSON header field {name!r} is {type(value).__name__}, not an integer")
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= value <= hi:
        raise ProtocolError(f"JSON header field {name!r} = {value} is outside the {bits}-bit range")
    return value


def _scalar_str(value: object) -> str:
    if type(value) is str:
        return value
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) in (int, float):
        return str(value)
    raise ProtocolError(f"JSON header ext field value is {type(value).__name__}, not a string")


def _decode_json_header(header: bytes | memoryview, body: bytes) -> RemotingCommand:
    try:
        obj = json.loads(str(header, "utf-8"))
    except UnicodeDecodeError as e:
        raise ProtocolError(f"JSON header is not valid UTF-8: {e}") from None
    except (ValueError, RecursionError) as e:
        raise ProtocolError(f"JSON header is not valid JSON: {e}") from None
    if type(obj) is not dict:
        raise ProtocolError(f"JSON header is a {type(obj).__name__}, not an object")
    language = obj.get("language", "JAVA")
    if language is None:
        language = "OTHER"
    if type(language) is not str:
        raise ProtocolError(f"JSON header field 'language' is {type(language).__name__}, not a string")
    remark = obj.get("remark")
    if remark is not None and type(remark) is not str:
        raise ProtocolError(f"JSON header field 'remark' is {type(remark).__name__}, not a string")
    raw_ext = obj.get("extFields")
    ext: dict[str, str] = {}
    if raw_ext is not None:
        if type(raw_ext) is not dict:
            raise ProtocolError(f"JSON header field 'extFields' is {type(raw_ext).__name__}, not an object")
        for k, v in raw_ext.items():
            if v is not None:
                ext[k] = _scalar_str(v)
    return RemotingCommand(
        code=_int_field(obj, "code", 0),
        opaque=_int_field(obj, "opaque", 0),
        flag=_int_field(obj, "flag", 0),
        remark=remark,
        ext_fields=ext,
        body=body,
        language=language,
        version=_int_field(obj, "version", 0),
        serialize_type=JSON,
    )


def _decode_binary_header(buf: bytes | memoryview, start: int, end: int, body: bytes) -> RemotingCommand:
    if end - start < _BIN_FIXED.size + 8:
        raise ProtocolError(f"binary header of {end - start} bytes is shorter than its fixed part "
                            f"({_BIN_FIXED.size + 8} bytes)")
    code, lang, version, opaque, flag = _BIN_FIXED.unpack_from(buf, start)
    pos = start + _BIN_FIXED.size
    try:
        (rlen,) = _I32.unpack_from(buf, pos)
        pos += 4
        if rlen < 0 or rlen > end - pos:
            raise ProtocolError(f"binary header remark length {rlen} exceeds the {end - pos} header bytes left")
        remark = str(buf[pos:pos + rlen], "utf-8") if rlen else None
        pos += rlen
        if end - pos < 4:
            raise ProtocolError("binary header truncated before the ext fields length")
        (elen,) = _I32.unpack_from(buf, pos)
        pos += 4
        if elen < 0 or elen > end - pos:
            raise ProtocolError(f"binary header ext fields length {elen} exceeds the {end - pos} header bytes left")
        ext_end = pos + elen
        ext: dict[str, str] = {}
        while pos < ext_end:
            if ext_end - pos < 2:
                raise ProtocolError("binary header ext field name length truncated")
            (klen,) = _U16.unpack_from(buf, pos)
            pos += 2
            if klen > 0x7FFF or klen > ext_end - pos:
                raise ProtocolError(f"binary header ext field name length {klen} exceeds the ext fields")
            key = str(buf[pos:pos + klen], "utf-8")
            pos += klen
            if ext_end - pos < 4:
                raise ProtocolError(f"binary header ext field {key!r} value length truncated")
            (vlen,) = _I32.unpack_from(buf, pos)
            pos += 4
            if vlen < 0 or vlen > ext_end - pos:
                raise ProtocolError(f"binary header ext field {key!r} value length {vlen} exceeds the ext fields")
            ext[key] = str(buf[pos:pos + vlen], "utf-8")
            pos += vlen
    except UnicodeDecodeError as e:
        raise ProtocolError(f"binary header holds invalid UTF-8: {e}") from None
    if pos != end:
        raise ProtocolError(f"binary header has {end - pos} trailing bytes after the ext fields")
    return RemotingCommand(code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, body=body,
                           language=_LANGUAGE_NAMES.get(lang, "OTHER"), version=version,
                           serialize_type=ROCKETMQ)


def decode_frame(buf: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode one frame given WITHOUT its leading total-length int (header-type int, header, body)."""
    n = len(buf)
    if n < 4:
        raise ProtocolError(f"frame of {n} bytes is too short for its header length field")
    (mark,) = _HEADER_INT.unpack_from(buf, 0)
    stype = (mark >> 24) & 0xFF
    hlen = mark & 0xFFFFFF
    if hlen > n - 4:
        raise ProtocolError(f"header length {hlen} exceeds the {n - 4} bytes after the header length field")
    body = bytes(buf[4 + hlen:])
    if stype == JSON:
        return _decode_json_header(buf[4:4 + hlen], body)
    if stype == ROCKETMQ:
        return _decode_binary_header(buf, 4, 4 + hlen, body)
    raise ProtocolError(f"unknown serialize type {stype} (0 JSON or 1 ROCKETMQ)")


# ---------------------------------------------------------------------------------------------- loose JSON

# A JSON string literal (skipped untouched; an unterminated one runs to the end, which keeps the scan linear)
# or a bare integer object key directly after '{' or ','.
_LOOSE_KEY = re.compile(r'"(?:[^"\\]|\\.)*"?|(?<=[{,])(\s*)(-?\d+)(\s*):', re.S)


def _quote_key(m: re.Match) -> str:
    if m.group(2) is None:
        return m.group(0)
    return f'{m.group(1)}"{m.group(2)}"{m.group(3)}:'


def parse_loose_json(text: str | bytes | bytearray | memoryview) -> object:
    """Parse JSON that may carry fastjson's unquoted integer map keys (``{0:"a"}``); such keys become strings."""
    if not isinstance(text, str):
        try:
            text = str(text, "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"JSON is not valid UTF-8: {e}") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ProtocolError("JSON is nested too deeply") from None
    except ValueError as first:
        error = first
    try:
        fixed = _LOOSE_KEY.sub(_quote_key, text)
        if fixed != text:
            return json.loads(fixed)
    except RecursionError:
        raise ProtocolError("JSON is nested too deeply") from None
    except ValueError as e:
        error = e
    raise ProtocolError(f"not valid JSON: {error}") from None
