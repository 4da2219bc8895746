"""Columnar decoding: PULL_MESSAGE bodies straight into Arrow RecordBatches of the output schema (DESIGN.md §2, §6).

Per record, Python does only the structural walk that ``message_codec.decode_messages`` also uses
(``scan_records``: one precompiled struct unpack of the fixed part and the byte positions of body, topic and
properties). Everything else runs over a whole batch in Arrow's C++ kernels:

- the pulled bodies are concatenated and the record positions become the offsets of one binary array whose
  elements alternate body, gap, topic, gap, properties, gap; ``take`` with a stride picks the body, topic and
  properties columns, and a cast to string validates their UTF-8;
- properties (``key\\x01value\\x02``...) are split on ``\\x02`` (``split_pattern``), each pair is cut at its first
  ``\\x01`` (``find_substring`` and offset arithmetic, no Python per pair), pairs with an empty name or value are
  dropped as Java does, and the rest become a ``MapArray``;
- tags, keys and msgId are ``map_lookup``s of TAGS, KEYS (split on spaces, empty keys dropped) and UNIQ_KEY
  (the offset message id where it is absent), the timestamps are ms -> us multiplications, the hosts are
  rendered once per distinct host;
- the queue-offset window and the client-side tag re-check are one ``filter`` at the end.

Records whose body must be transformed first (compressed, or an inner batch to unwrap) are rare: they go through
``decode_messages`` one record at a time and their messages are laid back into the batch, so every row is the
same as ``schema.to_record_batch(decode_messages(...))`` would give. Malformed input raises the ProtocolError
``decode_messages`` raises for it.
"""
from __future__ import annotations

from array import array
from operator import itemgetter

import pyarrow as pa
import pyarrow.compute as pc

from rmq_spark.client.compression import DEFAULT_MAX_MESSAGE_BYTES, MessageTooLargeError
from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.remoting.message_codec import (
    COMPRESSED_FLAG, H_BODY_LEN, H_BORN_RAW, H_BORN_TS, H_FLAG, H_MAGIC, H_PHYS, H_QUEUE_ID, H_QUEUE_OFFSET,
    H_RECONSUME, H_STORE_RAW, H_STORE_TS, H_SYS_FLAG, H_TOTAL, INNER_BATCH_FLAG, PROPERTY_KEYS, PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY, SPANS_PER_RECORD, as_byte_buffer, decode_messages, decode_properties, encode_properties,
    host_string, needs_message_decoder, offset_message_id, scan_records)
from rmq_spark.schema import ARROW_SCHEMA, COLUMNS, arrow_schema

__all__ = ["ArrowBatchDecoder", "decode_to_arrow"]

_TYPES = ARROW_SCHEMA.types
_STRING = pa.string()
_BINARY = pa.binary()
_INT32 = pa.int32()
_INT64 = pa.int64()
_TS_TYPE = _TYPES[8]
_KEYS_TYPE = _TYPES[6]
_MAP_TYPE = _TYPES[14]
_ZERO32 = pa.array([0], _INT32)
_I32_0 = pa.scalar(0, _INT32)
_I32_1 = pa.scalar(1, _INT32)
_US_PER_MS = pa.scalar(1000, _INT64)
_FROM_PROPERTIES = frozenset({"msgId", "tags", "keys", "properties"})  # columns read from the properties
_NEAR = 16  # rows with at most this many properties are checked for repeated names by vector compares
_MAYBE_SLOW = COMPRESSED_FLAG | INNER_BATCH_FLAG  # a sysFlag OR without these bits: no record needs the decoder
_MIN_OFFSET = -(1 << 63)
_MAX_OFFSET = (1 << 63) - 1

# ---------------------------------------------------------------------------------------------- index arrays

_strides: dict[tuple[int, int], pa.Array] = {}


def _stride(step: int, start: int, count: int) -> pa.Array:
    """int32 ``start, start + step, ...`` (``count`` of them), cut from a cached array grown by doubling."""
    arr = _strides.get((step, start))
    if arr is None or len(arr) < count:
        cap = max(count, 2 * len(arr) if arr is not None else 1024)
        iota = pc.cumulative_sum(pa.repeat(pa.scalar(step, _INT32), cap))  # step, 2 step, ...
        arr = _strides[step, start] = pc.add(iota, pa.scalar(start - step, _INT32))
    return arr.slice(0, count)


_perms: dict[int, pa.Array] = {}


