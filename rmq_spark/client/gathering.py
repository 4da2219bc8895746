"""Pulled chunks through the native gatherer (``compiled.BlockGatherer``, docs/DESIGN.md §12): blocks of stored records
(remoting) or a v2 pull's answer frames (gRPC) into columns, with the core's errors raised as the package's. The
core owns the record rules: the record walk, decompression bounded by maxMessageBytes, inner batches, properties,
message ids, the tag re-check. ``arrow_decoder`` builds Arrow batches of the output schema from the columns;
``MessageCollector`` builds the client's Messages (``read_range``)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa

from rmq_spark.client.core_errors import package_error
from rmq_spark.client.defaults import DEFAULT_MAX_MESSAGE_BYTES
from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.model import Message, MessageQueue
from rmq_spark.compiled import BlockGatherer, BodyTooLargeError, UnreadableError

# The gatherer's columns for a Message: the output schema's (brokerName is the queue's), timestamps in
# milliseconds, and the record fields outside the schema.
MESSAGE_COLUMNS = (
    "topic",
    "queueId",
    "queueOffset",
    "msgId",
    "tags",
    "keys",
    "body",
    "bornMillis",
    "storeMillis",
    "bornHost",
    "storeHost",
    "reconsumeTimes",
    "flag",
    "properties",
    "sysFlag",
    "commitLogOffset",
    "bodyCrc",
)
MIN_OFFSET = -(1 << 63)
MAX_OFFSET = (1 << 63) - 1


def block_bytes(data: bytes | bytearray | memoryview) -> bytes:
    """A pulled block as bytes; ProtocolError when it is not a contiguous byte buffer."""
    if isinstance(data, bytes):
        return data
    try:
        return memoryview(data).cast("B").tobytes()
    except TypeError as e:
        raise ProtocolError(f"message block is not a contiguous byte buffer: {e}") from None


def string_scalar(text: str) -> pa.StringScalar:
    """``text`` as an Arrow string scalar, made from its buffers: ``pa.scalar`` and ``pa.array`` of a list import
    pandas on their first call (~350 modules, ~0.3 CPU-s in every Spark Python worker, and more objects for the
    worker's collector to walk after every task)."""
    data = text.encode()
    offsets = struct.pack("=ii", 0, len(data))  # Arrow buffers are in native byte order
    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])[0]


class Gatherer:
    """The native gatherer of ``columns`` for the chunks pulled from ``queue``: only messages inside each chunk's
    window of queue offsets that pass the tag re-check (``tags``: None, empty or containing ``*`` for every
    message); a compressed body may expand to ``max_body`` bytes. ``topic``: every row's topic instead of the one
    its record names (a read in a namespace, whose records name the topic as the brokers know it). The rows of a
    logic queue (a static topic's) carry its queue id and their logic offsets, not those of the broker's queue their
    records were stored in."""

    def __init__(
        self,
        columns: Sequence[str],
        queue: MessageQueue,
        *,
        tags: frozenset[str] | set[str] | None = None,
        max_body: int = DEFAULT_MAX_MESSAGE_BYTES,
        topic: str | None = None,
    ) -> None:
        self.queue = queue
        self._topic = string_scalar(topic) if topic is not None and "topic" in columns else None
        tag_set = sorted(tags) if tags and "*" not in tags else None
        native = [c for c in columns if c != "topic"] if self._topic is not None else list(columns)
        self.native = BlockGatherer(native, tag_set, broker_name=queue.broker_name, max_body=max_body)
        self._logic = LogicOffsets(queue.queue_id) if queue.logic else None

    @property
    def rows(self) -> int:
        """Rows gathered since the last take."""
        return self.native.rows

    @property
    def nbytes(self) -> int:
        """Bytes of the chunks gathered since the last take."""
        return self.native.nbytes

    def add(
        self,
        data: bytes | bytearray | memoryview,
        low: int | None = None,
        high: int | None = None,
        offset_delta: int = 0,
    ) -> None:
        """Gather one PULL_MESSAGE body's messages with ``low <= queueOffset + offset_delta < high`` (the delta:
        PullResult's). ProtocolError (MessageTooLargeError for a body past ``max_body``) for a block that does not
        read: nothing is gathered."""
        block = block_bytes(data)
        low = MIN_OFFSET if low is None else low - offset_delta
        high = MAX_OFFSET if high is None else high - offset_delta
        try:
            self.native.add(block, low, high)
        except UnreadableError as e:
            raise package_error(e) from None
        if self._logic is not None:
            self._logic.note(self.native.rows, offset_delta)

    def add_frames(self, frames: Sequence[bytes], low: int, high: int) -> None:
        """Gather the messages of a gRPC pull's answer frames with ``low <= queueOffset < high``; the queue's topic
        stands for a message that names none. Errors as ``add``."""
        try:
            self.native.add_v2(list(frames), self.queue.topic, low, high)
        except UnreadableError as e:
            raise package_error(
                e,
                None
                if isinstance(e, BodyTooLargeError)
                else f"{self.queue}: a PullMessage answer frame does not read: {e}",
            ) from None

    def native_target(self) -> BlockGatherer:
        """The gatherer a native pull loop adds blocks to directly, in order after what was gathered before."""
        return self.native

    def take_columns(self) -> dict[str, pa.Array]:
        """The gathered columns by name (the map and list columns as their offsets and values); the gatherer is
        empty again."""
        rows = self.native.rows
        got = {name: pa.array(column) for name, column in self.native.take()}
        if self._topic is not None:
            got["topic"] = pa.repeat(self._topic, rows)
        if self._logic is not None:
            self._logic.apply(got, rows)
        return got


