"""Stored-message decoding (the body of a PULL_MESSAGE FOUND response) and SEND_BATCH_MESSAGE body encoding.

A pull body is a concatenation of commit-log records (MessageDecoder.decode), big-endian::

    int32 totalSize | int32 magicCode | int32 bodyCRC | int32 queueId | int32 flag | int64 queueOffset
    | int64 physicOffset | int32 sysFlag | int64 bornTimestamp | bornHost (4 or 16 byte IP + int32 port)
    | int64 storeTimestamp | storeHost (same) | int32 reconsumeTimes | int64 preparedTransactionOffset
    | int32 bodyLength | body | topic length (int8 in magic V1, int16 in magic V2) | topic
    | int16 propertiesLength | properties (``key\\x01value\\x02`` ...)

The IP width comes from sysFlag BORNHOST_V6_FLAG / STOREHOSTADDRESS_V6_FLAG; a body with COMPRESSED_FLAG is
compressed with the codec of sysFlag bits 8..10 (1 LZ4 frame, 2 zstd, 3 or 0 zlib).

A record with INNER_BATCH_FLAG and NEED_UNWRAP_FLAG (a batch sent to a BatchConsumeQueue topic) holds in its
body the SEND_BATCH_MESSAGE records of its messages; like the Java client (PullAPIWrapper.processPullResult ->
MessageDecoder.decodeMessage) they are unwrapped with queue offsets ``queueOffset + i``.

``scan_records`` is the structural walk (lengths, magic, blank fillers, every bounds check) of ``decode_messages``,
the reference decoder. The columnar decoder (``rmq_spark.arrow_decoder``) walks blocks in the native core
(``native/src/records.rs``), which the differential tests hold to the same rules and error texts.
"""
from __future__ import annotations

import socket
import struct
import zlib
from dataclasses import fields, replace
from typing import Iterable

from rmq_spark.client import compression
from rmq_spark.client.compression import DEFAULT_MAX_MESSAGE_BYTES, MessageTooLargeError
from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.model import (KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, Message,
                                    OutgoingMessage)
from rmq_spark.client.unique_ids import new_unique_id

# MessageDecoder magic codes.
MESSAGE_MAGIC_CODE = -626843481  # V1: 1-byte topic length
MESSAGE_MAGIC_CODE_V2 = -626843477  # V2: 2-byte topic length
BLANK_MAGIC_CODE = -875286124  # end-of-file filler of a commit-log file

# MessageSysFlag bits.
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700  # CompressionType value << 8
COMPRESSION_LZ4 = 1
COMPRESSION_ZSTD = 2
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

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_II = struct.Struct(">ii")
# The fixed part of a record up to and including the body length, per (born v6, store v6). The hosts are
# read as raw ip+port bytes: they key a cache of rendered "ip:port" strings and form the offset message id;
# preparedTransactionOffset is skipped (no decoder uses it).
_LAYOUTS = tuple(
    struct.Struct(f">iiiiiqqiq{born}sq{store}si8xi")
    for born, store in ((8, 8), (20, 8), (8, 20), (20, 20))
)
_LAYOUT_SIZES = tuple(s.size for s in _LAYOUTS)
# A record of a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessage): totalSize, magic, bodyCRC, flag, bodyLen.
_BATCH_HEAD = struct.Struct(">iiiii")
_BATCH_FIXED = _BATCH_HEAD.size + 2

_new = object.__new__
_set = object.__setattr__
_MESSAGE_FIELDS = ("topic", "broker_name", "queue_id", "queue_offset", "msg_id", "tags", "keys", "body",
                   "born_timestamp", "store_timestamp", "born_host", "store_host", "reconsume_times", "flag",
                   "properties", "sys_flag", "commit_log_offset", "body_crc")
# Messages are built by filling __dict__ directly (2-3x faster than the frozen dataclass __init__); only when
# model.Message has exactly these fields and no __post_init__, else through the constructor.
_FAST_MESSAGE = (tuple(f.name for f in fields(Message)) == _MESSAGE_FIELDS
                 and not hasattr(Message, "__post_init__") and not hasattr(Message, "__slots__"))


# ---------------------------------------------------------------------------------------------- properties

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


