"""The test oracle of the native gatherer (docs/DESIGN.md §12): a plain Python reading of pulled messages, for the
differential tests and the fuzz seeds. ``decode_messages`` reads the body of a PULL_MESSAGE FOUND response into
the client's Messages, ``decode_frames`` a gRPC pull's answer frames; ``to_record_batch`` and ``MessageBatcher``
turn Messages into Arrow batches of the output schema.

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
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from dataclasses import fields, replace

import pyarrow as pa

from rmq_spark.client.defaults import DEFAULT_MAX_MESSAGE_BYTES
from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.gathering import block_bytes
from rmq_spark.client.grpc.messages import FLAG_PROPERTY
from rmq_spark.client.grpc.v2 import definition_pb2 as pb
from rmq_spark.client.grpc.v2 import service_pb2 as svc
from rmq_spark.client.model import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, Message, MessageQueue
from rmq_spark.source.schema import ARROW_SCHEMA, COLUMNS
from tests.support import reference_compression as compression

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

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_II = struct.Struct(">ii")
# The fixed part of a record up to and including the body length, per (born v6, store v6). The hosts are
# read as raw ip+port bytes: they key a cache of rendered "ip:port" strings and form the offset message id;
# preparedTransactionOffset is skipped (no decoder uses it).
_LAYOUTS = tuple(
    struct.Struct(f">iiiiiqqiq{born}sq{store}si8xi") for born, store in ((8, 8), (20, 8), (8, 20), (20, 20))
)
_LAYOUT_SIZES = tuple(s.size for s in _LAYOUTS)
# A record of a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessage): totalSize, magic, bodyCRC, flag, bodyLen.
_BATCH_HEAD = struct.Struct(">iiiii")
_BATCH_FIXED = _BATCH_HEAD.size + 2

_new = object.__new__
_set = object.__setattr__
_MESSAGE_FIELDS = (
    "topic",
    "broker_name",
    "queue_id",
    "queue_offset",
    "msg_id",
    "tags",
    "keys",
    "body",
    "born_timestamp",
    "store_timestamp",
    "born_host",
    "store_host",
    "reconsume_times",
    "flag",
    "properties",
    "sys_flag",
    "commit_log_offset",
    "body_crc",
)
# Messages are built by filling __dict__ directly (2-3x faster than the frozen dataclass __init__); only when
# model.Message has exactly these fields and no __post_init__, else through the constructor.
_FAST_MESSAGE = (
    tuple(f.name for f in fields(Message)) == _MESSAGE_FIELDS
    and not hasattr(Message, "__post_init__")
    and not hasattr(Message, "__slots__")
)


# ---------------------------------------------------------------------------------------------- properties


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


def offset_message_id(store_host_raw: bytes, commit_log_offset: int) -> str:
    """MessageDecoder.createMessageId: upper-case hex of store IP + int32 port + int64 commit-log offset."""
    return store_host_raw.hex().upper() + format(commit_log_offset & 0xFFFFFFFFFFFFFFFF, "016X")


# ---------------------------------------------------------------------------------------------- decompression

_CODECS = {
    0: compression.ZLIB,
    COMPRESSION_ZLIB: compression.ZLIB,
    COMPRESSION_LZ4: compression.LZ4,
    COMPRESSION_ZSTD: compression.ZSTD,
}  # 0: older producers without a compression type


def _decompress(sys_flag: int, raw: bytes, limit: int, where: str) -> bytes:
    ctype = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    codec = _CODECS.get(ctype)
    if codec is None:
        raise ProtocolError(f"unknown compression type {ctype} in sysFlag {sys_flag:#x}")
    return compression.decompress(codec, raw, limit, where)


def _not_utf8(e: UnicodeDecodeError) -> str:
    return f"not valid UTF-8 (at byte {e.start} of {len(e.object)})"


# ---------------------------------------------------------------------------------------------- decoding


def _unwrap_inner_batch(
    body: bytes,
    topic: str,
    broker_name: str,
    queue_id: int,
    queue_offset: int,
    sys_flag: int,
    born_ts: int,
    store_ts: int,
    born_host: str,
    store_host: str,
    commit_log_offset: int,
    fallback_id: str,
    out: list,
) -> None:
    """Append the messages of an inner-batch record's body (SEND_BATCH_MESSAGE records) to ``out``."""
    n = len(body)
    pos = 0
    index = 0
    while pos < n:
        if n - pos < _BATCH_FIXED:
            raise ProtocolError(
                f"inner-batch message {index} truncated: {n - pos} bytes left, {_BATCH_FIXED} needed for its header"
            )
        total, _magic, _crc, flag, blen = _BATCH_HEAD.unpack_from(body, pos)
        b0 = pos + _BATCH_HEAD.size
        if blen < 0 or blen > n - b0 - 2:
            raise ProtocolError(f"inner-batch message {index} body length {blen} exceeds the batch")
        (plen,) = _I16.unpack_from(body, b0 + blen)
        p0 = b0 + blen + 2
        if plen < 0 or plen > n - p0:
            raise ProtocolError(f"inner-batch message {index} properties length {plen} exceeds the batch")
        if total != p0 + plen - pos:
            raise ProtocolError(
                f"inner-batch message {index} totalSize {total} disagrees with its fields ({p0 + plen - pos} bytes)"
            )
        try:
            props = decode_properties(str(body[p0 : p0 + plen], "utf-8")) if plen else {}
        except UnicodeDecodeError as e:
            raise ProtocolError(f"inner-batch message {index} properties are {_not_utf8(e)}") from None
        keys = props.get(PROPERTY_KEYS)
        out.append(
            Message(
                topic=topic,
                broker_name=broker_name,
                queue_id=queue_id,
                queue_offset=queue_offset + index,
                msg_id=props.get(PROPERTY_UNIQ_KEY) or fallback_id,
                tags=props.get(PROPERTY_TAGS),
                keys=tuple(k for k in keys.split(KEY_SEPARATOR) if k) if keys else (),
                body=bytes(body[b0 : b0 + blen]),
                born_timestamp=born_ts,
                store_timestamp=store_ts,
                born_host=born_host,
                store_host=store_host,
                reconsume_times=0,
                flag=flag,
                properties=props,
                sys_flag=sys_flag,
                commit_log_offset=commit_log_offset,
                body_crc=0,
            )
        )
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
                raise ProtocolError(
                    f"message at byte {pos}: properties length {plen} does not end the record at its totalSize {total}"
                )
            append(head)
            spans += (b0, b1, t0, t1, p0, end)
            flags |= sys_flag
            pos = end
    except (struct.error, IndexError, ValueError) as e:  # a bounds check above missed a case
        raise ProtocolError(f"message at byte {pos} is malformed: {e}") from None
    return flags


