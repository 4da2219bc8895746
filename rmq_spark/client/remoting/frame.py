"""The RocketMQ remoting frame: a command header (JSON or RocketMQ binary) plus an opaque body.

Wire layout of one frame (all integers big-endian)::

    int32  total length (everything after this field)
    int32  serialize type << 24 | header length (low 24 bits)
    bytes  header (JSON object, or the binary layout of RocketMQSerializable)
    bytes  body (the rest)

``encode_command`` writes the whole frame; ``decode_frame`` reads a frame without its leading length
(the transport has consumed it). Decoding never raises anything but ``ProtocolError`` on bad input. The codec is
the compiled core's (``native/src/frame.rs``): the pipes of the pull path use the same one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from rmq_spark.client.core_errors import package_error
from rmq_spark.client.errors import ProtocolError
from rmq_spark.compiled import CoreError, Frame, RequestTemplate, encode_frame
from rmq_spark.compiled import decode_frame as _decode_frame

# SerializeType codes (the high byte of the second frame int).
JSON = 0
ROCKETMQ = 1

# MQVersion.Version.V5_3_0.ordinal(). The name server answers GET_ROUTEINFO_BY_TOPIC with standard JSON
# (quoted map keys) to any request whose version is >= V4_9_4 (ordinal 401), see ClientRequestProcessor.
CLIENT_VERSION = 473

_FLAG_RESPONSE = 0x1  # bit RPC_TYPE
_FLAG_ONEWAY = 0x2  # bit RPC_ONEWAY


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


# ---------------------------------------------------------------------------------------------- the codec


def encode_command(cmd: RemotingCommand) -> bytes:
    """The whole frame of ``cmd``, leading total length included, with the header in ``cmd.serialize_type``."""
    body = cmd.body if type(cmd.body) is bytes else bytes(cmd.body or b"")
    try:
        return encode_frame(
            cmd.code,
            cmd.language,
            cmd.version,
            cmd.opaque,
            cmd.flag,
            cmd.remark,
            cmd.ext_fields,
            body,
            cmd.serialize_type,
        )
    except CoreError as e:
        raise package_error(e) from None
    except OverflowError as e:  # a number beyond what the binding's integer arguments hold
        raise ProtocolError(str(e)) from None


def command_of(frame: Frame) -> RemotingCommand:
    """The command of a frame the compiled core decoded (``decode_frame``, or a pipe's answer)."""
    # positional, in the order of RemotingCommand's fields: keywords would cost a third of the call
    return RemotingCommand(
        frame.code,
        frame.opaque,
        frame.flag,
        frame.remark,
        frame.ext_fields,
        frame.body,
        frame.language,
        frame.version,
        frame.serialize_type,
    )


def request_template(cmd: RemotingCommand, vary: tuple[str, ...]) -> RequestTemplate:
    """Request ``cmd`` as a template whose integer fields ``vary`` each send sets (unsigned requests only: a
    signature covers every field)."""
    return RequestTemplate(cmd.code, cmd.language, cmd.version, cmd.ext_fields, list(vary), cmd.serialize_type)


def decode_frame(buf: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode one frame given WITHOUT its leading total-length int (header-type int, header, body)."""
    try:
        return command_of(_decode_frame(buf if type(buf) is bytes else bytes(buf)))
    except CoreError as e:
        raise package_error(e) from None


# ---------------------------------------------------------------------------------------------- loose JSON

# A JSON string literal (skipped untouched; an unterminated one runs to the end, which keeps the scan linear)
# or a bare integer object key directly after '{' or ','.
_LOOSE_KEY = re.compile(r'"(?:[^"\\]|\\.)*"?|(?<=[{,])(\s*)(-?\d+)(\s*):', re.S)


def _quote_key(m: re.Match) -> str:
    if m.group(2) is None:
        return m.group(0)
    return f'{m.group(1)}"{m.group(2)}"{m.group(3)}:'


def parse_loose_json(text: str | bytes | bytearray | memoryview) -> Any:
    """Parse JSON that may carry fastjson's unquoted integer map keys (``{0:"a"}``); such keys become strings.
    Any JSON value, as ``json.loads``: the callers check the shape they read."""
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
