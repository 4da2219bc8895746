"""The body of SEND_BATCH_MESSAGE and what a send needs besides: message properties as text, the producer's body
compression, the transaction constants, and the commit-log offset inside a send result's offset message id.

A SEND_BATCH_MESSAGE body is, per message (MessageDecoder.encodeMessages), big-endian::

    int32 totalSize | int32 magic 0 | int32 bodyCRC 0 | int32 flag | int32 bodyLength | body
    | int16 propertiesLength | properties (``key\\x01value\\x02`` ...)

Reading pulled records is the native core's (``native/src/records.rs``, ``columns.rs``).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import replace

from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.model import OutgoingMessage

# MessageSysFlag bits of a compressed body: the flag and the compression type (CompressionType value << 8).
COMPRESSED_FLAG = 0x1
COMPRESSION_ZLIB = 3
# MessageConst property names.
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
# MessageSysFlag transaction types (bits 2..3)
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# As the Java producer: bodies of compressMsgBodyOverHowmuch (4 KiB) or more are zlib-compressed at level 5 and
# flagged in sysFlag, so every RocketMQ consumer inflates them.
COMPRESS_FROM = 4096
ZLIB_LEVEL = 5
ZLIB_SYS_FLAG = COMPRESSED_FLAG | COMPRESSION_ZLIB << 8

_BATCH_RECORD = struct.Struct(">iiiii")
_I16 = struct.Struct(">h")
_BATCH_FIXED = _BATCH_RECORD.size + _I16.size


def encode_properties(props: dict[str, str]) -> str:
    """``key\\x01value\\x02`` for each pair (MessageDecoder.messageProperties2String); None values are skipped."""
    parts = []
    for k, v in props.items():
        if v is None:
            continue
        k = str(k)
        v = str(v)
        if NAME_VALUE_SEPARATOR in k or PROPERTY_SEPARATOR in k or PROPERTY_SEPARATOR in v:
            raise ProtocolError(f"property {k!r} contains a \\x01 or \\x02 separator character")
        parts.append(f"{k}\x01{v}\x02")
    return "".join(parts)


def commit_log_offset(offset_msg_id: str) -> int:
    """The commit-log offset inside an offset message id (its last 16 hex digits)."""
    if len(offset_msg_id) < 32:
        raise ValueError(f"{offset_msg_id!r} is not an offset message id")
    return int(offset_msg_id[-16:], 16)


def compressed_for_send(message: OutgoingMessage) -> tuple[OutgoingMessage, int]:
    """The message as sent and the sysFlag that marks it: a body of COMPRESS_FROM bytes or more zlib-compressed."""
    if len(message.body) < COMPRESS_FROM:
        return message, 0
    return replace(message, body=zlib.compress(message.body, ZLIB_LEVEL)), ZLIB_SYS_FLAG


def encode_batch(messages: Iterable[OutgoingMessage]) -> bytes:
    """The body of SEND_BATCH_MESSAGE (MessageDecoder.encodeMessages). Properties are sent as
    ``wire_properties()``; put a UNIQ_KEY in each (``with_unique_id``) as the Java producer does."""
    parts = []
    pack = _BATCH_RECORD.pack
    pack16 = _I16.pack
    for m in messages:
        body = bytes(m.body)
        props = encode_properties(m.wire_properties()).encode("utf-8")
        if len(props) > 0x7FFF:
            raise ProtocolError(f"properties of {len(props)} bytes exceed the 32767 a message can carry")
        total = _BATCH_FIXED + len(body) + len(props)
        try:
            parts.append(pack(total, 0, 0, m.flag, len(body)))
        except struct.error as e:
            raise ProtocolError(f"message flag {m.flag} or size {total} does not fit an int32: {e}") from None
        parts.append(body)
        parts.append(pack16(len(props)))
        parts.append(props)
    return b"".join(parts)


__all__ = ["commit_log_offset", "compressed_for_send", "encode_batch", "encode_properties"]
