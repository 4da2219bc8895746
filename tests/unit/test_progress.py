"""Lag from a streaming query's progress."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import types

from rmq_spark.source.progress import lag_listener, query_lag, query_skipped


def test_lag_per_source_from_latest_and_end_offsets():
    progress = {
        "sources": [
            {
                "description": "rocketmq",
                "endOffset": json.dumps({"T": {"broker-a/0": 10, "broker-a/1": 5}}),
                "latestOffset": json.dumps({"T": {"broker-a/0": 14, "broker-a/1": 5, "broker-b/0": 3}}),
            },
            {"description": "other", "endOffset": "{}", "latestOffset": None},
        ]
    }
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


def _progress(batch: int, latest: dict, end: dict) -> dict:
    return {
        "name": "q",
        "id": "i",
        "batchId": batch,
        "sources": [{"endOffset": json.dumps(end), "latestOffset": json.dumps(latest)}],
    }


def test_skipped_messages_are_read_from_the_progress_and_are_not_a_topic_of_the_lag():
    latest = {"T": {"b/0": 14}, "$skipped": {"T": {"b/0": 30, "b/1": 2}}}
    progress = _progress(4, latest, {"T": {"b/0": 10}})
    assert query_skipped(json.dumps(progress)) == [32]
    (lag,) = query_lag(progress)
    assert (lag.total, lag.queues) == (4, 1)
    assert query_skipped(_progress(4, {"T": {"b/0": 1}}, {})) == [0]


def test_the_lag_listener_warns_when_more_messages_were_skipped(caplog):
    listener = lag_listener()

    def report(batch: int, skipped: int) -> None:
        p = _progress(batch, {"T": {"b/0": 5}, "$skipped": {"T": {"b/0": skipped}}}, {"T": {"b/0": 5}})
        listener.onQueryProgress(
            types.SimpleNamespace(
                progress=types.SimpleNamespace(json=json.dumps(p), **{k: p[k] for k in ("name", "id", "batchId")})
            )
        )

    with caplog.at_level(logging.INFO, "rmq_spark.source.progress"):
        report(1, 30)
        report(2, 30)
        report(3, 42)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "query q batch 1: 30 messages skipped (deleted before they were read, failOnDataLoss=false), 30 since the "
        "query started",
        "query q batch 3: 12 messages skipped (deleted before they were read, failOnDataLoss=false), 42 since the "
        "query started",
    ]
