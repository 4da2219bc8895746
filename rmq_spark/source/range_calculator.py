"""A query's (or micro-batch's) queue ranges as the work of its tasks: ranges split and small ones grouped (as
Spark's ``KafkaOffsetRangeCalculator``)."""

from __future__ import annotations

import math
from dataclasses import replace

from rmq_spark.source.offsets import QueueRange, range_order


def group_ranges(
    parts: list[QueueRange], *, min_per_partition: int, max_per_partition: int | None = None
) -> list[tuple[QueueRange, ...]]:
    """The parts, in order, as the work of tasks: consecutive parts of fewer than ``min_per_partition`` messages go
    to one task until it holds that many (never more than ``max_per_partition``); a larger part is a task of its
    own. 0 gives every part its own task."""
    tasks: list[tuple[QueueRange, ...]] = []
    group: list[QueueRange] = []
    size = 0
    for part in parts:
        n = part.size
        if n >= min_per_partition:
            tasks.append((part,))
            continue
        if group and max_per_partition and size + n > max_per_partition:
            tasks.append(tuple(group))
            group, size = [], 0
        group.append(part)
        size += n
        if size >= min_per_partition:
            tasks.append(tuple(group))
            group, size = [], 0
    if group:
        tasks.append(tuple(group))
    return tasks


def plan_partitions(
    ranges: list[QueueRange], *, min_partitions: int | None, max_per_partition: int | None, min_per_partition: int
) -> list[tuple[QueueRange, ...]]:
    """The ranges of a query (or micro-batch) as the work of its tasks: split (``split_ranges``), then small parts
    grouped (``group_ranges``), unless ``min_partitions`` asks for parallelism."""
    parts = split_ranges(ranges, min_partitions=min_partitions, max_per_partition=max_per_partition)
    if min_partitions:
        return [(part,) for part in parts]
    return group_ranges(parts, min_per_partition=min_per_partition, max_per_partition=max_per_partition)


def split_ranges(
    ranges: list[QueueRange], *, min_partitions: int | None = None, max_per_partition: int | None = None
) -> list[QueueRange]:
    """Empty ranges dropped; ranges above ``max_per_partition`` cut evenly; then, while there are fewer parts
    than ``min_partitions``, every range is cut in proportion to its share of all messages (as Spark's Kafka
    source does). The parts of a range are contiguous, so reading all parts reads the range exactly once."""
    ranges = sorted((r for r in ranges if r.end > r.start), key=range_order)
    if not (max_per_partition or min_partitions):
        return ranges  # (no range is cut)
    parts = [max(1, math.ceil(r.size / max_per_partition)) if max_per_partition else 1 for r in ranges]
    if min_partitions and sum(parts) < min_partitions:
        total = sum(r.size for r in ranges)
        parts = [max(n, round(r.size / total * min_partitions)) for n, r in zip(parts, ranges, strict=True)]
    out = []
    for r, n in zip(ranges, parts, strict=True):
        n = min(n, r.size)
        if n == 1:
            out.append(r)
            continue
        for i in range(n):
            lo = r.start + r.size * i // n
            hi = r.start + r.size * (i + 1) // n
            out.append(replace(r, start=lo, end=hi))
    return out
