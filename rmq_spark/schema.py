"""The source's output schema (DESIGN.md §6) and the Arrow batch builder that matches it exactly."""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.model import Message
from rmq_spark.options import OptionError

COLUMN_TYPES = (  # name and Spark SQL type of each column, in order
    ("topic", "STRING"), ("brokerName", "STRING"), ("queueId", "INT"), ("queueOffset", "BIGINT"),
    ("msgId", "STRING"), ("tags", "STRING"), ("keys", "ARRAY<STRING>"), ("body", "BINARY"),
    ("bornTimestamp", "TIMESTAMP"), ("storeTimestamp", "TIMESTAMP"), ("bornHost", "STRING"), ("storeHost", "STRING"),
    ("reconsumeTimes", "INT"), ("flag", "INT"), ("properties", "MAP<STRING, STRING>"),
)
SCHEMA_DDL = ", ".join(f"{name} {ddl}" for name, ddl in COLUMN_TYPES)

_TS = pa.timestamp("us", tz="UTC")
_MS_RANGE = range(-((1 << 63) // 1000), ((1 << 63) - 1) // 1000 + 1)  # milliseconds an int64 of microseconds holds
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("brokerName", pa.string()), ("queueId", pa.int32()), ("queueOffset", pa.int64()),
    ("msgId", pa.string()), ("tags", pa.string()), ("keys", pa.list_(pa.field("element", pa.string()))),
    ("body", pa.binary()), ("bornTimestamp", _TS), ("storeTimestamp", _TS), ("bornHost", pa.string()),
    ("storeHost", pa.string()), ("reconsumeTimes", pa.int32()), ("flag", pa.int32()),
    ("properties", pa.map_(pa.string(), pa.string())),
])
COLUMNS = tuple(ARROW_SCHEMA.names)
assert COLUMNS == tuple(name for name, _ in COLUMN_TYPES)


def projection(fields: Sequence[tuple[str, str]] | None) -> tuple[str, ...]:
    """The columns a user-specified schema selects, given as (name, Spark ``simpleString`` type) pairs in the
    user's order (None: no schema given, every column). Raises OptionError for a name the source does not have, a
    type that is not the column's, a column named twice or no column at all."""
    if fields is None:
        return COLUMNS
    valid = "; the rocketmq source's columns are: " + SCHEMA_DDL
    if not fields:
        raise OptionError("the schema given to the rocketmq source has no column" + valid)
    types = {name: ddl.lower().replace(" ", "") for name, ddl in COLUMN_TYPES}
    seen: set[str] = set()
    for name, spark_type in fields:
        if name not in types:
            near = [c for c in types if c.lower() == name.lower()]
            hint = f" (did you mean {near[0]!r}? column names are case-sensitive here)" if near else ""
            raise OptionError(f"the rocketmq source has no column {name!r}{hint}" + valid)
        if spark_type.lower().replace(" ", "") != types[name]:
            raise OptionError(f"column {name!r} is {dict(COLUMN_TYPES)[name]} in the rocketmq source, not "
                              f"{spark_type.upper()}" + valid)
        if name in seen:
            raise OptionError(f"column {name!r} is named twice in the schema given to the rocketmq source")
        seen.add(name)
    return tuple(name for name, _ in fields)


def arrow_schema(columns: Sequence[str]) -> pa.Schema:
    """The Arrow schema of ``columns`` (a projection of ARROW_SCHEMA, in their order)."""
    return ARROW_SCHEMA if tuple(columns) == COLUMNS else pa.schema([ARROW_SCHEMA.field(c) for c in columns])


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
    """Collects already-decoded messages (a transport that delivers them decoded, e.g. gRPC) and turns them into
    one RecordBatch of ``columns`` of ``ARROW_SCHEMA``; ``arrow_decoder.ArrowBatchDecoder`` collects decoded messages
    through it."""

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
                raise ProtocolError(f"message at queue offset {m.queue_offset} of topic {m.topic!r}: a timestamp "
                                    "is out of the range of microsecond timestamps")
        self._messages.extend(kept)
        self.nbytes += sum(len(m.body) for m in kept)

    def flush(self) -> pa.RecordBatch:
        batch = to_record_batch(self._messages)
        self._messages, self.nbytes = [], 0
        return batch if self.columns == COLUMNS else batch.select(list(self.columns))
