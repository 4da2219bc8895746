"""Spark's own part of a Python streaming source's driver work, not a product path:
``format("rocketmq-floor")`` is a stand-in source with the connector's offset JSON (the same topics and queue keys)
whose queues each move by one message every ``every`` seconds, worked out from the clock, with no broker and no
planning. What its driver-side Python process spends per minute, and Spark's ``latestOffset`` phase, are the floor
under the connector's figures in ``benchmarks.scale``: the runner's socket protocol, the offsets' JSON both ways,
pickling the partitions, with the least a source that takes read limits and reports its latest offsets (as the
connector does) must do: an end that names every queue, the moved queues' ranges.

Registered by ``register(spark)`` in the benchmark's session only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition, ReadLimit
from pyspark.sql.types import StructType

SCHEMA = "queueOffset BIGINT"


class FloorSource(DataSource):
    """``format("rocketmq-floor")`` with options ``topics`` (comma-separated), ``queuesPerBroker`` and ``every``."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-floor"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        o = self.options
        return FloorReader(o["topics"].split(","), int(o["queuesPerBroker"]), float(o["every"]))


class FloorPartition(InputPartition):
    """The moved queues' ranges of one task: (topic, queue key, start, end)."""

    def __init__(self, ranges: list[tuple[str, str, int, int]]) -> None:
        self.ranges = ranges


class FloorReader(DataSourceStreamReader):
    """Every queue of ``topics`` (on brokers broker-0 and broker-1) moves by one every ``every`` seconds, the
    queues' steps spread evenly over that time."""

    def __init__(self, topics: list[str], queues_per_broker: int, every: float) -> None:
        keys = [f"broker-{b}/{q}" for b in range(2) for q in range(queues_per_broker)]
        n = len(topics) * len(keys)
        self.queues = [(t, k, i * every / n) for i, (t, k) in enumerate((t, k) for t in topics for k in keys)]
        self.every, self.t0 = every, time.monotonic()
        self.latest: dict = {}

    def initialOffset(self) -> dict:
        self.t0 = time.monotonic()
        return self._at(self.t0)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self.latest = self._at(time.monotonic())
        return self.latest

    def reportLatestOffset(self) -> dict:
        return self.latest

    def _at(self, now: float) -> dict:
        elapsed, every = now - self.t0, self.every
        end: dict[str, dict[str, int]] = {}
        for topic, key, phase in self.queues:
            end.setdefault(topic, {})[key] = int((elapsed + phase) // every)
        return end

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        moved = [
            (topic, key, start[topic][key], offset)
            for topic, queues in end.items()
            for key, offset in queues.items()
            if offset != start[topic][key]
        ]
        return [FloorPartition(moved[i::2]) for i in range(2)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        return iter(())

    def commit(self, end: dict) -> None:
        pass


def register(spark) -> None:
    """Make ``format("rocketmq-floor")`` known to ``spark``."""
    spark.dataSource.register(FloorSource)
