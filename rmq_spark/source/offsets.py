"""Offsets: resolving offset specs to per-queue offsets, the QueueRange of one partition, range splitting,
and the canonical offset JSON (``{"Topic": {"broker-a/0": 42}}``) that Spark stores and compares as a string.

The end of a streaming query's first batch also carries that batch's start under ``START_KEY`` (not a legal topic
name): Spark logs no start for a Python source, and a batch 0 replayed after a crash must read from the start it was
planned with, not from a start resolved again (docs/DESIGN.md §8)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from rmq_spark.client.base import Answers
from rmq_spark.client.errors import BrokerUnavailableError
from rmq_spark.client.model import MessageQueue
from rmq_spark.options import (START_KEY, ByTimestamp, Committed, Edge, OffsetSpec,
                               OptionError, SpecificOffsets, queue_offsets)


@dataclass(frozen=True, order=True)
class QueueRange:
    """Offsets ``[start, end)`` of one queue: the unit of work of one reader task. ``sparse``: the queue's offsets
    may have gaps by design (a compaction topic)."""

    queue: MessageQueue
    start: int
    end: int
    sparse: bool = field(default=False, compare=False)

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def offsets_to_json(offsets: Mapping[MessageQueue, int], *,
                    start: Mapping[MessageQueue, int] | None = None) -> dict[str, dict]:
    """Per-queue offsets → the nested dict, topics and queue keys in canonical order (sorted by broker, then
    queue id numerically), so equal offsets always serialize to the same JSON string; ``start``, when given, is
    recorded under ``START_KEY`` (last)."""
    out: dict[str, dict] = {}
    for topic, broker, qid, offset in sorted((mq.topic, mq.broker_name, mq.queue_id, o) for mq, o in offsets.items()):
        out.setdefault(topic, {})[f"{broker}/{qid}"] = int(offset)
    if start is not None:
        out[START_KEY] = offsets_to_json(start)
    return out


def _nested(data: Mapping[str, Mapping] | str) -> Mapping[str, Mapping]:
    return json.loads(data) if isinstance(data, str) else data


def offsets_from_json(data: Mapping[str, Mapping] | str) -> dict[MessageQueue, int]:
    """The nested dict (or its JSON text) → per-queue offsets (a recorded start is not among them)."""
    return queue_offsets(_nested(data))


def recorded_start(data: Mapping[str, Mapping] | str) -> dict[MessageQueue, int] | None:
    """The batch start an end recorded (``offsets_to_json(start=...)``), or None."""
    start = _nested(data).get(START_KEY)
    return None if start is None else queue_offsets(start)


def canonical_json(offsets: Mapping[MessageQueue, int]) -> str:
    return json.dumps(offsets_to_json(offsets), separators=(",", ":"))


def _merge(*parts: Answers) -> Answers:
    out = Answers()
    for p in parts:
        out = out.merge(p)
    return out


class OffsetResolver:
    """Turns an offset spec into an offset per queue of those asked for (queues it names besides are not its
    concern: ``check_named``), asking each broker concurrently. With ``partial``, queues whose broker cannot answer
    now are left out (in ``Answers.failed``) instead of failing the call."""

    def __init__(self, client, *, partial: bool = False) -> None:
        self.client = client
        self.partial = partial

    def resolve(self, spec: OffsetSpec, queues: list[MessageQueue]) -> Answers:
        if not queues:
            return Answers()
        if spec is Edge.EARLIEST:
            return self.client.min_offsets(queues, partial=self.partial)
        if spec is Edge.LATEST:
            return self.client.max_offsets(queues, partial=self.partial)
        if isinstance(spec, Committed):
            return self._committed(spec, queues)
        if isinstance(spec, SpecificOffsets):
            chosen = {mq: spec.offsets.get(mq, spec.default) for mq in queues}
            return _merge(Answers({mq: o for mq, o in chosen.items() if o >= 0}),
                          *(self.resolve(edge, [mq for mq, o in chosen.items() if o == edge]) for edge in Edge))
        if isinstance(spec, ByTimestamp):
            per_queue = spec.per_queue if spec.per_queue is not None else {mq: spec.timestamp for mq in queues}
            by_ts: dict[int, list[MessageQueue]] = {}
            for mq in queues:
                if mq in per_queue:
                    by_ts.setdefault(per_queue[mq], []).append(mq)
            rest = [mq for mq in queues if mq not in per_queue]
            return _merge(*(self.client.search_offsets(mqs, ts, "lower", partial=self.partial)
                            for ts, mqs in by_ts.items()),
                          self.resolve(spec.default, rest))
        raise TypeError(f"not an offset spec: {spec!r}")

    def _committed(self, spec: Committed, queues: list[MessageQueue]) -> Answers:
        stored = self.client.query_consumer_offsets(spec.group, queues, partial=self.partial)
        missing = [mq for mq, off in stored.items() if off is None or off < 0]
        if missing and spec.fallback is None:
            raise OptionError(f"consumer group {spec.group!r} has no committed offset for "
                              + ", ".join(str(mq) for mq in missing[:10])
                              + (" ..." if len(missing) > 10 else "")
                              + "; set startingOffsetsFallback to earliest or latest to start those queues there")
        found = Answers({mq: off for mq, off in stored.items() if off is not None and off >= 0}, stored.failed)
        return _merge(found, self.resolve(spec.fallback, missing))


def check_named(spec: OffsetSpec, queues: Iterable[MessageQueue], *, waits: bool) -> list[str]:
    """OptionError when ``spec`` names a queue of a topic the query does not read, or one that its broker group,
    in the routes now (``queues``: the query's queues there), does not have. A named queue whose broker group is
    not in the routes now may be away (or misspelt): a stream (``waits``) starts it once the group is back, and gets
    a note per such queue to log; a batch cannot wait and fails naming them."""
    named = spec.offsets if isinstance(spec, SpecificOffsets) else getattr(spec, "per_queue", None)
    if not named:
        return []
    known = set(queues)
    topics = {mq.topic for mq in known}
    groups = {(mq.topic, mq.broker_name) for mq in known}
    away = []
    for mq in sorted(named):
        if mq.topic not in topics:
            raise OptionError(f"option {spec.option} names topic {mq.topic!r}, which this query does not read "
                              f"(it reads {', '.join(sorted(topics))})")
        if mq in known:
            continue
        if (mq.topic, mq.broker_name) in groups:
            raise OptionError(f"option {spec.option} names queue {mq.key} of topic {mq.topic!r}, which does not "
                              "exist; its queues are "
                              + ", ".join(q.key for q in sorted(known) if q.topic == mq.topic))
        in_route = sorted({b for t, b in groups if t == mq.topic})
        away.append(f"option {spec.option} names queue {mq.key} of topic {mq.topic!r}, whose broker group is not "
                    f"in the topic's route now (it has {', '.join(in_route)}): check the name")
    if away and not waits:
        raise BrokerUnavailableError("; ".join(away) + "; if that broker group is stopped or restarting, read when "
                                     "it is back")
    return away


def entering_spec(spec: OffsetSpec) -> OffsetSpec:
    """Where a stream starts a queue that enters after its start (a new queue, or one whose broker group was away):
    where ``spec`` puts it when it names the queue (offsets or times) or under committed (the group's offset, else
    startingOffsetsFallback); any other queue at its first offset, as Spark's Kafka source reads new partitions."""
    if isinstance(spec, Committed):
        return spec
    if isinstance(spec, (SpecificOffsets, ByTimestamp)):
        return replace(spec, default=Edge.EARLIEST)
    return Edge.EARLIEST


def group_ranges(parts: list[QueueRange], *, min_per_partition: int,
                 max_per_partition: int | None = None) -> list[tuple[QueueRange, ...]]:
    """The parts, in order, as the work of tasks: consecutive parts of fewer than ``min_per_partition`` messages go
    to one task until it holds that many (never more than ``max_per_partition``); a larger part is a task of its
    own. 0 gives every part its own task."""
    tasks: list[tuple[QueueRange, ...]] = []
    group: list[QueueRange] = []
    size = 0
    for part in parts:
        if part.size >= min_per_partition:
            tasks.append((part,))
            continue
        if group and max_per_partition and size + part.size > max_per_partition:
            tasks.append(tuple(group))
            group, size = [], 0
        group.append(part)
        size += part.size
        if size >= min_per_partition:
            tasks.append(tuple(group))
            group, size = [], 0
    if group:
        tasks.append(tuple(group))
    return tasks


def plan_partitions(ranges: list[QueueRange], *, min_partitions: int | None, max_per_partition: int | None,
                    min_per_partition: int) -> list[tuple[QueueRange, ...]]:
    """The ranges of a query (or micro-batch) as the work of its tasks: split (``split_ranges``), then small parts
    grouped (``group_ranges``), unless ``min_partitions`` asks for parallelism."""
    parts = split_ranges(ranges, min_partitions=min_partitions, max_per_partition=max_per_partition)
    if min_partitions:
        return [(part,) for part in parts]
    return group_ranges(parts, min_per_partition=min_per_partition, max_per_partition=max_per_partition)


def split_ranges(ranges: list[QueueRange], *, min_partitions: int | None = None,
                 max_per_partition: int | None = None) -> list[QueueRange]:
    """Empty ranges dropped; ranges above ``max_per_partition`` cut evenly; then, while there are fewer parts
    than ``min_partitions``, every range is cut in proportion to its share of all messages (as Spark's Kafka
    source does). The parts of a range are contiguous, so reading all parts reads the range exactly once."""
    ranges = [r for r in ranges if r.size > 0]
    parts_of = {r: 1 for r in ranges}
    if max_per_partition:
        parts_of = {r: max(1, math.ceil(r.size / max_per_partition)) for r in ranges}
    total_parts = sum(parts_of.values())
    if min_partitions and total_parts < min_partitions:
        total = sum(r.size for r in ranges)
        parts_of = {r: max(parts_of[r], round(r.size / total * min_partitions)) for r in ranges}
    out = []
    for r in sorted(ranges):
        n = min(parts_of[r], r.size)
        for i in range(n):
            lo = r.start + r.size * i // n
            hi = r.start + r.size * (i + 1) // n
            out.append(replace(r, start=lo, end=hi))
    return out
