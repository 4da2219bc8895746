"""The source's output schema (docs/DESIGN.md §6) and the Arrow batch builder that matches it exactly."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from rmq_spark.options import OptionError

COLUMN_TYPES = (  # name and Spark SQL type of each column, in order
    ("topic", "STRING"),
    ("brokerName", "STRING"),
    ("queueId", "INT"),
    ("queueOffset", "BIGINT"),
    ("msgId", "STRING"),
    ("tags", "STRING"),
    ("keys", "ARRAY<STRING>"),
    ("body", "BINARY"),
    ("bornTimestamp", "TIMESTAMP"),
    ("storeTimestamp", "TIMESTAMP"),
    ("bornHost", "STRING"),
    ("storeHost", "STRING"),
    ("reconsumeTimes", "INT"),
    ("flag", "INT"),
    ("properties", "MAP<STRING, STRING>"),
)
# As Spark's Kafka source leaves `headers` out of its row unless includeHeaders=true, the default row leaves out the
# properties map unless includeProperties=true: the map costs Spark's JVM about a third of its CPU per row.
OPTIONAL_COLUMNS = ("properties",)


def schema_ddl(columns: Sequence[str]) -> str:
    """The Spark DDL of ``columns`` (names of COLUMN_TYPES, in their order)."""
    types = dict(COLUMN_TYPES)
    return ", ".join(f"{name} {types[name]}" for name in columns)


def default_columns(include_properties: bool) -> tuple[str, ...]:
    """The columns of a query that gives no schema: every column, the properties map only when asked for."""
    return tuple(name for name, _ in COLUMN_TYPES if include_properties or name not in OPTIONAL_COLUMNS)


SCHEMA_DDL = schema_ddl([name for name, _ in COLUMN_TYPES])  # every column a schema may name

_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("brokerName", pa.string()),
        ("queueId", pa.int32()),
        ("queueOffset", pa.int64()),
        ("msgId", pa.string()),
        ("tags", pa.string()),
        ("keys", pa.list_(pa.field("element", pa.string()))),
        ("body", pa.binary()),
        ("bornTimestamp", _TS),
        ("storeTimestamp", _TS),
        ("bornHost", pa.string()),
        ("storeHost", pa.string()),
        ("reconsumeTimes", pa.int32()),
        ("flag", pa.int32()),
        ("properties", pa.map_(pa.string(), pa.string())),
    ]
)
COLUMNS = tuple(ARROW_SCHEMA.names)
assert COLUMNS == tuple(name for name, _ in COLUMN_TYPES)


def projection(fields: Sequence[tuple[str, str]] | None) -> tuple[str, ...]:
    """The columns a user-specified schema selects, given as (name, Spark ``simpleString`` type) pairs in the
    user's order (None: every column). Any column may be named, the properties map too. Raises OptionError for a
    name the source does not have, a type that is not the column's, a column named twice or no column at all."""
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
            raise OptionError(
                f"column {name!r} is {dict(COLUMN_TYPES)[name]} in the rocketmq source, not "
                f"{spark_type.upper()}" + valid
            )
        if name in seen:
            raise OptionError(f"column {name!r} is named twice in the schema given to the rocketmq source")
        seen.add(name)
    return tuple(name for name, _ in fields)


def arrow_schema(columns: Sequence[str]) -> pa.Schema:
    """The Arrow schema of ``columns`` (a projection of ARROW_SCHEMA, in their order)."""
    return ARROW_SCHEMA if tuple(columns) == COLUMNS else pa.schema([ARROW_SCHEMA.field(c) for c in columns])
