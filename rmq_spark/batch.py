"""The batch reader: plan exact per-queue ranges once on the driver, read each in its own task."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from rmq_spark.connect import new_client
from rmq_spark.offsets import OffsetResolver, QueueRange, split_ranges
from rmq_spark.options import SourceOptions
from rmq_spark.partition_reader import read_range
from rmq_spark.planning import plan_ranges, resolve_queues


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One task's work: a contiguous offset range of one queue."""

    range: QueueRange


class RocketMQBatchReader(DataSourceReader):
    """``spark.read.format("rocketmq")``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def plan(self) -> list[QueueRange]:
        """Resolve queues, start and end offsets, and split the ranges into partitions."""
        o = self.options
        with new_client(o) as client:
            queues = resolve_queues(client, o)
            if not queues:
                return []
            resolver = OffsetResolver(client, o)
            starts = resolver.start(queues, default="earliest")
            ends = resolver.end(queues)
            mins = client.min_offsets(queues)
        ranges = plan_ranges(queues, starts, ends, mins, o)
        return split_ranges(ranges, min_partitions=o.min_partitions, max_per_partition=o.max_messages_per_partition)

    def partitions(self) -> Sequence[InputPartition]:
        return [RangePartition(r) for r in self.plan()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        yield from read_range(self.options, partition.range)
