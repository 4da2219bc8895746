"""The batch reader: plan exact per-queue ranges once on the driver, read each in its own task."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from rmq_spark.connect import new_client
from rmq_spark.offsets import OffsetResolver, QueueRange, split_ranges
from rmq_spark.options import SourceOptions
from rmq_spark.partition_reader import read_range
from rmq_spark.planning import plan_ranges, resolve_queues
from rmq_spark.pushdown import Narrowing, push


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One task's work: a contiguous offset range of one queue."""

    range: QueueRange


class RocketMQBatchReader(DataSourceReader):
    """``spark.read.format("rocketmq")``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.narrowing = Narrowing()

    def plan(self) -> list[QueueRange]:
        """Resolve queues, start and end offsets, and split the ranges into partitions."""
        o, n = self.options, self.narrowing
        if n.empty:
            return []
        with new_client(o) as client:
            queues = [mq for mq in resolve_queues(client, o) if n.allows(mq)]
            if not queues:
                return []
            resolver = OffsetResolver(client, o)
            starts = resolver.start(queues, default="earliest")
            ends = resolver.end(queues)
            mins = client.min_offsets(queues)
            by_time = _time_bounds(client, queues, n.time_range_ms)
        ranges = [n.clip(r, by_time.get(r.queue)) for r in plan_ranges(queues, starts, ends, mins, o)]
        return split_ranges(ranges, min_partitions=o.min_partitions, max_per_partition=o.max_messages_per_partition)

    def partitions(self) -> Sequence[InputPartition]:
        return [RangePartition(r) for r in self.plan()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, RangePartition):  # Spark plans an empty query as one InputPartition(None)
            yield from read_range(self.options, partition.range)


class RocketMQPushdownBatchReader(RocketMQBatchReader):
    """The batch reader with filter pushdown (option ``pushFilters=true``; Spark also needs
    ``spark.sql.python.filterPushdown.enabled=true``, or it refuses a reader that implements pushFilters)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.narrowing, rest = push(list(filters), self.options)
        tags = self.narrowing.tags_within(self.options)
        if tags:
            self.options = dataclasses.replace(self.options, sub_expression=" || ".join(sorted(tags)),
                                               expression_type="TAG")
        return rest


def _time_bounds(client, queues, time_range_ms: tuple[int, int]) -> dict:
    """Per queue, the offsets [first stored at or after lo, first stored at or after hi) of a time range."""
    lo_ms, hi_ms = time_range_ms
    if lo_ms <= 0 and hi_ms >= 2 ** 63 - 1:
        return {}
    lows = client.search_offsets(queues, lo_ms, "lower") if lo_ms > 0 else {}
    highs = client.search_offsets(queues, hi_ms, "lower") if hi_ms < 2 ** 63 - 1 else {}
    return {mq: (lows.get(mq, 0), highs.get(mq, 2 ** 63 - 1)) for mq in queues}
