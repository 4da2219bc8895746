"""The "rocketmq" data source: parses the options and hands out the batch and stream readers."""

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

from rmq_spark.client_pool import new_client
from rmq_spark.options import OptionError, SinkOptions, include_properties, parse_options, parse_sink_options
from rmq_spark.sink.columns import check_columns
from rmq_spark.sink.commit_home import refuse_static_topics
from rmq_spark.sink.message_types import refuse_timers
from rmq_spark.sink.transaction_check import refuse_unended_transactions
from rmq_spark.sink.writers import RocketMQStreamWriter, RocketMQWriter
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

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _append_only(overwrite)
        options = parse_sink_options(self.options)
        _check_sink_columns(schema, options)
        return RocketMQWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _append_only(overwrite)
        options = parse_sink_options(self.options)
        _check_sink_columns(schema, options)
        if options.exactly_once and options.topic is not None:
            with new_client(options) as client:
                refuse_static_topics(client, [options.topic])
        return RocketMQStreamWriter(options)


def _append_only(overwrite: bool) -> None:
    if overwrite:
        raise OptionError(
            "a RocketMQ topic is append-only: write with mode('append') (output mode 'append' or "
            "'update' in streaming), not overwrite or complete"
        )


def _check_sink_columns(schema: StructType, options: SinkOptions) -> None:
    """The columns' names and types; a deliverTimeMs column where option topic's brokers have no timers, and an
    exactly-once write where its servers end no transactions (a RocketMQ 5 proxy)."""
    check_columns([(f.name, f.dataType.simpleString()) for f in schema.fields], default_topic=options.topic)
    timers = "deliverTimeMs" in schema.fieldNames()
    if options.topic is not None and (timers or options.exactly_once):
        with new_client(options) as client:
            if timers:
                refuse_timers(client, options.topic)
            if options.exactly_once:
                refuse_unended_transactions(
                    client, options.topic, options.producer_group, retry_timeout=options.broker_retry_timeout
                )


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
