"""The driver's side of a write before it starts: append mode only, the columns, and what the target topic's
brokers must support (timers for a deliverTimeMs column; ended transactions and no static topic for exactly once);
then the writer Spark pickles to its tasks."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.types import StructType

from rmq_spark.client_pool import new_client
from rmq_spark.options import OptionError, SinkOptions, parse_sink_options
from rmq_spark.sink.columns import check_columns
from rmq_spark.sink.commit_home import refuse_static_topics
from rmq_spark.sink.message_types import refuse_timers
from rmq_spark.sink.transaction_check import refuse_unended_transactions
from rmq_spark.sink.writers import RocketMQStreamWriter, RocketMQWriter


def batch_writer(given: Mapping[str, str], schema: StructType, overwrite: bool) -> RocketMQWriter:
    """The writer of ``df.write.format("rocketmq")`` with the options ``given``."""
    options = _checked(given, schema, overwrite)
    return RocketMQWriter(options)


def stream_writer(given: Mapping[str, str], schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
    """The writer of ``writeStream.format("rocketmq")`` with the options ``given``."""
    options = _checked(given, schema, overwrite)
    if options.exactly_once and options.topic is not None:
        with new_client(options) as client:
            refuse_static_topics(client, [options.topic])
    return RocketMQStreamWriter(options)


def _checked(given: Mapping[str, str], schema: StructType, overwrite: bool) -> SinkOptions:
    if overwrite:
        raise OptionError(
            "a RocketMQ topic is append-only: write with mode('append') (output mode 'append' or "
            "'update' in streaming), not overwrite or complete"
        )
    options = parse_sink_options(given)
    _check_sink_columns(schema, options)
    return options


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