_INT64 = pa.int64()


def int_scalar(value: int, kind: pa.DataType = _INT64) -> pa.Scalar:
    """``value`` as an Arrow int32 or int64 scalar, made from its buffer (see ``string_scalar``)."""
    fmt = "=i" if kind == pa.int32() else "=q"
    return pa.Array.from_buffers(kind, 1, [None, pa.py_buffer(struct.pack(fmt, value))])[0]


class LogicOffsets:
    """The rows of a logic queue's gathered blocks: each block's records carry the queue id and offsets of the
    broker queue they were stored in, and its offset delta turns them into the logic queue's."""

    def __init__(self, queue_id: int) -> None:
        self._queue_id = queue_id
        self._runs: list[tuple[int, int]] = []  # (rows gathered so far, the delta of the rows since the last run)

    def note(self, rows: int, offset_delta: int) -> None:
        """The gatherer holds ``rows`` rows, those since the last note of ``offset_delta``."""
        if self._runs and self._runs[-1][1] == offset_delta:
            self._runs[-1] = (rows, offset_delta)
        else:
            self._runs.append((rows, offset_delta))

    def apply(self, columns: dict[str, pa.Array], rows: int) -> None:
        """Put the logic queue id and offsets into ``columns`` (the ``rows`` taken); the runs start again."""
        runs, self._runs = self._runs, []
        if "queueId" in columns:
            columns["queueId"] = pa.repeat(int_scalar(self._queue_id, columns["queueId"].type), rows)
        if "queueOffset" in columns and any(delta for _, delta in runs):
            import pyarrow.compute as pc  # only static topics need it: 40 ms less at every process's start

            done, parts = 0, []
            for upto, delta in runs:
                parts.append(pa.repeat(int_scalar(delta), upto - done))
                done = upto
            columns["queueOffset"] = pc.add(columns["queueOffset"], pa.concat_arrays(parts))


class MessageCollector(Gatherer):
    """The client's Messages of pulled chunks inside their windows, in order: the chunk builder of
    ``read_range``."""

    def __init__(
        self,
        queue: MessageQueue,
        *,
        tags: frozenset[str] | None = None,
        max_body: int = DEFAULT_MAX_MESSAGE_BYTES,
        topic: str | None = None,
    ) -> None:
        super().__init__(MESSAGE_COLUMNS, queue, tags=tags, max_body=max_body, topic=topic)

    def take(self) -> list[Message]:
        """The messages collected since the last take, in order."""
        c = {name: column.to_pylist() for name, column in self.take_columns().items()}
        cuts = c["propertyOffsets"]
        names, values = c["propertyNames"], c["propertyValues"]
        properties = [dict(zip(names[a:b], values[a:b], strict=True)) for a, b in zip(cuts, cuts[1:], strict=False)]
        cuts, words = c["keyOffsets"], c["keyWords"]
        keys = [tuple(words[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]
        broker = self.queue.broker_name
        return [
            Message(
                topic=topic,
                broker_name=broker,
                queue_id=queue_id,
                queue_offset=offset,
                msg_id=msg_id,
                tags=tag,
                keys=k,
                body=body,
                born_timestamp=born,
                store_timestamp=stored,
                born_host=born_host,
                store_host=store_host,
                reconsume_times=reconsume,
                flag=flag,
                properties=p,
                sys_flag=sys_flag,
                commit_log_offset=phys,
                body_crc=crc,
            )
            for (
                topic,
                queue_id,
                offset,
                msg_id,
                tag,
                k,
                body,
                born,
                stored,
                born_host,
                store_host,
                reconsume,
                flag,
                p,
                sys_flag,
                phys,
                crc,
            ) in zip(
                c["topic"],
                c["queueId"],
                c["queueOffset"],
                c["msgId"],
                c["tags"],
                keys,
                c["body"],
                c["bornMillis"],
                c["storeMillis"],
                c["bornHost"],
                c["storeHost"],
                c["reconsumeTimes"],
                c["flag"],
                properties,
                c["sysFlag"],
                c["commitLogOffset"],
                c["bodyCrc"],
                strict=True,
            )
        ]