def decode_messages(
    data: bytes | bytearray | memoryview,
    broker_name: str,
    *,
    tags: frozenset[str] | set[str] | None = None,
    offset_delta: int = 0,
    max_body: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> list[Message]:
    """Decode the body of a PULL_MESSAGE FOUND response into messages, in order.

    ``tags``: the TAG subscription's tag set; when given (and neither empty nor containing ``*``) messages whose
    TAGS is not in it are dropped, as the Java client re-checks after the broker's hash-code filter.
    ``offset_delta``: the pull response's offsetDelta (static topics), added to every queue offset.
    ``max_body``: the most a compressed body may expand to (MessageTooLargeError naming the message past it).
    Errors are worded as the native gatherer words them, but for the codec library's words.
    Raises ProtocolError on any truncated or inconsistent record.
    """
    buf = block_bytes(data)
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
            (
                _total,
                _magic,
                body_crc,
                queue_id,
                flag,
                queue_offset,
                phys,
                sys_flag,
                born_ts,
                born_raw,
                store_ts,
                store_raw,
                reconsume,
                _blen,
            ) = head
            try:
                topic = str(buf[t0:t1], "utf-8")
            except UnicodeDecodeError as e:
                raise ProtocolError(f"message at byte {end - head[0]}: the topic is {_not_utf8(e)}") from None
            body = buf[b0:b1]
            if sys_flag & COMPRESSED_FLAG and b1 > b0:
                body = _decompress(
                    sys_flag, body, max_body, f"{topic}:{broker_name}/{queue_id} offset {queue_offset + offset_delta}"
                )
                sys_flag &= ~COMPRESSED_FLAG
            try:
                props = parse_props(str(buf[p0:end], "utf-8")) if end > p0 else {}
            except UnicodeDecodeError as e:
                raise ProtocolError(f"message at byte {end - head[0]}: the properties are {_not_utf8(e)}") from None
            born_host = hosts[born_raw]
            store_host = hosts[store_raw]
            if sys_flag & 0xC0 == 0xC0:  # INNER_BATCH_FLAG | NEED_UNWRAP_FLAG
                _unwrap_inner_batch(
                    body,
                    topic,
                    broker_name,
                    queue_id,
                    queue_offset,
                    sys_flag,
                    born_ts,
                    store_ts,
                    born_host,
                    store_host,
                    phys,
                    offset_message_id(store_raw, phys),
                    out,
                )
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
            d = {
                "topic": topic,
                "broker_name": broker_name,
                "queue_id": queue_id,
                "queue_offset": queue_offset,
                "msg_id": msg_id,
                "tags": props.get("TAGS"),
                "keys": keys,
                "body": body,
                "born_timestamp": born_ts,
                "store_timestamp": store_ts,
                "born_host": born_host,
                "store_host": store_host,
                "reconsume_times": reconsume,
                "flag": flag,
                "properties": props,
                "sys_flag": sys_flag,
                "commit_log_offset": phys,
                "body_crc": body_crc,
            }
            if fast:
                m = new(msg_cls)
                setattr_(m, "__dict__", d)
            else:
                m = msg_cls(**d)
            append(m)
    except (struct.error, IndexError, ValueError) as e:  # a bounds check missed a case
        raise ProtocolError(f"message at byte {end - head[0]} is malformed: {e}") from None
    if tags is not None and tags and "*" not in tags:
        out = [m for m in out if m.tags is not None and m.tags in tags]
    if offset_delta:
        out = [replace(m, queue_offset=m.queue_offset + offset_delta) for m in out]
    return out


# ---------------------------------------------------------------------------------------------- v2 answer frames


def from_v2(m: pb.Message, mq: MessageQueue, max_body: int = DEFAULT_MAX_MESSAGE_BYTES) -> Message:
    """One pulled v2 message as the client's Message of queue ``mq``; a GZIP body may expand to ``max_body``."""
    sp = m.system_properties
    props = dict(m.user_properties)
    flag = props.pop(FLAG_PROPERTY, None)
    body = m.body
    topic = m.topic.name or mq.topic
    if sp.body_encoding == pb.GZIP:
        body = compression.decompress(
            compression.GZIP, body, max_body, f"{topic}:{mq.broker_name}/{sp.queue_id} offset {sp.queue_offset}"
        )
    try:
        flag_value = int(flag) if flag is not None else 0
    except ValueError:
        raise ProtocolError(f"{mq}: message {sp.message_id} has a non-integer {FLAG_PROPERTY} {flag!r}") from None
    keys = tuple(sp.keys)
    if "" in keys:
        keys = tuple(k for k in keys if k)
    born, stored = sp.born_timestamp, sp.store_timestamp
    return Message(
        topic=topic,
        broker_name=mq.broker_name,
        queue_id=sp.queue_id,
        queue_offset=sp.queue_offset,
        msg_id=sp.message_id,
        tags=sp.tag if sp.HasField("tag") else None,
        keys=keys,
        body=body,
        born_timestamp=born.seconds * 1000 + born.nanos // 1_000_000,
        store_timestamp=stored.seconds * 1000 + stored.nanos // 1_000_000,
        born_host=sp.born_host,
        store_host=sp.store_host,
        reconsume_times=max(sp.delivery_attempt - 1, 0) if sp.HasField("delivery_attempt") else 0,
        flag=flag_value,
        properties=props,
    )


def decode_frames(
    frames: Sequence[bytes],
    mq: MessageQueue,
    tags: frozenset[str] | None = None,
    max_body: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> list[Message]:
    """The messages of a pull's answer frames (serialized ``PullMessageResponse``s that each hold a message) whose
    tag is in ``tags`` (None: every message). ProtocolError for a frame that protobuf cannot read."""
    out = []
    for frame in frames:
        try:
            answer = svc.PullMessageResponse.FromString(frame)
        except Exception as e:  # protobuf's DecodeError (its class differs between implementations)
            raise ProtocolError(f"{mq}: a PullMessage answer frame of {len(frame)} bytes does not parse: {e}") from None
        if answer.WhichOneof("content") != "message":
            raise ProtocolError(f"{mq}: a PullMessage answer frame holds no message")
        m = from_v2(answer.message, mq, max_body)
        if tags is None or (m.tags is not None and m.tags in tags):
            out.append(m)
    return out


# ---------------------------------------------------------------------------------------------- Arrow batches

_MS_RANGE = range(-((1 << 63) // 1000), ((1 << 63) - 1) // 1000 + 1)  # milliseconds an int64 of microseconds holds


def to_record_batch(messages: Sequence[Message]) -> pa.RecordBatch:
    """One Arrow batch of the output schema from decoded messages: the straightforward reference that
    ``arrow_decoder`` (the executor's path) is tested against."""
    t = ARROW_SCHEMA.types
    arrays = [
        pa.array([m.topic for m in messages], t[0]),
        pa.array([m.broker_name for m in messages], t[1]),
        pa.array([m.queue_id for m in messages], t[2]),
        pa.array([m.queue_offset for m in messages], t[3]),
        pa.array([m.msg_id for m in messages], t[4]),
        pa.array([m.tags for m in messages], t[5]),
        pa.array([list(m.keys) for m in messages], t[6]),
        pa.array([m.body for m in messages], t[7]),
        pa.array([m.born_timestamp * 1000 for m in messages], t[8]),
        pa.array([m.store_timestamp * 1000 for m in messages], t[9]),
        pa.array([m.born_host for m in messages], t[10]),
        pa.array([m.store_host for m in messages], t[11]),
        pa.array([m.reconsume_times for m in messages], t[12]),
        pa.array([m.flag for m in messages], t[13]),
        pa.array([list(m.properties.items()) for m in messages], t[14]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


class MessageBatcher:
    """Collects decoded messages and turns them into one RecordBatch of ``columns`` of ``ARROW_SCHEMA``: what
    ``arrow_decoder.ArrowBatchDecoder`` gives for the same chunks, windows and tags."""

    def __init__(self, columns: Sequence[str] = COLUMNS) -> None:
        self._messages: list[Message] = []
        self.nbytes = 0
        self.columns = tuple(columns)

    @property
    def rows(self) -> int:
        return len(self._messages)

    def add(self, messages: Sequence[Message], low: int, high: int) -> None:
        """Collect the messages with ``low <= queueOffset < high``. ProtocolError for one with a timestamp that no
        microsecond timestamp holds (then none is collected)."""
        kept = [m for m in messages if low <= m.queue_offset < high]
        for m in kept:
            if m.born_timestamp not in _MS_RANGE or m.store_timestamp not in _MS_RANGE:
                raise ProtocolError(
                    f"message at queue offset {m.queue_offset} of topic {m.topic!r}: a timestamp "
                    "is out of the range of microsecond timestamps"
                )
        self._messages.extend(kept)
        self.nbytes += sum(len(m.body) for m in kept)

    def flush(self) -> pa.RecordBatch:
        batch = to_record_batch(self._messages)
        self._messages, self.nbytes = [], 0
        return batch if self.columns == COLUMNS else batch.select(list(self.columns))
