"""Filters pushed down by Spark, turned into a narrower plan: fewer queues, tighter offset ranges, a tag filter.

Exact narrowings (topic, brokerName, queueId, queueOffset, tags) are reported to Spark as handled; storeTimestamp
bounds narrow the ranges through the broker's time index but are left for Spark to re-check.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql.datasource import EqualTo, Filter, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

from rmq_spark.client.model import FilterExpression, MessageQueue
from rmq_spark.options import SourceOptions
from rmq_spark.source.offsets import QueueRange

_INF = 2**63 - 1
# the filters that may narrow the plan: a column compared with a value (any other, Not among them, is Spark's)
_COMPARISONS = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, In)


@dataclass(frozen=True)
class Narrowing:
    """What the pushed filters allow: None means unconstrained."""

    topics: frozenset[str] | None = None
    brokers: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    offset_range: tuple[int, int] = (0, _INF)  # [lo, hi)
    time_range_ms: tuple[int, int] = (0, _INF)  # [lo, hi)
    tags: frozenset[str] | None = None

    def allows(self, mq: MessageQueue) -> bool:
        return (
            (self.topics is None or mq.topic in self.topics)
            and (self.brokers is None or mq.broker_name in self.brokers)
            and (self.queue_ids is None or mq.queue_id in self.queue_ids)
        )

    def clip(self, r: QueueRange, by_time: tuple[int, int] | None = None) -> QueueRange:
        lo, hi = self.offset_range
        if by_time is not None:
            lo, hi = max(lo, by_time[0]), min(hi, by_time[1])
        start, end = max(r.start, lo), min(r.end, hi)
        return dataclasses.replace(r, start=start, end=max(start, end))

    def filter_within(self, current: FilterExpression) -> FilterExpression:
        """The filter to pull with: ``current`` narrowed to the pushed tags (``push`` has intersected those with
        ``current``'s; no tag left is an empty narrowing, which reads nothing)."""
        return current if not self.tags else FilterExpression.of_tags(self.tags)

    @property
    def empty(self) -> bool:
        return (
            self.offset_range[0] >= self.offset_range[1]
            or self.time_range_ms[0] >= self.time_range_ms[1]
            or any(s is not None and not s for s in (self.topics, self.brokers, self.queue_ids, self.tags))
        )


def _ms(value: object, *, ceil: bool) -> int | None:
    if not isinstance(value, dt.datetime):
        return None
    if value.tzinfo is None:
        value = value.astimezone()  # Spark hands naive datetimes in the session's local time zone
    us = int(value.timestamp() * 1_000_000)
    return -(-us // 1000) if ceil else us // 1000


def _intersect(current: frozenset | None, values: Iterable) -> frozenset:
    values = frozenset(values)
    return values if current is None else current & values


def push(filters: list[Filter], options: SourceOptions) -> tuple[Narrowing, list[Filter]]:
    """The narrowing the filters allow, and the filters Spark must still evaluate."""
    n = Narrowing()
    rest: list[Filter] = []
    for f in filters:
        if not isinstance(f, _COMPARISONS):
            rest.append(f)
            continue
        col = f.attribute[0] if len(f.attribute) == 1 else None
        handled = True
        values = (f.value,) if isinstance(f, EqualTo) else tuple(f.value) if isinstance(f, In) else None
        if col in ("topic", "brokerName", "tags") and values is not None and all(isinstance(v, str) for v in values):
            if col == "topic":
                n = dataclasses.replace(n, topics=_intersect(n.topics, values))
            elif col == "brokerName":
                n = dataclasses.replace(n, brokers=_intersect(n.brokers, values))
            elif options.filter.type == "TAG" and all(_tag_name(v) for v in values):
                n = dataclasses.replace(n, tags=_intersect(n.tags, values))
            else:
                handled = False
        elif col == "queueId" and values is not None and all(isinstance(v, int) for v in values):
            n = dataclasses.replace(n, queue_ids=_intersect(n.queue_ids, values))
        elif col == "queueOffset" and isinstance(f.value, int) and not isinstance(f, In):
            lo, hi = n.offset_range
            v = f.value
            bounds = {
                EqualTo: (v, v + 1),
                GreaterThan: (v + 1, _INF),
                GreaterThanOrEqual: (v, _INF),
                LessThan: (0, v),
                LessThanOrEqual: (0, v + 1),
            }.get(type(f))
            if bounds is None:
                handled = False
            else:
                n = dataclasses.replace(n, offset_range=(max(lo, bounds[0]), min(hi, bounds[1])))
        elif col == "storeTimestamp" and type(f) in (
            GreaterThan,
            GreaterThanOrEqual,
            LessThan,
            LessThanOrEqual,
            EqualTo,
        ):
            floor_ms, ceil_ms = _ms(f.value, ceil=False), _ms(f.value, ceil=True)
            if floor_ms is not None and ceil_ms is not None:  # (a datetime: both)
                lo, hi = n.time_range_ms
                window = {
                    GreaterThan: (floor_ms + 1, _INF),
                    GreaterThanOrEqual: (ceil_ms, _INF),
                    LessThan: (0, ceil_ms),
                    LessThanOrEqual: (0, floor_ms + 1),
                    EqualTo: (ceil_ms, floor_ms + 1),
                }[type(f)]
                n = dataclasses.replace(n, time_range_ms=(max(lo, window[0]), min(hi, window[1])))
            rest.append(f)  # narrowed through the time index, re-checked by Spark
            continue
        else:
            handled = False
        if not handled:
            rest.append(f)
    if n.tags is not None and options.filter.tags is not None:
        n = dataclasses.replace(n, tags=n.tags & options.filter.tags)
    return n, rest


def _tag_name(value: str) -> bool:
    """True for a value a TAG expression can name as it is (not ``*``, no ``||``, no edge spaces)."""
    return bool(value) and value == value.strip() and value != "*" and "||" not in value
