"""Lag from a streaming query's progress."""
from __future__ import annotations

import json

from rmq_spark.progress import query_lag


def test_lag_per_source_from_latest_and_end_offsets():
    progress = {"sources": [
        {"description": "rocketmq", "endOffset": json.dumps({"T": {"broker-a/0": 10, "broker-a/1": 5}}),
         "latestOffset": json.dumps({"T": {"broker-a/0": 14, "broker-a/1": 5, "broker-b/0": 3}})},
        {"description": "other", "endOffset": "{}", "latestOffset": None},
    ]}
    lag, other = query_lag(json.dumps(progress))
    assert (lag.total, lag.min, lag.max, lag.queues) == (7, 0, 4, 3) and abs(lag.avg - 7 / 3) < 1e-9
    assert other is None