def _interleave4(a: pa.Array, b: pa.Array, c: pa.Array, d: pa.Array) -> pa.Array:
    """``a0, b0, c0, d0, a1, b1, ...`` (four int32 arrays of one length k): a take from their concatenation with
    the permutation ``j * k + i`` at ``4 i + j`` (cached per k: batches of one size recur)."""
    k = len(a)
    perm = _perms.get(k)
    if perm is None:
        iota = _stride(1, 0, 4 * k)
        perm = pc.add(pc.multiply(pc.bit_wise_and(iota, 3), k), pc.shift_right(iota, 2)).cast(_INT32)
        if len(_perms) >= 8:
            _perms.clear()
        _perms[k] = perm
    return pa.concat_arrays([a, b, c, d]).take(perm)


def _offsets_of(arr: pa.Array) -> pa.Array:
    """The int32 offsets (length + 1 of them, absolute in its data buffer) of a string/binary/list array."""
    return pa.Array.from_buffers(_INT32, len(arr) + 1, [None, arr.buffers()[1]], offset=arr.offset)


def _compact_offsets(offsets: pa.Array, keep: pa.Array) -> pa.Array:
    """The offsets of a list array after dropping the child values where ``keep`` is false."""
    kept_before = pa.concat_arrays([_ZERO32, pc.cumulative_sum(keep.cast(_INT32))])
    return kept_before.take(offsets)


# ---------------------------------------------------------------------------------------------- properties

def _properties_map(props: pa.Array) -> pa.MapArray:
    """``map<string, string>`` from property strings, with ``decode_properties``'s rules: pairs end at ``\\x02``,
    the name at the first ``\\x01``, pairs with an empty name or value are dropped, a repeated name keeps its
    first position and its last value."""
    pairs = pc.split_pattern(props, "\x02")
    flat = pc.list_flatten(pairs)
    starts = _offsets_of(flat).slice(0, len(flat))
    lengths = pc.binary_length(flat)
    cut = pc.find_substring(flat, "\x01")  # byte index of the first \x01, -1 if none
    keep = pc.and_(pc.greater(cut, _I32_0), pc.greater(pc.subtract(lengths, cut), _I32_1))
    sel = pc.indices_nonzero(keep)
    k = len(sel)
    if k:
        key_start = starts.take(sel)
        key_end = pc.add(key_start, cut.take(sel))
        value_end = pc.add(key_start, lengths.take(sel))
        bounds = pa.concat_arrays([_interleave4(key_start, key_end, pc.add(key_end, _I32_1), value_end),
                                   value_end.slice(k - 1)])
        # elements: name, "\x01", value, gap (the "\x02" and whatever dropped pairs lie before the next name)
        parts = pa.Array.from_buffers(_STRING, 4 * k, [None, bounds.buffers()[1], flat.buffers()[2]])
        names = parts.take(_stride(4, 0, k))
        values = parts.take(_stride(4, 2, k))
    else:
        names = values = pa.array([], _STRING)
    offsets = _compact_offsets(pairs.offsets, keep)
    out = pa.MapArray.from_arrays(offsets, names, values, type=_MAP_TYPE)
    if k > 1 and _has_repeated_names(names, pc.list_parent_indices(pairs).take(sel), offsets):
        # a name twice in one message (no producer writes that): the dict semantics, message by message
        out = pa.array([list(decode_properties(s).items()) for s in props.to_pylist()], _MAP_TYPE)
    return out


def _has_repeated_names(names: pa.Array, rows: pa.Array, offsets: pa.Array) -> bool:
    """Whether a name occurs twice in one row, in time linear in the pairs: for rows of at most _NEAR pairs (the
    usual case) each pair is compared with the ones up to (widest - 1) before it (a repeat within a row lies that
    close); wider rows are checked in one hash pass (fewer distinct (row, name) pairs than pairs)."""
    widest = pc.max(pc.subtract(offsets.slice(1), offsets.slice(0, len(offsets) - 1))).as_py() or 0
    n = len(names)
    if widest > _NEAR:
        return pa.table({"row": rows, "name": names}).group_by(["row", "name"]).aggregate([]).num_rows < n
    for d in range(1, min(widest, n)):
        same = pc.and_(pc.equal(rows.slice(d), rows.slice(0, n - d)), pc.equal(names.slice(d), names.slice(0, n - d)))
        if pc.any(same).as_py():
            return True
    return False


