"""How far a streaming query is behind the brokers, and how many messages it skipped, from its progress (the PySpark
source API has no custom metrics: the source reports the brokers' latest offsets through reportLatestOffset, and
beside them, under ``SKIPPED_KEY``, the messages it skipped under failOnDataLoss=false)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rmq_spark.source.offset_specs import is_annotation
from rmq_spark.source.skipped import SKIPPED_KEY

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lag:
    """Messages between a batch's end offsets and the brokers' latest offsets, in total and per queue."""

    total: int
    min: int
    avg: float
    max: int
    queues: int


def _as_dict(value: Any) -> dict:
    if value is None:
        return {}
    return json.loads(value) if isinstance(value, str) else dict(value)


def source_lag(source_progress: Mapping[str, Any]) -> Lag | None:
    """The lag of one entry of ``progress["sources"]``; None when the source did not report latest offsets."""
    latest, end = _as_dict(source_progress.get("latestOffset")), _as_dict(source_progress.get("endOffset"))
    if not latest:
        return None
    behind = [
        max(0, int(off) - int(end.get(topic, {}).get(key, 0)))
        for topic, queues in latest.items()
        if not is_annotation(topic)
        for key, off in queues.items()
    ]
    if not behind:
        return None
    return Lag(sum(behind), min(behind), sum(behind) / len(behind), max(behind), len(behind))


def query_lag(progress: Mapping[str, Any]) -> list[Lag | None]:
    """The lag of every source of a query progress (``query.lastProgress`` or a listener event's ``json``)."""
    progress = _as_dict(progress)
    return [source_lag(s) for s in progress.get("sources", [])]


def source_skipped(source_progress: Mapping[str, Any]) -> int:
    """The messages one entry of ``progress["sources"]`` skipped since its query started (0 when none)."""
    skipped = _as_dict(source_progress.get("latestOffset")).get(SKIPPED_KEY, {})
    return sum(int(n) for queues in skipped.values() for n in queues.values())


def query_skipped(progress: Mapping[str, Any]) -> list[int]:
    """The messages every source of a query progress skipped under failOnDataLoss=false (deleted by retention
    before they were read) since the query started, as of the trigger's planning."""
    return [source_skipped(s) for s in _as_dict(progress).get("sources", [])]


def lag_listener():
    """A StreamingQueryListener that logs each rocketmq source's lag after every trigger, and, as a warning, the
    messages a source skipped under failOnDataLoss=false since the last trigger:
    ``spark.streams.addListener(rmq_spark.source.progress.lag_listener())``. Its lines go to logger
    ``rmq_spark.source.progress`` (the lag at INFO); where the application configured no logging (no handler on the
    way to the root logger), it prints them to stderr itself, since asking for the listener is asking for its
    lines."""
    from pyspark.sql.streaming import StreamingQueryListener

    if not log.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
    if log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)

    class LagListener(StreamingQueryListener):
        def __init__(self) -> None:
            super().__init__()
            self.skipped: dict[tuple[str, int], int] = {}  # (query id, source) -> skipped messages last reported

        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            p = event.progress
            query = p.name or p.id
            for lag in query_lag(p.json):
                if lag is not None:
                    log.info(
                        "query %s batch %d: %d messages behind (per queue min %d, avg %.1f, max %d)",
                        query,
                        p.batchId,
                        lag.total,
                        lag.min,
                        lag.avg,
                        lag.max,
                    )
            for source, total in enumerate(query_skipped(p.json)):
                more = total - self.skipped.get((p.id, source), 0)
                if more > 0:
                    log.warning(
                        "query %s batch %d: %d messages skipped (deleted before they were read, "
                        "failOnDataLoss=false), %d since the query started",
                        query,
                        p.batchId,
                        more,
                        total,
                    )
                self.skipped[(p.id, source)] = total

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    return LagListener()
