"""Columnar decoding: PULL_MESSAGE bodies straight into Arrow RecordBatches of the output schema (docs/DESIGN.md §2, §6).

The native core (``rmq_spark._native``, Rust, run with the GIL released; ``client.gathering``) walks the records and
gathers them into their columns, only the columns asked for and only the rows inside each block's queue-offset
window that pass the client-side tag re-check: the fixed fields, bodies (inflated when compressed; an inner batch
unwrapped into its messages), topics, rendered hosts, and the properties parsed with Java's rules (map entries,
TAGS, KEYS split on spaces, UNIQ_KEY or the offset message id). The columns reach pyarrow without a copy through the
Arrow C data interface; Python assembles the map and list columns from their parts, once per batch.

The answer frames of a gRPC pull (serialized v2 messages) are gathered into the same columns by the same core
(``add_frames``), so one builder serves both transports. Malformed input raises a ProtocolError.
"""

from __future__ import annotations

import pyarrow as pa

from rmq_spark.client.defaults import DEFAULT_MAX_MESSAGE_BYTES
from rmq_spark.client.gathering import Gatherer, string_scalar
from rmq_spark.client.model import MessageQueue
from rmq_spark.source.schema import ARROW_SCHEMA, COLUMNS, arrow_schema

__all__ = ["ArrowBatchDecoder", "decode_to_arrow"]

_TYPES = ARROW_SCHEMA.types
_KEYS_TYPE = _TYPES[6]
_MAP_TYPE = _TYPES[14]

# ---------------------------------------------------------------------------------------------- the decoder


class ArrowBatchDecoder(Gatherer):
    """Collects pulled message blocks (``add``) or v2 answer frames (``add_frames``) and turns them into one
    RecordBatch of ``ARROW_SCHEMA`` (``flush``). Cheap per block; the Arrow work is per flush, so flush every few thousand rows.

    ``tags``: the TAG subscription's tag set (None, empty or containing ``*``: every message), re-checked on
    the TAGS property as the Java client does. ``columns``: the columns to output, in order (a projection of
    ``ARROW_SCHEMA``); only those are built. ``queue``: the queue read (its topic stands for a v2 message's that
    names none). ``topic``: as ``Gatherer``'s.
    """

    def __init__(
        self,
        broker_name: str,
        *,
        tags: frozenset[str] | set[str] | None = None,
        max_body: int = DEFAULT_MAX_MESSAGE_BYTES,
        columns: tuple[str, ...] = COLUMNS,
        queue: MessageQueue | None = None,
        topic: str | None = None,
    ) -> None:
        self.broker_name = broker_name
        self._broker = string_scalar(broker_name)
        self.columns = tuple(columns)
        self.schema = arrow_schema(self.columns)
        super().__init__(
            [c for c in self.columns if c != "brokerName"],
            queue or MessageQueue("", broker_name, -1),
            tags=tags,
            max_body=max_body,
            topic=topic,
        )

    def flush(self) -> pa.RecordBatch:
        """The collected messages inside their windows that pass the tag re-check, as one RecordBatch of
        the decoder's ``schema``; the decoder is empty again afterwards."""
        n = self.rows
        got = self.take_columns()
        if "properties" in self.columns:
            got["properties"] = pa.MapArray.from_arrays(
                got.pop("propertyOffsets"), got.pop("propertyNames"), got.pop("propertyValues"), type=_MAP_TYPE
            )
        if "keys" in self.columns:
            got["keys"] = pa.ListArray.from_arrays(got.pop("keyOffsets"), got.pop("keyWords"), type=_KEYS_TYPE)
        if "brokerName" in self.columns:
            got["brokerName"] = pa.repeat(self._broker, n)
        return pa.RecordBatch.from_arrays([got[c] for c in self.columns], schema=self.schema)


def decode_to_arrow(
    data: bytes | bytearray | memoryview,
    broker_name: str,
    *,
    tags: frozenset[str] | set[str] | None = None,
    low: int | None = None,
    high: int | None = None,
    max_body: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> pa.RecordBatch:
    """One PULL_MESSAGE body's messages with ``low <= queueOffset < high`` that pass the tag re-check, as a
    RecordBatch of ``ARROW_SCHEMA``; ProtocolError for a block that does not read. For many bodies, collect them in
    one ``ArrowBatchDecoder`` and flush every few thousand rows: the Arrow work is per flush."""
    decoder = ArrowBatchDecoder(broker_name, tags=tags, max_body=max_body)
    decoder.add(data, low, high)
    return decoder.flush()
