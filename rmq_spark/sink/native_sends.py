"""A write's rows encoded in the native core, with no Python per row: at least once, each Arrow batch straight to
SEND_BATCH_MESSAGE bodies per target queue; exactly once, each row's half message (SEND_MESSAGE_V2) framed whole,
row key included. Python keeps the plan: the topics' queues, the message-type checks, the sends and their retries
(``sender.Sender.add_encoded``, ``Sender.add_half``). The row-by-row path (``columns.to_rows``, ``Sender.add``)
stays for timer rows, signed or TLS connections and the proxy, and is the test oracle: both give the same
requests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rmq_spark.client.clocks import now_ms
from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.model import MessageQueue, MessageType
from rmq_spark.client.namespaces import NO_NAMESPACE, Namespace
from rmq_spark.client.remoting.connection import next_opaque
from rmq_spark.client.remoting.frame import RemotingCommand
from rmq_spark.client.remoting.send_codec import COMPRESS_FROM, ZLIB_LEVEL
from rmq_spark.client.unique_ids import month_bounds, new_prefix
from rmq_spark.compiled import MalformedError, SendEncoder
from rmq_spark.sink.columns import RESERVED_PROPERTIES, TRANSIENT_PREFIX
from rmq_spark.sink.routing import Router
from rmq_spark.sink.sender import BATCH_BYTES, BATCH_MESSAGES

# the Arrow type each column is handed to the core as
_STRING = ("tags", "shardingKey", "brokerName")
_INT32 = ("flag", "queueId")
_PROPERTIES = pa.map_(pa.string(), pa.string())


@dataclass(frozen=True)
class EncodedSend:
    """``count`` messages for ``mq`` in one SEND_BATCH_MESSAGE body, all marked ``sys_flag``."""

    mq: MessageQueue
    sys_flag: int
    count: int
    body: bytes


def takes(batch: pa.RecordBatch) -> bool:
    """Whether the core encodes ``batch``: not when a row is a timer message (sent one by one), nor when a body
    fills a send alone (sent one by one too, so that the broker judges its size as a message's, naming the limit)."""
    i = batch.schema.get_field_index("deliverTimeMs")
    if i >= 0 and batch.column(i).null_count != len(batch):
        return False
    longest = pc.max(pc.binary_length(batch.column("body"))).as_py()
    return longest is None or longest < BATCH_BYTES


def _canonical(name: str, column: pa.Array) -> pa.Array:
    t = column.type
    if name == "body":
        return column if t == pa.binary() else column.cast(pa.binary())
    if name in _STRING:
        return column if t == pa.string() else column.cast(pa.string())
    if name in _INT32:
        return column if t == pa.int32() else column.cast(pa.int32())
    if name == "keys":
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
            return column if t == pa.list_(pa.string()) else column.cast(pa.list_(pa.string()))
        return column if t == pa.string() else column.cast(pa.string())
    if name == "properties":
        return column if t == _PROPERTIES else column.cast(_PROPERTIES)
    raise AssertionError(f"no native column {name}")


@dataclass(frozen=True)
class HalfSpec:
    """What the half messages of an exactly-once write carry besides their rows: the producer group, and the row
    key's start (``row_keys.batch_prefix``) in a streaming write, whose rows are keyed."""

    group: str
    key_prefix: str | None
    language: str = RemotingCommand.language
    version: int = RemotingCommand.version


@dataclass(frozen=True)
class EncodedHalf:
    """One row's half message for ``mq``: its SEND_MESSAGE_V2 frame under request ``opaque``, its body's bytes as
    sent, its UNIQ_KEY and its row key ("" in a write whose rows carry none)."""

    mq: MessageQueue
    frame: bytes
    opaque: int
    size: int
    msg_id: str
    key: str


class NativeSends:
    """Encodes one task's batches; round robin continues ``router``'s turn, so both paths route alike."""

    def __init__(self, router: Router, default_topic: str | None, namespace: Namespace = NO_NAMESPACE) -> None:
        self._router = router
        self._default_topic = default_topic
        self._namespace = namespace
        self._queues: list[MessageQueue] = []
        self._first: dict[str, int] = {}  # topic: the number of its first queue in _queues
        self._pid = os.getpid()
        start, self._next_month = month_bounds(now_ms())
        self._encoder = SendEncoder(
            reserved=sorted(RESERVED_PROPERTIES),
            transient_prefix=TRANSIENT_PREFIX,
            max_messages=BATCH_MESSAGES,
            max_bytes=BATCH_BYTES,
            compress_from=COMPRESS_FROM,
            level=ZLIB_LEVEL,
            id_prefix=new_prefix(),
            month_start_ms=start,
        )

    def add(self, batch: pa.RecordBatch) -> list[EncodedSend]:
        """The sends ``batch`` fills (its rows keep ``row_rules.COLUMN_RULES`` and ``takes``); ProtocolError for a
        row whose properties the wire cannot carry."""
        columns, topics, table = self._prepared(batch)
        try:
            sends, self._router.turn = self._encoder.add(len(batch), columns, table, self._router.turn)
        except MalformedError as e:
            raise ProtocolError(f"a row of the batch cannot be sent: {e}") from None
        return self._sends(sends)

    def halves(self, batch: pa.RecordBatch, spec: HalfSpec) -> list[EncodedHalf]:
        """The half messages of ``batch``'s rows (an exactly-once write; its rows keep ``row_rules.COLUMN_RULES``
        and ``takes``), in row order, each framed under a new opaque; ProtocolError as ``add``."""
        columns, topics, table = self._prepared(batch)
        names = [(t, self._namespace.wrap(t)) for t in topics]
        n = len(batch)
        opaques = [next_opaque() for _ in range(n)]
        try:
            frames, rows, self._router.turn = self._encoder.halves(
                n,
                columns,
                table,
                names,
                self._router.turn,
                group=self._namespace.wrap(spec.group),
                key_prefix=spec.key_prefix,
                language=spec.language,
                version=spec.version,
                opaques=opaques,
            )
        except MalformedError as e:
            raise ProtocolError(f"a row of the batch cannot be sent: {e}") from None
        queues, view, start = self._queues, memoryview(frames), 0
        out = []
        for (q, size, end, msg_id, key), opaque in zip(rows, opaques, strict=True):
            out.append(EncodedHalf(queues[q], bytes(view[start:end]), opaque, size, msg_id, key))
            start = end
        return out

    def _prepared(self, batch: pa.RecordBatch) -> tuple[dict[str, pa.Array], list[str], list[Any]]:
        """``batch``'s columns as the core takes them, its topics, and their queues' table."""
        self._fresh_ids()
        columns: dict[str, pa.Array] = {}
        names = batch.schema.names
        for name in ("body", "tags", "keys", "properties", "flag", "shardingKey", "brokerName", "queueId"):
            if name in names:
                columns[name] = _canonical(name, batch.column(name))
        if "topic" in names:
            encoded = pc.dictionary_encode(batch.column("topic"))
            columns["topic"] = encoded.indices.cast(pa.int32())
            topics = encoded.dictionary.to_pylist()
        else:
            assert self._default_topic is not None, "check_columns: option topic or a topic column"
            topics = [self._default_topic]
        return columns, topics, [self._topic(t) for t in topics]

    def finish(self) -> list[EncodedSend]:
        """The sends still gathering."""
        return self._sends(self._encoder.finish())

    def kinds(self, batch: pa.RecordBatch) -> Iterator[tuple[str, MessageType]]:
        """Each (topic, kind of message) of ``batch``'s rows: FIFO with a sharding key, NORMAL without."""
        names = batch.schema.names
        n = len(batch)
        fifo = pc.is_valid(batch.column("shardingKey")) if "shardingKey" in names else pa.repeat(False, n)
        topic = batch.column("topic") if "topic" in names else pa.repeat(self._default_topic, n)
        pairs = pa.table({"t": topic, "f": fifo}).group_by(["t", "f"]).aggregate([])
        for t, f in zip(pairs.column("t").to_pylist(), pairs.column("f").to_pylist(), strict=True):
            yield t, MessageType.FIFO if f else MessageType.NORMAL

    def _topic(self, topic: str) -> tuple[int, list[tuple[str, int]]]:
        queues = self._router.write_queues(topic)
        first = self._first.get(topic)
        if first is None or self._queues[first : first + len(queues)] != queues:
            first = self._first[topic] = len(self._queues)
            self._queues.extend(queues)
        return first, [(q.broker_name, q.queue_id) for q in queues]

    def _sends(self, sends: list[tuple[int, int, int, int, bytes]]) -> list[EncodedSend]:
        return [EncodedSend(self._queues[q], sys_flag, count, body) for q, sys_flag, _flag, count, body in sends]

    def _fresh_ids(self) -> None:
        """A new UNIQ_KEY prefix in a new month or a forked process, as ``client.unique_ids`` draws one."""
        now = now_ms()
        if now >= self._next_month or os.getpid() != self._pid:
            start, self._next_month = month_bounds(now)
            self._pid = os.getpid()
            self._encoder.set_ids(new_prefix(), start)
