"""The "rocketmq" data source: parses the options and hands out the batch and stream readers and the writers."""

from __future__ import annotations

import logging

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from rmq_spark.options import include_properties, parse_options
from rmq_spark.source.batch import RocketMQBatchReader, RocketMQPushdownBatchReader
from rmq_spark.source.schema import default_columns, projection, schema_ddl
from rmq_spark.source.stream import RocketMQStreamReader
from rmq_spark.worker_heap import freeze_once

log = logging.getLogger(__name__)


class RocketMQDataSource(DataSource):
    """Apache RocketMQ as a Spark data source: ``spark.read.format("rocketmq")`` and ``spark.readStream``, and as a
    sink: ``df.write.format("rocketmq")`` and ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        """The row of a query that gives no schema: the properties map only under includeProperties=true."""
        freeze_once()  # the heap of the worker that looks the source up
        return schema_ddl(default_columns(include_properties(self.options)))

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_options(self.options)
        columns = _columns(schema, options.include_properties)
        reader = RocketMQPushdownBatchReader if options.push_filters else RocketMQBatchReader
        return reader(options, columns)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_options(self.options, streaming=True)
        return RocketMQStreamReader(options, _columns(schema, options.include_properties))

    # The sink's modules load where a write is planned only, not in every process that reads (70 ms each).
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from rmq_spark.sink.write_plan import batch_writer

        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from rmq_spark.sink.write_plan import stream_writer

        return stream_writer(self.options, schema, overwrite)


def _columns(schema: StructType | None, include_properties: bool = False) -> tuple[str, ...]:
    """The columns to read: those of the schema Spark hands the reader (``schema()``'s, or a user-specified one,
    ``.schema("queueOffset BIGINT, body BINARY")``, which must be a subset of the source's columns with their
    types); all of them without one. A schema without the properties map under includeProperties=true is a user's,
    which chooses the columns: the option is ignored, with a warning."""
    columns = projection(None if schema is None else [(f.name, f.dataType.simpleString()) for f in schema.fields])
    if include_properties and "properties" not in columns:
        log.warning(
            "rocketmq: option includeProperties=true is ignored: the schema given to the source chooses the columns "
            "and names no properties column; add `properties MAP<STRING, STRING>` to it to read the map"
        )
    return columns
