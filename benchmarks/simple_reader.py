"""A measurement of Spark's SimpleDataSourceStreamReader path for the connector, not a product
path: ``format("rocketmq-simple")`` plans each micro-batch as ``format("rocketmq")`` does, but reads it on the
driver inside ``latestOffset``; Spark keeps the Arrow batches in its block manager and its task reads them from
there, with no Python worker. Spark's wrapper of a simple reader takes no read limit and re-reads a replayed batch
with ``readBetweenOffsets``.

Registered by ``register(spark)`` in the benchmark's session only.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import DataSourceStreamReader, ReadAllAvailable, SimpleDataSourceStreamReader
from pyspark.sql.types import StructType

from rmq_spark.datasource import RocketMQDataSource
from rmq_spark.source.stream import RocketMQStreamReader


class RocketMQSimpleSource(RocketMQDataSource):
    """``format("rocketmq-simple")``: the stream through Spark's simple-reader path."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-simple"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"})

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return DriverReads(super().streamReader(schema))


class DriverReads(SimpleDataSourceStreamReader):
    """The connector's stream reader with each batch read on the driver."""

    def __init__(self, inner: DataSourceStreamReader) -> None:
        assert isinstance(inner, RocketMQStreamReader)
        self.inner = inner

    def initialOffset(self) -> dict:
        return self.inner.initialOffset()

    def read(self, start: dict) -> tuple[Iterator[pa.RecordBatch], dict]:
        end = self.inner.latestOffset(start, ReadAllAvailable())
        if end == start:
            return iter([]), start
        return self.readBetweenOffsets(start, end), end

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[pa.RecordBatch]:
        # a list's iterator: Spark's wrapper copies it to send the cached batch
        return iter([b for p in self.inner.partitions(start, end) for b in self.inner.read(p) if b.num_rows])

    def commit(self, end: dict) -> None:
        self.inner.commit(end)

    def stop(self) -> None:
        self.inner.stop()


def register(spark) -> None:
    """Register ``format("rocketmq-simple")`` with ``spark``."""
    spark.dataSource.register(RocketMQSimpleSource)