def decode_properties(text: str) -> dict[str, str]:
    """Inverse of ``encode_properties`` with Java's rules: pairs with an empty name or value are dropped,
    the name ends at the first ``\\x01``."""
    props: dict[str, str] = {}
    for item in text.split("\x02"):  # PROPERTY_SEPARATOR (literals: this runs for every pulled message)
        k, _, v = item.partition("\x01")  # NAME_VALUE_SEPARATOR
        if k and v:
            props[k] = v
    return props


# ---------------------------------------------------------------------------------------------- hosts, ids

def _render_host(raw: bytes) -> str:
    """``ip:port`` from 4- or 16-byte IP + int32 port, the plain form of Java's
    ``MessageExt.getBornHostString() + ":" + port``: IPv6 unbracketed (``2001:db8::1:10911``; the address in
    inet_ntop's compressed form, where Java's getHostAddress writes every group), IPv4-mapped IPv6 as the IPv4
    address (Java's InetAddress.getByAddress does the same)."""
    ip = raw[:-4]
    (port,) = _I32.unpack_from(raw, len(raw) - 4)
    if len(ip) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, ip)}:{port}"
    if ip[:12] == b"\0" * 10 + b"\xff\xff":
        return f"{socket.inet_ntop(socket.AF_INET, ip[12:])}:{port}"
    return f"{socket.inet_ntop(socket.AF_INET6, ip)}:{port}"


class _HostCache(dict):
    def __missing__(self, raw: bytes) -> str:
        if len(self) > 4096:
            self.clear()
        s = self[raw] = _render_host(raw)
        return s


_hosts = _HostCache()
# host_string(raw ip + port bytes) -> "ip:port", rendered once per distinct host (a bounded cache).
host_string = _hosts.__getitem__


def commit_log_offset(offset_msg_id: str) -> int:
    """The commit-log offset inside an offset message id (its last 16 hex digits)."""
    if len(offset_msg_id) < 32:
        raise ValueError(f"{offset_msg_id!r} is not an offset message id")
    return int(offset_msg_id[-16:], 16)


def offset_message_id(store_host_raw: bytes, commit_log_offset: int) -> str:
    """MessageDecoder.createMessageId: upper-case hex of store IP + int32 port + int64 commit-log offset."""
    return store_host_raw.hex().upper() + format(commit_log_offset & 0xFFFFFFFFFFFFFFFF, "016X")


# ---------------------------------------------------------------------------------------------- decompression

_CODECS = {0: compression.ZLIB, COMPRESSION_ZLIB: compression.ZLIB, COMPRESSION_LZ4: compression.LZ4,
           COMPRESSION_ZSTD: compression.ZSTD}  # 0: older producers without a compression type


def _decompress(sys_flag: int, raw: bytes, limit: int) -> bytes:
    ctype = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    codec = _CODECS.get(ctype)
    if codec is None:
        raise ProtocolError(f"unknown compression type {ctype} in sysFlag {sys_flag:#x}")
    return compression.decompress(codec, raw, limit)


# ---------------------------------------------------------------------------------------------- decoding

