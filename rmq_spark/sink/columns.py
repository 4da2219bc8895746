"""The sink's input columns: which a DataFrame may have, their types, and rows → messages (column-wise)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from rmq_spark.client.model import PROPERTY_UNIQ_KEY, OutgoingMessage
from rmq_spark.client.unique_ids import new_unique_id
from rmq_spark.options import OptionError
from rmq_spark.sink.row_keys import ROW_KEY_PROPERTY
from rmq_spark.sink.row_rules import COLUMN_RULES, RowRule, check_rows

# column -> the Spark types it accepts (simpleString)
WRITABLE = {
    "body": ("binary", "string"),
    "topic": ("string",),
    "tags": ("string",),
    "keys": ("array<string>", "string"),
    "properties": ("map<string,string>",),
    "shardingKey": ("string",),
    "brokerName": ("string",),
    "queueId": ("int",),
    "deliverTimeMs": ("bigint",),
    "flag": ("int",),
}
# Columns of the source that describe a stored copy; the broker sets them, so the sink refuses them rather than
# ignore what a user may think is written.
STORED_ONLY = ("queueOffset", "msgId", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "reconsumeTimes")
# Property names RocketMQ reserves (MessageConst): they describe a stored copy or steer the broker, so a
# ``properties`` value never sets them (a frame read by the source carries UNIQ_KEY, CLUSTER, MIN_OFFSET...). The
# key of an exactly-once streaming write's rows is reserved too: only that write sets it, and a row read from a topic
# it filled and written again must not carry a key a recovery of its producer group would count as its own.
RESERVED_PROPERTIES = frozenset(
    {
        ROW_KEY_PROPERTY,
        "1ST_POP_TIME",
        "ARRIVE_TIME",
        "BORN_TIMESTAMP",
        "BUYER_ID",
        "CLUSTER",
        "CONSUME_START_TIME",
        "CORRECTION_FLAG",
        "CORRELATION_ID",
        "DELAY",
        "DLQ_ORIGIN_MESSAGE_ID",
        "DLQ_ORIGIN_TOPIC",
        "DUP_INFO",
        "EXTEND_UNIQ_INFO",
        "INNER_BASE",
        "INNER_MULTI_QUEUE_OFFSET",
        "INNER_NUM",
        "INSTANCE_ID",
        "KEYS",
        "MAX_OFFSET",
        "MAX_RECONSUME_TIMES",
        "MIN_OFFSET",
        "MQ2_FLAG",
        "MSG_REGION",
        "MSG_TYPE",
        "ORIGIN_MESSAGE_ID",
        "PGROUP",
        "POP_CK",
        "POP_CK_OFFSET",
        "PUSH_REPLY_TIME",
        "REAL_QID",
        "REAL_TOPIC",
        "RECONSUME_TIME",
        "REPLY_TO_CLIENT",
        "RETRY_TOPIC",
        "TAGS",
        "TIMER_DELAY_LEVEL",
        "TIMER_DELAY_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELIVER_MS",
        "TIMER_DEL_UNIQKEY",
        "TIMER_DEQUEUE_MS",
        "TIMER_ENQUEUE_MS",
        "TIMER_OUT_MS",
        "TIMER_ROLL_TIMES",
        "TRACE_ON",
        "TRANSACTION_CHECK_TIMES",
        "TRANSFER_FLAG",
        "TRAN_MSG",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "TTL",
        "UNIQ_KEY",
        "WAIT",
        "__BORNHOST",
        "__CRC32#",
        "__SHARDINGKEY",
        "__transactionId__",
    }
)
TRANSIENT_PREFIX = "__RMQ.TRANSIENT."
_VALID = "; the rocketmq sink writes the columns " + ", ".join(
    f"{name} {'/'.join(t.upper() for t in types)}" for name, types in WRITABLE.items()
)


def check_columns(fields: Sequence[tuple[str, str]], *, default_topic: str | None) -> None:
    """Check the input schema, given as (name, Spark ``simpleString`` type) pairs; OptionError names the column.
    The tasks read the columns by name from each Arrow batch."""
    names = [name for name, _ in fields]
    for name, spark_type in fields:
        if name in STORED_ONLY:
            raise OptionError(
                f"column {name!r} describes a message the broker stored and cannot be written: drop it "
                "(df.drop or select the columns to write)" + _VALID
            )
        if name not in WRITABLE:
            near = [c for c in WRITABLE if c.lower() == name.lower()]
            hint = f" (did you mean {near[0]!r}? column names are case-sensitive here)" if near else ""
            raise OptionError(f"the rocketmq sink has no column {name!r}{hint}: drop or rename it" + _VALID)
        if spark_type.lower().replace(" ", "") not in WRITABLE[name]:
            raise OptionError(
                f"column {name!r} is {spark_type.upper()}; the rocketmq sink takes it as "
                + " or ".join(t.upper() for t in WRITABLE[name])
                + " (cast it)"
                + _VALID
            )
    if "body" not in names:
        raise OptionError("the rocketmq sink needs a column body (BINARY or STRING)" + _VALID)
    if "topic" not in names and default_topic is None:
        raise OptionError("set option topic, or give the rows a topic column")
    if ("brokerName" in names) != ("queueId" in names):
        raise OptionError("columns brokerName and queueId go together (an explicit queue): give both or neither")
    if "shardingKey" in names and "brokerName" in names:
        raise OptionError(
            "give columns shardingKey (the queue follows the key) or brokerName + queueId (an explicit queue), not both"
        )


@dataclass
class Rows:
    """One Arrow batch as messages (each with its sharding key, which routes it) plus their topics and explicit
    queues, all in row order (None where a row has no value)."""

    topics: list[str]
    messages: list[OutgoingMessage]
    queues: list[tuple[str | None, int | None]] | None


def _column(batch: pa.RecordBatch, name: str) -> list | None:
    i = batch.schema.get_field_index(name)
    return None if i < 0 else batch.column(i).to_pylist()


def _keys(value) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(k for k in value.split(" ") if k)
    return tuple(k for k in value if k)


def _properties(pairs, uniq: str) -> dict[str, str]:
    props = {}
    if pairs:
        for k, v in pairs:
            if k not in RESERVED_PROPERTIES and not k.startswith(TRANSIENT_PREFIX) and v is not None:
                props[k] = v
    props[PROPERTY_UNIQ_KEY] = uniq
    return props


def to_rows(batch: pa.RecordBatch, default_topic: str | None) -> Rows:
    """The messages of ``batch``, each with a new UNIQ_KEY (its rows keep ``row_rules.COLUMN_RULES``)."""
    n = batch.num_rows
    nothing: list[Any] = [None] * n
    bodies: list[Any] = _column(batch, "body") or nothing  # (row_rules: no null body reaches here)
    topics = _column(batch, "topic") or [default_topic] * n
    tags = _column(batch, "tags") or nothing
    keys = _column(batch, "keys") or nothing
    props = _column(batch, "properties") or nothing
    flags = _column(batch, "flag") or nothing
    times = _column(batch, "deliverTimeMs") or nothing
    shards = _column(batch, "shardingKey") or nothing
    messages = []
    for i in range(n):
        body = bodies[i]
        messages.append(
            OutgoingMessage(
                body=body.encode("utf-8") if isinstance(body, str) else body,
                tags=tags[i] or None,
                keys=_keys(keys[i]),
                properties=_properties(props[i], new_unique_id()),
                flag=flags[i] or 0,
                deliver_time_ms=times[i],
                sharding_key=shards[i],
            )
        )
    brokers, queue_ids = _column(batch, "brokerName"), _column(batch, "queueId")  # (check_columns: both or neither)
    return Rows(
        topics,
        messages,
        list(zip(brokers, queue_ids, strict=True)) if brokers is not None and queue_ids is not None else None,
    )


def checked_batches(
    batches: Iterator[pa.RecordBatch], partition: int, rules: Sequence[RowRule] = ()
) -> Iterator[pa.RecordBatch]:
    """The non-empty batches of Spark partition ``partition``; InvalidRowError for rows that break
    ``COLUMN_RULES`` or ``rules``, before their batch is yielded."""
    batches = iter(batches)
    rules = (*COLUMN_RULES, *rules)
    for batch in batches:
        if batch.num_rows:
            check_rows(batch, batches, rules, partition)
            yield batch


def iter_rows(
    batches: Iterator[pa.RecordBatch], default_topic: str | None, partition: int, rules: Sequence[RowRule] = ()
) -> Iterator[Rows]:
    """The Rows of each non-empty batch of Spark partition ``partition``, checked as ``checked_batches``."""
    for batch in checked_batches(batches, partition, rules):
        yield to_rows(batch, default_topic)
