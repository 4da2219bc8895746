"""The "rocketmq" data source: parses the options and hands out the batch and stream readers."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from rmq_spark.client_pool import new_client
from rmq_spark.options import OptionError, SinkOptions, parse_options, parse_sink_options
from rmq_spark.sink.columns import check_columns
from rmq_spark.sink.commit_home import refuse_static_topics
from rmq_spark.sink.message_types import refuse_timers
from rmq_spark.sink.transaction_check import refuse_unended_transactions
from rmq_spark.sink.writers import RocketMQStreamWriter, RocketMQWriter
from rmq_spark.source.batch import RocketMQBatchReader, RocketMQPushdownBatchReader
from rmq_spark.source.schema import SCHEMA_DDL, projection
from rmq_spark.source.stream import RocketMQStreamReader
from rmq_spark.worker_heap import freeze_once


class RocketMQDataSource(DataSource):
    """Apache RocketMQ as a Spark data source: ``spark.read.format("rocketmq")`` and ``spark.readStream``, and as a
    sink: ``df.write.format("rocketmq")`` and ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        freeze_once()  # the heap of the worker that looks the source up
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        columns = _columns(schema)
        options = parse_options(self.options)
        reader = RocketMQPushdownBatchReader if options.push_filters else RocketMQBatchReader
        return reader(options, columns)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        columns = _columns(schema)
        return RocketMQStreamReader(parse_options(self.options, streaming=True), columns)

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
                refuse_unended_transactions(client, options.topic, options.producer_group)


def _columns(schema: StructType | None) -> tuple[str, ...]:
    """The columns to read: those of a user-specified schema (``.schema("queueOffset BIGINT, body BINARY")``), which
    must be a subset of the source's columns with their types; all of them otherwise."""
    if schema is None:
        return projection(None)
    return projection([(f.name, f.dataType.simpleString()) for f in schema.fields])