def _unwrap_inner_batch(body: bytes, topic: str, broker_name: str, queue_id: int, queue_offset: int,
                        sys_flag: int, born_ts: int, store_ts: int, born_host: str, store_host: str,
                        commit_log_offset: int, fallback_id: str, out: list) -> None:
    """Append the messages of an inner-batch record's body (SEND_BATCH_MESSAGE records) to ``out``."""
    n = len(body)
    pos = 0
    index = 0
    while pos < n:
        if n - pos < _BATCH_FIXED:
            raise ProtocolError(f"inner-batch message {index} truncated: {n - pos} bytes left, "
                                f"{_BATCH_FIXED} needed for its header")
        total, _magic, _crc, flag, blen = _BATCH_HEAD.unpack_from(body, pos)
        b0 = pos + _BATCH_HEAD.size
        if blen < 0 or blen > n - b0 - 2:
            raise ProtocolError(f"inner-batch message {index} body length {blen} exceeds the batch")
        (plen,) = _I16.unpack_from(body, b0 + blen)
        p0 = b0 + blen + 2
        if plen < 0 or plen > n - p0:
            raise ProtocolError(f"inner-batch message {index} properties length {plen} exceeds the batch")
        if total != p0 + plen - pos:
            raise ProtocolError(f"inner-batch message {index} totalSize {total} disagrees with its fields "
                                f"({p0 + plen - pos} bytes)")
        try:
            props = decode_properties(str(body[p0:p0 + plen], "utf-8")) if plen else {}
        except UnicodeDecodeError as e:
            raise ProtocolError(f"inner-batch message {index} properties are not valid UTF-8: {e}") from None
        keys = props.get(PROPERTY_KEYS)
        out.append(Message(
            topic=topic, broker_name=broker_name, queue_id=queue_id, queue_offset=queue_offset + index,
            msg_id=props.get(PROPERTY_UNIQ_KEY) or fallback_id, tags=props.get(PROPERTY_TAGS),
            keys=tuple(k for k in keys.split(KEY_SEPARATOR) if k) if keys else (),
            body=bytes(body[b0:b0 + blen]), born_timestamp=born_ts, store_timestamp=store_ts,
            born_host=born_host, store_host=store_host, reconsume_times=0, flag=flag, properties=props,
            sys_flag=sys_flag, commit_log_offset=commit_log_offset, body_crc=0))
        pos = p0 + plen
        index += 1


def _skip_blank_or_fail(buf, pos: int, n: int, needed: int) -> int:
    """At a record too short for its fixed part or with the blank magic: the position after a well-formed
    blank filler (commit-log end-of-file padding, never referenced by a consume queue), else ProtocolError."""
    if n - pos >= 8:
        total, magic = _II.unpack_from(buf, pos)
        if magic == BLANK_MAGIC_CODE and 8 <= total <= n - pos:
            return pos + total
        if magic == BLANK_MAGIC_CODE:
            raise ProtocolError(f"blank record at byte {pos} has totalSize {total}, but {n - pos} bytes are left")
    raise ProtocolError(f"message at byte {pos} truncated: {n - pos} bytes left, at least {needed} needed")


def _record_error(pos: int, n: int, total: int, blen: int, tlen: int, p0: int, end: int) -> None:
    """Raise the ProtocolError that says which length of the record at ``pos`` is inconsistent."""
    if end > n:
        raise ProtocolError(f"message at byte {pos} has totalSize {total}, but {n - pos} bytes are left")
    if tlen == 0 and p0 == 0:
        raise ProtocolError(f"message at byte {pos}: body length {blen} overruns its totalSize {total}")
    if tlen < 0:
        raise ProtocolError(f"message at byte {pos}: negative topic length {tlen}")
    raise ProtocolError(f"message at byte {pos}: topic length {tlen} overruns its totalSize {total}")


def as_byte_buffer(data) -> tuple[bytes | memoryview, bool]:
    """``data`` as something ``scan_records`` can index byte by byte: bytes as they are, any other contiguous
    buffer as a flat memoryview (the flag says so: its slices are views that must be copied to keep).
    ProtocolError when it is not a contiguous byte buffer."""
    if isinstance(data, bytes):
        return data, False
    try:
        return memoryview(data).cast("B"), True
    except TypeError as e:
        raise ProtocolError(f"message block is not a contiguous byte buffer: {e}") from None


