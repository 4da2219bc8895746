"""Columnar decoding: PULL_MESSAGE bodies straight into Arrow RecordBatches of the output schema (DESIGN.md §2, §6).

The native core (``rmq_spark._native``, Rust, run with the GIL released) walks the records and gathers them into
their columns, only the columns asked for and only the rows inside each block's queue-offset window that pass the
client-side tag re-check: the fixed fields, bodies, topics, rendered hosts, and the properties parsed with Java's
rules (map entries, TAGS, KEYS split on spaces, UNIQ_KEY or the offset message id). The columns reach pyarrow
without a copy through the Arrow C data interface; Python assembles the map and list columns from their parts,
once per batch.

The answer frames of a gRPC pull (serialized v2 messages) are gathered into the same columns by the same core
(``add_frames``), so one builder serves both transports.

Blocks with a record whose body must be transformed first (compressed, or an inner batch to unwrap) and frames
with a gzip body are rare: they go through the transport's reference decoder (``decode_messages``,
``grpc.messages.decode_frames``) and their rows are laid into the batch in order, so every row is the same as
``schema.to_record_batch`` of the reference's messages would give. Malformed input raises a ProtocolError.
"""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from rmq_spark.client.compression import DEFAULT_MAX_MESSAGE_BYTES
from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.model import Message, MessageQueue
from rmq_spark.client.remoting.message_codec import as_byte_buffer, decode_messages
from rmq_spark.compiled import BlockGatherer
from rmq_spark.schema import ARROW_SCHEMA, COLUMNS, MessageBatcher, arrow_schema


__all__ = ["ArrowBatchDecoder", "decode_to_arrow"]

_TYPES = ARROW_SCHEMA.types
_STRING = pa.string()
_KEYS_TYPE = _TYPES[6]
_MAP_TYPE = _TYPES[14]
_MIN_OFFSET = -(1 << 63)
_MAX_OFFSET = (1 << 63) - 1

# ---------------------------------------------------------------------------------------------- the decoder

