"""The batch reader: plan exact per-queue ranges once on the driver, read each in its own task."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from rmq_spark.client.base import BaseClient
from rmq_spark.client.model import Boundary, MessageQueue
from rmq_spark.client_pool import new_client
from rmq_spark.options import OptionError, SourceOptions
from rmq_spark.source.offset_resolver import OffsetResolver
from rmq_spark.source.offset_specs import ByTimestamp, SpecificOffsets, check_named
from rmq_spark.source.offsets import QueueRange
from rmq_spark.source.partition_reader import read_ranges
from rmq_spark.source.planning import check_filter, compacted_topics, plan_ranges, resolve_queues
from rmq_spark.source.pushdown import Narrowing, push
from rmq_spark.source.range_calculator import plan_partitions
from rmq_spark.source.schema import COLUMNS
from rmq_spark.worker_heap import freeze_once


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One task's work: contiguous offset ranges of queues, read one after the other."""

    ranges: tuple[QueueRange, ...]

    def __reduce__(self):  # pickled for every task of every batch: the ranges' fields flat, not objects
        fields = tuple(
            (r.queue.topic, r.queue.broker_name, r.queue.queue_id, r.start, r.end, r.sparse) for r in self.ranges
        )
        return _range_partition, (fields,)


def _range_partition(fields: tuple[tuple[str, str, int, int, int, bool], ...]) -> RangePartition:
    return RangePartition(tuple(QueueRange(MessageQueue(t, b, q), s, e, sparse) for t, b, q, s, e, sparse in fields))


def partitions_of(ranges: list[QueueRange], options: SourceOptions) -> list[RangePartition]:
    """The tasks that read ``ranges`` (split and grouped as the options say)."""
    return [
        RangePartition(task)
        for task in plan_partitions(
            ranges,
            min_partitions=options.min_partitions,
            max_per_partition=options.max_messages_per_partition,
            min_per_partition=options.min_messages_per_partition,
        )
    ]


def read_partition(
    options: SourceOptions, partition: InputPartition, columns: tuple[str, ...]
) -> Iterator[pa.RecordBatch]:
    """The batches of a task's ranges, in order (nothing for the one InputPartition(None) Spark plans for an empty
    query)."""
    try:
        if isinstance(partition, RangePartition):
            yield from read_ranges(options, partition.ranges, columns)
    finally:
        freeze_once()


class RocketMQBatchReader(DataSourceReader):
    """``spark.read.format("rocketmq")``."""

    def __init__(self, options: SourceOptions, columns: tuple[str, ...] = COLUMNS) -> None:
        self.options = options
        self.columns = columns
        self.narrowing = Narrowing()

    def plan(self) -> list[QueueRange]:
        """Resolve queues, start and end offsets: the ranges to read. A broker that cannot answer fails the plan
        with an error naming it (a backfill never leaves a queue out silently)."""
        o, n = self.options, self.narrowing
        if n.empty:
            return []
        with new_client(o) as client:
            client.pull_group = o.pull_group
            found = resolve_queues(client, o)
            for spec in (o.starting, o.ending):
                check_named(spec, found, waits=False)
            queues = [mq for mq in found if n.allows(mq)]
            if not queues:
                return []
            check_filter(client, o, queues)
            resolver = OffsetResolver(client)
            starts = resolver.resolve(o.starting, queues)
            ends = resolver.resolve(o.ending, queues)
            _check_order(o, starts, ends)
            mins = client.min_offsets(queues)
            sparse = compacted_topics(client, {mq.topic for mq in queues})
            gaps = client.remapping_gaps(queues)
            by_time = _time_bounds(client, queues, n.time_range_ms)
        planned = plan_ranges(
            starts, ends, mins, fail_on_data_loss=o.fail_on_data_loss, sparse_topics=sparse, gaps=gaps
        )
        return [n.clip(r, by_time.get(r.queue)) for r in planned]

    def partitions(self) -> Sequence[InputPartition]:
        try:
            return partitions_of(self.plan(), self.options)
        finally:
            freeze_once()  # the planning worker's heap, after what planning imports

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.options, partition, self.columns)


class RocketMQPushdownBatchReader(RocketMQBatchReader):
    """The batch reader with filter pushdown (option ``pushFilters=true``; Spark also needs
    ``spark.sql.python.filterPushdown.enabled=true``, or it refuses a reader that implements pushFilters)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        self.narrowing, rest = push(list(filters), self.options)
        self.options = dataclasses.replace(self.options, filter=self.narrowing.filter_within(self.options.filter))
        return rest


def _check_order(o: SourceOptions, starts: dict, ends: dict) -> None:
    """An end before the start that the user's own offsets or times asked for is an option error (one the broker
    made, e.g. a committed offset past a queue's end, is a reset queue: planning's data-loss rule)."""
    if not isinstance(o.starting, (SpecificOffsets, ByTimestamp)) and not isinstance(
        o.ending, (SpecificOffsets, ByTimestamp)
    ):
        return
    for mq in sorted(ends):
        if ends[mq] < starts[mq]:
            raise OptionError(
                f"{mq}: the end offset {ends[mq]} is before the start offset {starts[mq]}; check the "
                "starting and ending options"
            )


def _time_bounds(client: BaseClient, queues: list[MessageQueue], time_range_ms: tuple[int, int]) -> dict:
    """Per queue, the offsets [first stored at or after lo, first stored at or after hi) of a time range."""
    lo_ms, hi_ms = time_range_ms
    if lo_ms <= 0 and hi_ms >= 2**63 - 1:
        return {}
    lows = client.search_offsets(queues, lo_ms, Boundary.LOWER) if lo_ms > 0 else {}
    highs = client.search_offsets(queues, hi_ms, Boundary.LOWER) if hi_ms < 2**63 - 1 else {}
    return {mq: (lows.get(mq, 0), highs.get(mq, 2**63 - 1)) for mq in queues}