def _keys_column(keys: pa.Array) -> pa.ListArray:
    """KEYS values (null where absent) split on single spaces without the empty pieces, as ``list<string>``."""
    split = pc.split_pattern(pc.fill_null(keys, ""), " ")
    words = pc.list_flatten(split)
    nonempty = pc.greater(pc.binary_length(words), _I32_0)
    if pc.all(nonempty).as_py():
        offsets = split.offsets
    else:
        offsets = _compact_offsets(split.offsets, nonempty)
        words = words.filter(nonempty)
    return pa.ListArray.from_arrays(offsets, words, type=_KEYS_TYPE)


class _InvalidText(Exception):
    """A topic or properties string of the batch is not valid UTF-8."""


def _text(parts: pa.Array, indices: pa.Array) -> pa.Array:
    """The string column of the binary ``parts`` at ``indices``, UTF-8 validated."""
    try:
        return parts.take(indices).cast(_STRING)
    except pa.ArrowInvalid:
        raise _InvalidText from None


def _host_column(raw_hosts) -> pa.Array:
    """``ip:port`` strings from raw host bytes, each distinct host rendered once."""
    if raw_hosts.count(raw_hosts[0]) == len(raw_hosts):
        return pa.repeat(pa.scalar(host_string(raw_hosts[0]), _STRING), len(raw_hosts))
    enc = pa.array(raw_hosts, _BINARY).dictionary_encode()
    names = pa.array([host_string(r) for r in enc.dictionary.to_pylist()], _STRING)
    return names.take(enc.indices)


def _field(heads: list, index: int) -> list:
    """One field of every header tuple."""
    return list(map(itemgetter(index), heads))


def _int32_column(values: list) -> pa.Array:
    """int32 column; queueId, flag and reconsumeTimes are mostly one value for a whole batch."""
    if values.count(values[0]) == len(values):
        return pa.repeat(pa.scalar(values[0], _INT32), len(values))
    return pa.array(values, _INT32)


def _per_block(windows: list, index: int) -> pa.Array:
    """The ``index`` part (1 low, 2 high) of each block's window, repeated over the block's rows."""
    run_ends = pa.array([w[0] for w in windows], _INT32)
    return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(run_ends, pa.array([w[index] for w in windows], _INT64)))


def _timestamp_column(ms) -> pa.Array:
    try:
        return pc.multiply_checked(pa.array(ms, _INT64), _US_PER_MS).view(_TS_TYPE)
    except pa.ArrowInvalid:
        raise ProtocolError("a message timestamp is out of the range of microsecond timestamps") from None


# ---------------------------------------------------------------------------------------------- the decoder

