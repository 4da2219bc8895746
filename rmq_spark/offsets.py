"""Offsets: resolving start/end specs to per-queue offsets, the QueueRange of one partition, range splitting,
and the canonical offset JSON (``{"Topic": {"broker-a/0": 42}}``) that Spark stores and compares as a string."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from rmq_spark.client.model import MessageQueue
from rmq_spark.options import OptionError, SourceOptions, parse_queue_json

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True, order=True)
class QueueRange:
    """Offsets ``[start, end)`` of one queue: the unit of work of one reader task."""

    queue: MessageQueue
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def offsets_to_json(offsets: Mapping[MessageQueue, int]) -> dict[str, dict[str, int]]:
    """Per-queue offsets → the nested dict, topics and queue keys in canonical order (sorted by broker, then
    queue id numerically), so equal offsets always serialize to the same JSON string."""
    out: dict[str, dict[str, int]] = {}
    for mq in sorted(offsets):
        out.setdefault(mq.topic, {})[mq.key] = int(offsets[mq])
    return {t: out[t] for t in sorted(out)}


def offsets_from_json(data: Mapping[str, Mapping[str, int]] | str) -> dict[MessageQueue, int]:
    """The nested dict (or its JSON text) → per-queue offsets."""
    if isinstance(data, str):
        data = json.loads(data)
    out = {}
    for topic, queues in data.items():
        for key, offset in queues.items():
            broker, _, qid = key.rpartition("/")
            out[MessageQueue(topic, broker, int(qid))] = int(offset)
    return out


def canonical_json(offsets: Mapping[MessageQueue, int]) -> str:
    return json.dumps(offsets_to_json(offsets), separators=(",", ":"))


class OffsetResolver:
    """Turns the start or end options into an offset per queue, asking each broker concurrently."""

    def __init__(self, client, options: SourceOptions) -> None:
        self.client = client
        self.options = options

    def _min(self, queues: list[MessageQueue]) -> dict[MessageQueue, int]:
        return self.client.min_offsets(queues) if queues else {}

    def _max(self, queues: list[MessageQueue]) -> dict[MessageQueue, int]:
        return self.client.max_offsets(queues) if queues else {}

    def _by_timestamp(self, queues: list[MessageQueue], per_queue: Mapping[MessageQueue, int]
                      ) -> dict[MessageQueue, int]:
        """First offset whose store time is >= the queue's timestamp (the queue's end when there is none)."""
        out: dict[MessageQueue, int] = {}
        by_ts: dict[int, list[MessageQueue]] = {}
        for mq in queues:
            by_ts.setdefault(per_queue[mq], []).append(mq)
        for ts, mqs in by_ts.items():
            out.update(self.client.search_offsets(mqs, ts, "lower"))
        return out

    def _specific(self, name: str, text: str, queues: list[MessageQueue], default: int) -> dict[MessageQueue, int]:
        wanted = offsets_from_json(parse_queue_json(name, text, what="offsets"))
        _check_known(name, wanted, queues)
        chosen = {mq: wanted.get(mq, default) for mq in queues}
        earliest = [mq for mq, o in chosen.items() if o == EARLIEST]
        latest = [mq for mq, o in chosen.items() if o == LATEST]
        for mq, o in chosen.items():
            if o < LATEST - 1:
                raise OptionError(f"option {name}: offset {o} for {mq} is not valid (use >= 0, -2 earliest, "
                                  "-1 latest)")
        chosen.update(self._min(earliest))
        chosen.update(self._max(latest))
        return chosen

    def _timestamps(self, name: str, per_queue_json: dict, queues: list[MessageQueue], default: int
                    ) -> dict[MessageQueue, int]:
        wanted = offsets_from_json(per_queue_json)
        _check_known(name, wanted, queues)
        named = [mq for mq in queues if mq in wanted]
        rest = [mq for mq in queues if mq not in wanted]
        out = self._by_timestamp(named, wanted)
        out.update(self._min(rest) if default == EARLIEST else self._max(rest))
        return out

    def start(self, queues: list[MessageQueue], *, default: str) -> dict[MessageQueue, int]:
        """Start offset per queue. Precedence as in Spark's Kafka source: startingTimestamp, then
        startingOffsetsByTimestamp, then startingOffsets (``default`` when unset)."""
        o = self.options
        if o.starting_timestamp is not None:
            return self._by_timestamp(queues, {mq: o.starting_timestamp for mq in queues})
        if o.starting_offsets_by_timestamp is not None:
            return self._timestamps("startingOffsetsByTimestamp", o.starting_offsets_by_timestamp, queues, EARLIEST)
        spec = o.starting_offsets or default
        if spec == "earliest":
            return self._min(queues)
        if spec == "latest":
            return self._max(queues)
        if spec == "committed":
            return self._committed(queues)
        return self._specific("startingOffsets", spec, queues, EARLIEST)

    def end(self, queues: list[MessageQueue]) -> dict[MessageQueue, int]:
        """End offset (exclusive) per queue for a batch query; same precedence with the ending options."""
        o = self.options
        if o.ending_timestamp is not None:
            return self._by_timestamp(queues, {mq: o.ending_timestamp for mq in queues})
        if o.ending_offsets_by_timestamp is not None:
            return self._timestamps("endingOffsetsByTimestamp", o.ending_offsets_by_timestamp, queues, LATEST)
        spec = o.ending_offsets or "latest"
        if spec == "latest":
            return self._max(queues)
        return self._specific("endingOffsets", spec, queues, LATEST)

    def _committed(self, queues: list[MessageQueue]) -> dict[MessageQueue, int]:
        group = self.options.consumer_group
        stored = self.client.query_consumer_offsets(group, queues) if queues else {}
        missing = [mq for mq, off in stored.items() if off is None or off < 0]
        fallback = self.options.starting_offsets_fallback
        if missing and fallback == "error":
            raise OptionError(f"consumer group {group!r} has no committed offset for "
                              + ", ".join(str(mq) for mq in missing[:10])
                              + (" ..." if len(missing) > 10 else "")
                              + "; set startingOffsetsFallback to earliest or latest to start those queues there")
        out = {mq: off for mq, off in stored.items() if off is not None and off >= 0}
        out.update(self._min(missing) if fallback == "earliest" else self._max(missing))
        return out


def _check_known(name: str, wanted: Mapping[MessageQueue, int], queues: Iterable[MessageQueue]) -> None:
    known = set(queues)
    topics = {mq.topic for mq in known}
    for mq in wanted:
        if mq.topic not in topics:
            raise OptionError(f"option {name} names topic {mq.topic!r}, which this query does not read "
                              f"(it reads {', '.join(sorted(topics))})")
        if mq not in known:
            raise OptionError(f"option {name} names queue {mq.key} of topic {mq.topic!r}, which does not exist; "
                              "its queues are " + ", ".join(q.key for q in sorted(known) if q.topic == mq.topic))


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
            out.append(QueueRange(r.queue, lo, hi))
    return out