def scan_records(buf: bytes | memoryview, heads: list, spans: list) -> int:
    """Walk the records of a message block (the structural half of ``decode_messages``): for each record append
    its fixed part (the ``_LAYOUTS`` tuple: totalSize, magic, bodyCRC, queueId, flag, queueOffset, physicOffset,
    sysFlag, bornTimestamp, raw bornHost, storeTimestamp, raw storeHost, reconsumeTimes, bodyLength; indices
    ``H_*``) to ``heads`` and its body, topic and properties positions ``b0, b1, t0, t1, p0, end`` to ``spans``.
    Blank fillers are skipped. Returns the OR of the records' sysFlags. Raises ProtocolError on any truncated or
    inconsistent record; ``heads``/``spans`` then hold the records before it. Text is not decoded here."""
    n = len(buf)
    layouts = _LAYOUTS
    sizes = _LAYOUT_SIZES
    unpack_i16 = _I16.unpack_from
    layout_v4 = _LAYOUTS[0].unpack_from
    fixed_v4 = _LAYOUT_SIZES[0]
    min_v4 = fixed_v4 + 3  # empty body, 1-byte topic length, properties length
    magic_v1 = MESSAGE_MAGIC_CODE
    magic_v2 = MESSAGE_MAGIC_CODE_V2
    append = heads.append
    flags = 0
    pos = 0
    try:
        while pos < n:
            left = n - pos
            if left >= min_v4:  # room for the fixed part of an IPv4 record: read it in one go
                head = layout_v4(buf, pos)
                fixed = fixed_v4
                sys_flag = head[7]
                if sys_flag & 0x30:  # an IPv6 born or store host: wider fixed part
                    layout = (sys_flag >> 4) & 3
                    fixed = sizes[layout]
                    if left < fixed + 3:
                        pos = _skip_blank_or_fail(buf, pos, n, fixed + 3)
                        continue
                    head = layouts[layout].unpack_from(buf, pos)
            else:
                pos = _skip_blank_or_fail(buf, pos, n, min_v4)
                continue
            total, magic = head[0], head[1]
            if magic == magic_v1:
                tl_size = 1
            elif magic == magic_v2:
                tl_size = 2
            elif magic == BLANK_MAGIC_CODE:
                pos = _skip_blank_or_fail(buf, pos, n, 8)
                continue
            else:
                raise ProtocolError(f"message at byte {pos} has bad magic code {magic & 0xFFFFFFFF:#010x}")
            blen = head[13]
            end = pos + total
            b0 = pos + fixed
            b1 = b0 + blen
            t0 = b1 + tl_size
            if end > n or blen < 0 or t0 + 2 > end:
                _record_error(pos, n, total, blen, 0, 0, end)
            if tl_size == 1:
                tlen = buf[b1]
                if tlen > 127:  # a signed byte in Java
                    tlen -= 256
            else:
                (tlen,) = unpack_i16(buf, b1)
            t1 = t0 + tlen
            p0 = t1 + 2
            if tlen < 0 or p0 > end:
                _record_error(pos, n, total, blen, tlen, p0, end)
            (plen,) = unpack_i16(buf, t1)
            if plen != end - p0:  # (end >= p0 here, so a negative length fails too)
                raise ProtocolError(f"message at byte {pos}: properties length {plen} does not end the record "
                                    f"at its totalSize {total}")
            append(head)
            spans += (b0, b1, t0, t1, p0, end)
            flags |= sys_flag
            pos = end
    except (struct.error, IndexError, ValueError) as e:  # a bounds check above missed a case
        raise ProtocolError(f"message at byte {pos} is malformed: {e}") from None
    return flags


