"""Admission control of a micro-batch: how far each queue may be read under the trigger's limits (as Spark's Kafka
source's ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` with ``maxTriggerDelay``, and Trigger.AvailableNow's
cap). Pure: the stream reader hands in the offsets, the limit and the time waited."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from rmq_spark.client.model import MessageQueue


@dataclass(frozen=True)
class TriggerLimits:
    """The per-trigger options: at most ``max_messages`` per batch; no batch of fewer than ``min_messages`` until
    ``max_delay_ms`` passed since the last one."""

    max_messages: int | None = None
    min_messages: int | None = None
    max_delay_ms: int = 0

    @property
    def time_dependent(self) -> bool:
        """Whether the same offsets may be admitted differently later (a minimum waits for the delay)."""
        return self.min_messages is not None


def prorate(
    start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int], limit: int
) -> dict[MessageQueue, int]:
    """End offsets that read at most about ``limit`` messages, each queue getting a share proportional to its
    backlog (as Spark's Kafka source does); every queue with a backlog advances by at least one."""
    backlog = {mq: max(0, latest[mq] - start.get(mq, latest[mq])) for mq in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    end = {}
    for mq, size in backlog.items():
        share = math.floor(limit * size / total) if size else 0
        end[mq] = start.get(mq, latest[mq]) + min(size, max(share, 1 if size else 0))
    return end


def capped(latest: int, begin: int, cap: int) -> int:
    """How far a queue at ``begin`` may be read under Trigger.AvailableNow, when its end is ``latest`` and the
    trigger captured ``cap`` (a queue the trigger did not see has its start as cap). A queue whose end fell below
    its start (reset) passes as is, for planning's data-loss rule."""
    return latest if latest < begin else max(min(latest, cap), begin)


def admit(
    begin: Mapping[MessageQueue, int],
    target: Mapping[MessageQueue, int],
    limit: ReadLimit,
    limits: TriggerLimits,
    *,
    waited_ms: float,
    available_now: bool,
) -> dict[MessageQueue, int]:
    """The end of the next batch from ``begin``, given how far each queue may be read (``target``), Spark's
    ``limit`` and the trigger options; ``waited_ms`` since the last batch. Queues whose target is below their
    start (reset) pass through as they are."""
    end = dict(target)
    if isinstance(limit, ReadAllAvailable):
        return end
    moving = {mq: o for mq, o in target.items() if o >= begin.get(mq, o)}
    if not moving:
        return end
    backlog = sum(o - begin.get(mq, o) for mq, o in moving.items())
    if limits.min_messages and backlog < limits.min_messages and waited_ms < limits.max_delay_ms and not available_now:
        end.update({mq: begin.get(mq, t) for mq, t in moving.items()})
        return end
    max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else limits.max_messages
    if max_rows:
        end.update(prorate(begin, moving, max_rows))
    return end
