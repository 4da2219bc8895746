"""The "rocketmq" data source: parses the options and hands out the batch and stream readers."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from rmq_spark.batch import RocketMQBatchReader, RocketMQPushdownBatchReader
from rmq_spark.options import OptionError, parse_options
from rmq_spark.schema import COLUMNS, SCHEMA_DDL
from rmq_spark.stream import RocketMQStreamReader


class RocketMQDataSource(DataSource):
    """Apache RocketMQ as a Spark data source: ``spark.read.format("rocketmq")`` and ``spark.readStream``."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        options = parse_options(self.options)
        return RocketMQPushdownBatchReader(options) if options.push_filters else RocketMQBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        return RocketMQStreamReader(parse_options(self.options, streaming=True))


def _check_schema(schema: StructType) -> None:
    if schema is not None and tuple(f.name for f in schema.fields) != COLUMNS:
        raise OptionError("the rocketmq source has a fixed schema; remove .schema(...) from the reader")