def decode_messages(data: bytes | bytearray | memoryview, broker_name: str, *,
                    tags: frozenset[str] | set[str] | None = None, offset_delta: int = 0,
                    max_body: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[Message]:
    """Decode the body of a PULL_MESSAGE FOUND response into messages, in order.

    ``tags``: the TAG subscription's tag set; when given (and neither empty nor containing ``*``) messages whose
    TAGS is not in it are dropped, as the Java client re-checks after the broker's hash-code filter.
    ``offset_delta``: the pull response's offsetDelta (static topics), added to every queue offset.
    ``max_body``: the most a compressed body may expand to (MessageTooLargeError naming the message past it).
    Raises ProtocolError on any truncated or inconsistent record.
    """
    buf, view = as_byte_buffer(data)
    heads: list = []
    spans: list = []
    scan_records(buf, heads, spans)
    out: list[Message] = []
    append = out.append
    hosts = _hosts
    parse_props = decode_properties
    fast = _FAST_MESSAGE
    new = _new
    setattr_ = _set
    msg_cls = Message
    it = iter(spans)
    head = None
    try:
        for head, b0, b1, t0, t1, p0, end in zip(heads, it, it, it, it, it, it):
            (_total, _magic, body_crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_raw, store_ts,
             store_raw, reconsume, _blen) = head
            topic = str(buf[t0:t1], "utf-8")
            body = buf[b0:b1]
            if view:
                body = bytes(body)
            if sys_flag & COMPRESSED_FLAG and b1 > b0:
                try:
                    body = _decompress(sys_flag, body, max_body)
                except MessageTooLargeError as e:
                    raise MessageTooLargeError(
                        f"{topic}:{broker_name}/{queue_id} offset {queue_offset + offset_delta}: {e}; the limit is "
                        "option maxMessageBytes (raise it only if producers really send bodies that large: a small "
                        "body that expands this far is a decompression bomb)", limit=e.limit) from None
                sys_flag &= ~COMPRESSED_FLAG
            props = parse_props(str(buf[p0:end], "utf-8")) if end > p0 else {}
            born_host = hosts[born_raw]
            store_host = hosts[store_raw]
            if sys_flag & 0xC0 == 0xC0:  # INNER_BATCH_FLAG | NEED_UNWRAP_FLAG
                _unwrap_inner_batch(body, topic, broker_name, queue_id, queue_offset, sys_flag, born_ts,
                                    store_ts, born_host, store_host, phys, offset_message_id(store_raw, phys), out)
                continue
            msg_id = props.get("UNIQ_KEY")
            if msg_id is None:
                msg_id = offset_message_id(store_raw, phys)
            keys = props.get("KEYS")
            if keys:
                keys = keys.split(" ")
                if "" in keys:
                    keys = [k for k in keys if k]
                keys = tuple(keys)
            else:
                keys = ()
            d = {"topic": topic, "broker_name": broker_name, "queue_id": queue_id, "queue_offset": queue_offset,
                 "msg_id": msg_id, "tags": props.get("TAGS"), "keys": keys, "body": body,
                 "born_timestamp": born_ts, "store_timestamp": store_ts, "born_host": born_host,
                 "store_host": store_host, "reconsume_times": reconsume, "flag": flag, "properties": props,
                 "sys_flag": sys_flag, "commit_log_offset": phys, "body_crc": body_crc}
            if fast:
                m = new(msg_cls)
                setattr_(m, "__dict__", d)
            else:
                m = msg_cls(**d)
            append(m)
    except UnicodeDecodeError as e:
        raise ProtocolError(f"message at byte {end - head[0]}: topic or properties are not valid UTF-8: "
                            f"{e}") from None
    except (struct.error, IndexError, ValueError) as e:  # a bounds check missed a case
        raise ProtocolError(f"message at byte {end - head[0]} is malformed: {e}") from None
    if tags is not None and tags and "*" not in tags:
        out = [m for m in out if m.tags is not None and m.tags in tags]
    if offset_delta:
        out = [replace(m, queue_offset=m.queue_offset + offset_delta) for m in out]
    return out


# ---------------------------------------------------------------------------------------------- batch encoding

# As the Java producer: bodies of compressMsgBodyOverHowmuch (4 KiB) or more are zlib-compressed at level 5 and
# flagged in sysFlag, so every RocketMQ consumer inflates them.
COMPRESS_FROM = 4096
ZLIB_LEVEL = 5
ZLIB_SYS_FLAG = COMPRESSED_FLAG | COMPRESSION_ZLIB << 8


def compressed_for_send(message: OutgoingMessage) -> tuple[OutgoingMessage, int]:
    """The message as sent and the sysFlag that marks it: a body of COMPRESS_FROM bytes or more zlib-compressed."""
    if len(message.body) < COMPRESS_FROM:
        return message, 0
    return replace(message, body=zlib.compress(message.body, ZLIB_LEVEL)), ZLIB_SYS_FLAG


_BATCH_RECORD = struct.Struct(">iiiii")


def encode_batch(messages: Iterable[OutgoingMessage]) -> bytes:
    """The body of SEND_BATCH_MESSAGE (MessageDecoder.encodeMessages): per message totalSize | magic 0 |
    bodyCRC 0 | flag | int32 body length | body | int16 properties length | properties. Properties are sent
    as ``wire_properties()``; put a UNIQ_KEY in each (``with_unique_id``) as the Java producer does."""
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


__all__ = [
    "OutgoingMessage", "as_byte_buffer", "commit_log_offset", "decode_messages", "decode_properties", "encode_batch",
    "encode_properties", "host_string", "new_unique_id", "offset_message_id",
    "scan_records",
]
