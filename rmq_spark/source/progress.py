"""How far a streaming query is behind the brokers, from its progress (the PySpark source API has no custom
metrics; the source reports the brokers' latest offsets through reportLatestOffset instead)."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Mapping

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
    behind = [max(0, int(off) - int(end.get(topic, {}).get(key, 0)))
              for topic, queues in latest.items() for key, off in queues.items()]
    if not behind:
        return None
    return Lag(sum(behind), min(behind), sum(behind) / len(behind), max(behind), len(behind))


def query_lag(progress: Mapping[str, Any]) -> list[Lag | None]:
    """The lag of every source of a query progress (``query.lastProgress`` or a listener event's ``json``)."""
    progress = _as_dict(progress)
    return [source_lag(s) for s in progress.get("sources", [])]


def lag_listener():
    """A StreamingQueryListener that logs each rocketmq source's lag after every trigger:
    ``spark.streams.addListener(rmq_spark.source.progress.lag_listener())``. Its lines go to logger ``rmq_spark.source.progress``
    at INFO; where the application configured no logging (no handler on the way to the root logger), it prints them
    to stderr itself, since asking for the listener is asking for its lines."""
    from pyspark.sql.streaming import StreamingQueryListener

    if not log.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
    if log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)

    class LagListener(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            for lag in query_lag(event.progress.json):
                if lag is not None:
                    log.info("query %s batch %d: %d messages behind (per queue min %d, avg %.1f, max %d)",
                             event.progress.name or event.progress.id, event.progress.batchId, lag.total,
                             lag.min, lag.avg, lag.max)

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    return LagListener()
