"""Lag from a streaming query's progress."""
from __future__ import annotations

import json
import subprocess
import sys

from rmq_spark.source.progress import query_lag


def test_lag_per_source_from_latest_and_end_offsets():
    progress = {"sources": [
        {"description": "rocketmq", "endOffset": json.dumps({"T": {"broker-a/0": 10, "broker-a/1": 5}}),
         "latestOffset": json.dumps({"T": {"broker-a/0": 14, "broker-a/1": 5, "broker-b/0": 3}})},
        {"description": "other", "endOffset": "{}", "latestOffset": None},
    ]}
    lag, other = query_lag(json.dumps(progress))
    assert (lag.total, lag.min, lag.max, lag.queues) == (7, 0, 4, 3) and abs(lag.avg - 7 / 3) < 1e-9
    assert other is None


def test_the_lag_listener_prints_its_lines_where_the_application_configured_no_logging():
    # a fresh interpreter: no logging configured, as in a plain PySpark driver
    probe = """
import json, types
from rmq_spark.source.progress import lag_listener
listener = lag_listener()
progress = {"name": "q", "id": "i", "batchId": 3, "sources": [{"endOffset": json.dumps({"T": {"b/0": 1}}),
                                                               "latestOffset": json.dumps({"T": {"b/0": 5}})}]}
listener.onQueryProgress(types.SimpleNamespace(progress=types.SimpleNamespace(json=json.dumps(progress), **{
    k: progress[k] for k in ("name", "id", "batchId")})))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "rmq_spark.source.progress: query q batch 3: 4 messages behind" in out.stderr