class ArrowBatchDecoder:
    """Collects pulled message blocks (``add``) and turns them into one RecordBatch of ``ARROW_SCHEMA``
    (``flush``). Cheap per block; the Arrow work is per flush, so flush every few thousand rows.

    ``tags``: the TAG subscription's tag set (None, empty or containing ``*``: every message), re-checked on
    the TAGS property as the Java client does. ``columns``: the columns to output, in order (a projection of
    ``ARROW_SCHEMA``); only those are built. ``queue``: the queue read (its topic stands for a v2 message's that
    names none). ``topic``: every row's topic instead of the one its record names (a read in a namespace, whose
    records name the topic as the brokers know it).
    """

    def __init__(self, broker_name: str, *, tags: frozenset[str] | set[str] | None = None,
                 max_body: int = DEFAULT_MAX_MESSAGE_BYTES, columns: tuple[str, ...] = COLUMNS,
                 queue: MessageQueue | None = None, topic: str | None = None) -> None:
        self.max_body = max_body
        self.broker_name = broker_name
        self.queue = queue or MessageQueue("", broker_name, -1)
        self._tag_set = frozenset(tags) if tags and "*" not in tags else None
        self.columns = tuple(columns)
        self.schema = arrow_schema(self.columns)
        self._constant = {"brokerName": broker_name, **({"topic": topic} if topic is not None else {})}
        self._gatherer = BlockGatherer([c for c in self.columns if c not in self._constant],
                                       sorted(self._tag_set) if self._tag_set else None)
        # messages decoded already (blocks only the reference decoder reads, or a transport's decoded messages);
        # at most one of it and the gatherer holds rows: adding to one seals the other into _done
        self._decoded = MessageBatcher(self.columns)
        self._done: list[pa.RecordBatch] = []  # sealed batches of the rows collected before, in order
        self._done_bytes = 0  # the bytes they were collected from

    @property
    def rows(self) -> int:
        """Rows collected since the last flush (inside their windows and past the tag re-check)."""
        return self._gatherer.rows + self._decoded.rows + sum(b.num_rows for b in self._done)

    @property
    def nbytes(self) -> int:
        """Bytes of message blocks (of bodies, for decoded messages) collected since the last flush."""
        return self._gatherer.nbytes + self._decoded.nbytes + self._done_bytes

    def add(self, data: bytes | bytearray | memoryview, low: int | None = None, high: int | None = None) -> None:
        """Collect one PULL_MESSAGE body; only its messages with ``low <= queueOffset < high`` will be output.
        Raises ProtocolError for a truncated or inconsistent record (the block is then not collected)."""
        buf, view = as_byte_buffer(data)
        if view:
            buf = bytes(buf)
        low = _MIN_OFFSET if low is None else low
        high = _MAX_OFFSET if high is None else high
        if self._decoded.rows:
            self._seal_decoded()
        try:
            plain = self._gatherer.add(buf, low, high)
        except ValueError as e:  # (UnicodeError is one: the reference names the codec's error)
            if isinstance(e, UnicodeError):
                decode_messages(buf, self.broker_name, max_body=self.max_body)
            raise ProtocolError(str(e)) from None
        except OverflowError as e:
            raise ProtocolError(str(e)) from None
        if plain:
            return
        self.add_messages(decode_messages(buf, self.broker_name, tags=self._tag_set, max_body=self.max_body),
                          low, high)

    def add_frames(self, frames: tuple[bytes, ...], low: int, high: int) -> None:
        """Collect the answer frames of a gRPC pull (``PullResult.frames``); only their messages with
        ``low <= queueOffset < high`` will be output. ProtocolError for a frame that does not parse (then nothing
        is collected)."""
        if self._decoded.rows:
            self._seal_decoded()
        try:
            plain = self._gatherer.add_v2(list(frames), self.queue.topic, low, high)
        except (ValueError, OverflowError) as e:  # (UnicodeError is a ValueError)
            raise ProtocolError(f"{self.queue}: a PullMessage answer frame does not read: {e}") from None
        if not plain:
            from rmq_spark.client.grpc.messages import decode_frames  # protobuf: only where the reference is needed
            self.add_messages(decode_frames(frames, self.queue, self._tag_set, self.max_body), low, high)

    def native_target(self) -> BlockGatherer:
        """The gatherer a native pull loop adds plain blocks to directly, in order after what was collected
        before."""
        if self._decoded.rows:
            self._seal_decoded()
        return self._gatherer

    def add_messages(self, messages: Sequence[Message], low: int, high: int) -> None:
        """Collect messages decoded already (by a transport's reference decoder), in order after what was
        collected before; those with ``low <= queueOffset < high`` are output."""
        if self._gatherer.rows or self._gatherer.nbytes:
            self._done_bytes += self._gatherer.nbytes
            self._done.append(self._gathered_batch())
        self._decoded.add(messages, low, high)

    def flush(self) -> pa.RecordBatch:
        """The collected messages inside their windows that pass the tag re-check, as one RecordBatch of
        the decoder's ``schema``; the decoder is empty again afterwards."""
        if self._decoded.rows:
            self._seal_decoded()
        batch = self._gathered_batch()
        if not self._done:
            return batch
        done, self._done, self._done_bytes = self._done, [], 0
        table = pa.Table.from_batches([*done, batch], schema=self.schema).combine_chunks()
        return table.to_batches()[0] if table.num_rows else batch

    def _seal_decoded(self) -> None:
        self._done_bytes += self._decoded.nbytes
        self._done.append(self._decoded.flush())

    def _gathered_batch(self) -> pa.RecordBatch:
        n = self._gatherer.rows
        got = {name: pa.array(column) for name, column in self._gatherer.take()}
        if "properties" in self.columns:
            got["properties"] = pa.MapArray.from_arrays(got.pop("propertyOffsets"), got.pop("propertyNames"),
                                                        got.pop("propertyValues"), type=_MAP_TYPE)
        if "keys" in self.columns:
            got["keys"] = pa.ListArray.from_arrays(got.pop("keyOffsets"), got.pop("keyWords"), type=_KEYS_TYPE)
        for name, value in self._constant.items():
            if name in self.columns:
                got[name] = pa.repeat(pa.scalar(value, _STRING), n)
        return pa.RecordBatch.from_arrays([got[c] for c in self.columns], schema=self.schema)


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
