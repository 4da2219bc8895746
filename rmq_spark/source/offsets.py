"""Offsets: the QueueRange of one partition and the canonical offset JSON (``{"Topic": {"broker-a/0": 42}}``) that
Spark stores and compares as a string.

The end of a streaming query's first batch also carries that batch's start under ``START_KEY`` (not a legal topic
name): Spark logs no start for a Python source, and a batch 0 replayed after a crash must read from the start it was
planned with, not from a start resolved again (docs/DESIGN.md §8). The offsets of a startingOffsets=latest stream
carry, under ``START_TIME_KEY``, the time its start resolved latest: every batch's end, so a restart keeps it."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from rmq_spark.client.model import MessageQueue, queue_order
from rmq_spark.source.offset_specs import PLANNED_AT_KEY, START_KEY, START_TIME_KEY, queue_offsets


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


def range_order(r: QueueRange) -> tuple[tuple[str, str, int], int, int]:
    """QueueRange's order as a sort key (a sort by it compares no dataclasses)."""
    return queue_order(r.queue), r.start, r.end


@dataclass(frozen=True)
class _Layout:
    """A set of queues in the canonical order of the offset JSON: per topic, its queues' keys and the queues."""

    queues: frozenset[MessageQueue]
    topics: tuple[tuple[str, tuple[str, ...], tuple[MessageQueue, ...]], ...]


# The sets of queues laid out last: a stream's every batch end and its latest offsets name the same queues, so
# each is sorted once, not once per batch.
_LAYOUTS = 4
_layouts: list[_Layout] = []


def _layout(queues: Collection[MessageQueue]) -> _Layout:
    """The canonical order of ``queues`` (sorted by topic, broker, then queue id numerically)."""
    for layout in _layouts:
        if queues == layout.queues:
            return layout
    topics: dict[str, list[MessageQueue]] = {}
    for mq in sorted(queues, key=queue_order):
        topics.setdefault(mq.topic, []).append(mq)
    layout = _Layout(
        frozenset(queues), tuple((topic, tuple(mq.key for mq in mqs), tuple(mqs)) for topic, mqs in topics.items())
    )
    _layouts[:] = [layout, *_layouts[: _LAYOUTS - 1]]
    return layout


def offsets_to_json(
    offsets: Mapping[MessageQueue, int],
    *,
    start: Mapping[MessageQueue, int] | None = None,
    start_time: int | None = None,
    planned_at: int | None = None,
) -> dict[str, Any]:
    """Per-queue offsets → the nested dict, topics and queue keys in canonical order (sorted by broker, then
    queue id numerically), so equal offsets always serialize to the same JSON string; ``start``, when given, is
    recorded under ``START_KEY``, then ``start_time`` under ``START_TIME_KEY``, then ``planned_at`` under
    ``PLANNED_AT_KEY`` (last)."""
    offset = offsets.__getitem__
    out: dict[str, Any] = {
        topic: dict(zip(keys, map(offset, mqs), strict=True)) for topic, keys, mqs in _layout(offsets.keys()).topics
    }
    if start is not None:
        out[START_KEY] = offsets_to_json(start)
    if start_time is not None:
        out[START_TIME_KEY] = start_time
    if planned_at is not None:
        out[PLANNED_AT_KEY] = planned_at
    return out


def _nested(data: Mapping[str, Any] | str) -> Mapping[str, Any]:
    return json.loads(data) if isinstance(data, str) else data


def offsets_from_json(data: Mapping[str, Any] | str) -> dict[MessageQueue, int]:
    """The nested dict (or its JSON text) → per-queue offsets (a recorded start is not among them)."""
    return queue_offsets(_nested(data))


def recorded_start(data: Mapping[str, Any] | str) -> dict[MessageQueue, int] | None:
    """The batch start an end recorded (``offsets_to_json(start=...)``), or None."""
    start = _nested(data).get(START_KEY)
    return None if start is None else queue_offsets(start)


def recorded_planned_at(data: Mapping[str, Any] | str) -> int | None:
    """When (ms) the batch that ends at these offsets was planned, as they carry it; None where they do not (the
    initial offsets, or a checkpoint of a release before they did)."""
    return _recorded_ms(data, PLANNED_AT_KEY)


def recorded_start_time(data: Mapping[str, Any] | str) -> int | None:
    """The time (ms) a startingOffsets=latest stream resolved latest at its start, as its offsets carry it; None
    where they do not (another start, or a checkpoint of a release before they did)."""
    return _recorded_ms(data, START_TIME_KEY)


def _recorded_ms(data: Mapping[str, Any] | str, key: str) -> int | None:
    found = _nested(data).get(key)
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def canonical_json(offsets: Mapping[MessageQueue, int]) -> str:
    return json.dumps(offsets_to_json(offsets), separators=(",", ":"))