class ArrowBatchDecoder:
    """Collects pulled message blocks (``add``) and turns them into one RecordBatch of ``ARROW_SCHEMA``
    (``flush``). Cheap per block; the Arrow work is per flush, so flush every few thousand rows.

    ``tags``: the TAG subscription's tag set (None, empty or containing ``*``: every message), re-checked on
    the TAGS property as the Java client does. ``columns``: the columns to output, in order (a projection of
    ``ARROW_SCHEMA``); only those are built.
    """

    def __init__(self, broker_name: str, *, tags: frozenset[str] | set[str] | None = None,
                 max_body: int = DEFAULT_MAX_MESSAGE_BYTES, columns: tuple[str, ...] = COLUMNS) -> None:
        self.max_body = max_body
        self.broker_name = broker_name
        self._tags = pa.array(sorted(tags), _STRING) if tags and "*" not in tags else None
        self.columns = tuple(columns)
        self.schema = arrow_schema(self.columns)
        self._empty = pa.RecordBatch.from_pylist([], schema=self.schema)
        self._reset()

    def _reset(self) -> None:
        self._heads: list[tuple] = []  # the fixed part of each record (scan_records), in order
        self._spans: list[int] = []  # six positions per record in the concatenation of self._blocks
        self._blocks: list[bytes] = []
        self._sources: list = []  # the blocks as given, to report a malformed one as decode_messages does
        self._size = 0
        self._windows: list[tuple[int, int, int]] = []  # (rows so far, low, high) per block with rows
        self._windowed = False

    @property
    def rows(self) -> int:
        """Records collected since the last flush (before the window and tag filters)."""
        return len(self._heads)

    @property
    def nbytes(self) -> int:
        """Bytes of message blocks collected since the last flush."""
        return self._size

    def add(self, data: bytes | bytearray | memoryview, low: int | None = None, high: int | None = None) -> None:
        """Collect one PULL_MESSAGE body; only its messages with ``low <= queueOffset < high`` will be output.
        Raises ProtocolError for a truncated or inconsistent record (the block is then not collected)."""
        buf, view = as_byte_buffer(data)
        heads, spans = self._heads, self._spans
        row0, span0 = len(heads), len(spans)
        try:
            flags = scan_records(buf, heads, spans, self._size)
            if view:
                buf = bytes(buf)
            if flags & _MAYBE_SLOW:
                buf = self._lay_out_decoded(buf, row0, span0)
        except BaseException:
            del heads[row0:], spans[span0:]
            raise
        self._blocks.append(buf)
        self._sources.append(data)
        self._size += len(buf)
        if len(heads) > row0:
            if low is None:
                low = _MIN_OFFSET
            if high is None:
                high = _MAX_OFFSET
            self._windows.append((len(heads), low, high))
            self._windowed = self._windowed or low > _MIN_OFFSET or high < _MAX_OFFSET

    def _lay_out_decoded(self, buf: bytes, row0: int, span0: int) -> bytes:
        """Replace the records of ``buf`` (collected from ``row0``/``span0``) that ``decode_messages`` must
        transform by the messages it decodes from them: returns a new block holding body, topic and properties
        of every row in order, and rewrites the rows' heads and spans to match."""
        heads, spans = self._heads, self._spans
        base = self._size
        old_heads, old_spans = heads[row0:], spans[span0:]
        if not any(needs_message_decoder(h[H_SYS_FLAG], h[H_BODY_LEN]) for h in old_heads):
            return buf
        del heads[row0:], spans[span0:]
        out = bytearray()
        for i, h in enumerate(old_heads):
            b0, b1, t0, t1, p0, end = (s - base for s in old_spans[SPANS_PER_RECORD * i:SPANS_PER_RECORD * (i + 1)])
            if not needs_message_decoder(h[H_SYS_FLAG], h[H_BODY_LEN]):
                heads.append(h)
                self._append_segments(out, base, buf[b0:b1], buf[t0:t1], buf[p0:end])
                continue
            start = end - h[H_TOTAL]
            try:
                messages = decode_messages(buf[start:end], self.broker_name, max_body=self.max_body)
            except MessageTooLargeError:
                raise
            except ProtocolError:
                decode_messages(buf, self.broker_name, max_body=self.max_body)  # the error as the block reports it
                raise
            for m in messages:
                # the row as decode_messages made it; msgId, tags and keys follow from the properties again
                # (an inner message without UNIQ_KEY has the record's offset message id, as in decode_messages)
                heads.append((0, h[H_MAGIC], m.body_crc, m.queue_id, m.flag, m.queue_offset, h[H_PHYS], m.sys_flag,
                              m.born_timestamp, h[H_BORN_RAW], m.store_timestamp, h[H_STORE_RAW],
                              m.reconsume_times, len(m.body)))
                self._append_segments(out, base, m.body, m.topic.encode("utf-8"),
                                      encode_properties(m.properties).encode("utf-8"))
        return bytes(out)

    def _append_segments(self, out: bytearray, base: int, body, topic, props) -> None:
        b0 = base + len(out)
        b1 = b0 + len(body)
        t1 = b1 + len(topic)
        self._spans += (b0, b1, b1, t1, t1, t1 + len(props))
        out += body
        out += topic
        out += props

    def flush(self) -> pa.RecordBatch:
        """The collected messages inside their windows that pass the tag re-check, as one RecordBatch of
        the decoder's ``schema``; the decoder is empty again afterwards."""
        heads, spans, blocks, sources = self._heads, self._spans, self._blocks, self._sources
        windows = self._windows if self._windowed else None
        self._reset()
        if not heads:
            return self._empty
        try:
            return self._build(heads, spans, blocks, windows)
        except _InvalidText:  # report it as decode_messages does
            for data in sources:
                decode_messages(data, self.broker_name, max_body=self.max_body)
            raise ProtocolError("message topic or properties are not valid UTF-8") from None

    def _build(self, heads: list, spans: list, blocks: list, windows: list | None) -> pa.RecordBatch:
        n = len(heads)
        want = set(self.columns)
        data = blocks[0] if len(blocks) == 1 else b"".join(blocks)
        spans.append(spans[-1])
        if spans[-1] <= 0x7FFFFFFF:
            part_type, offsets = _BINARY, array("i", spans)
        else:
            part_type, offsets = pa.large_binary(), array("q", spans)
        # elements: body, gap, topic, gap, properties, gap (up to the next record's body)
        parts = pa.Array.from_buffers(part_type, len(spans) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        out: dict[str, pa.Array] = {}
        if "body" in want:
            body = parts.take(_stride(6, 0, n))
            out["body"] = body if part_type is _BINARY else body.cast(_BINARY)
        if "topic" in want:
            out["topic"] = _text(parts, _stride(6, 2, n))
        tags = None
        if want & _FROM_PROPERTIES or self._tags is not None:
            props = _properties_map(_text(parts, _stride(6, 4, n)))
            out["properties"] = props
            tags = out["tags"] = pc.map_lookup(props, PROPERTY_TAGS, "last")
            if "msgId" in want:
                out["msgId"] = self._message_ids(props, heads)
            if "keys" in want:
                out["keys"] = _keys_column(pc.map_lookup(props, PROPERTY_KEYS, "last"))
        del parts, data, offsets

        queue_offset = None
        if "queueOffset" in want or windows is not None:
            queue_offset = out["queueOffset"] = pa.array(_field(heads, H_QUEUE_OFFSET), _INT64)
        for name, make in _HEAD_COLUMNS.items():
            if name in want:
                out[name] = make(heads)
        if "brokerName" in want:
            out["brokerName"] = pa.repeat(pa.scalar(self.broker_name, _STRING), n)
        batch = pa.RecordBatch.from_arrays([out[c] for c in self.columns], schema=self.schema)
        keep = None
        if self._tags is not None:
            keep = pc.is_in(tags, value_set=self._tags)
        if windows is not None:
            inside = pc.and_(pc.greater_equal(queue_offset, _per_block(windows, 1)),
                             pc.less(queue_offset, _per_block(windows, 2)))
            keep = inside if keep is None else pc.and_(keep, inside)
        if keep is not None and keep.false_count:
            batch = batch.filter(keep)
        return batch

    @staticmethod
    def _message_ids(props: pa.MapArray, heads: list) -> pa.Array:
        """UNIQ_KEY, or the offset message id of the record where a message has none."""
        msg_id = pc.map_lookup(props, PROPERTY_UNIQ_KEY, "last")
        if not msg_id.null_count:
            return msg_id
        absent = msg_id.is_null()
        ids = []
        for i in pc.indices_nonzero(absent).to_pylist():
            h = heads[i]
            ids.append(offset_message_id(h[H_STORE_RAW], h[H_PHYS]))
        return pc.replace_with_mask(msg_id, absent, pa.array(ids, _STRING))


# the columns made from the fixed part of each record alone
_HEAD_COLUMNS = {
    "queueId": lambda heads: _int32_column(_field(heads, H_QUEUE_ID)),
    "bornTimestamp": lambda heads: _timestamp_column(_field(heads, H_BORN_TS)),
    "storeTimestamp": lambda heads: _timestamp_column(_field(heads, H_STORE_TS)),
    "bornHost": lambda heads: _host_column(_field(heads, H_BORN_RAW)),
    "storeHost": lambda heads: _host_column(_field(heads, H_STORE_RAW)),
    "reconsumeTimes": lambda heads: _int32_column(_field(heads, H_RECONSUME)),
    "flag": lambda heads: _int32_column(_field(heads, H_FLAG)),
}


def decode_to_arrow(data: bytes | bytearray | memoryview, broker_name: str, *,
                    tags: frozenset[str] | set[str] | None = None, low: int | None = None,
                    high: int | None = None, max_body: int = DEFAULT_MAX_MESSAGE_BYTES) -> pa.RecordBatch:
    """One PULL_MESSAGE body as a RecordBatch of ``ARROW_SCHEMA``: the rows of
    ``schema.to_record_batch(decode_messages(data, broker_name, tags=tags))`` with ``low <= queueOffset < high``.
    Raises ProtocolError where ``decode_messages`` does. For many bodies, collect them in one
    ``ArrowBatchDecoder`` and flush every few thousand rows: the Arrow work is per flush."""
    decoder = ArrowBatchDecoder(broker_name, tags=tags, max_body=max_body)
    decoder.add(data, low, high)
    return decoder.flush()
