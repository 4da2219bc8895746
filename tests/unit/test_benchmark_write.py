"""benchmarks.write's report: which ratios it gives, with their targets, and which lines it runs."""

from __future__ import annotations

import pytest

from benchmarks.write import ALL_LINES, KAFKA_LINES, ROCKETMQ_LINES, _lines, ratios


def test_the_ratios_are_those_whose_two_lines_ran_with_their_targets():
    results = {
        "java-produce": {"msgs_per_s": 200_000},
        "spark-write": {"msgs_per_s": 150_000},
        "spark-write-eo": {"msgs_per_s": 30_000},
        "java-transactional": {"msgs_per_s": 60_000},
        "spark-write-stream": {"error": "RuntimeError: boom"},
    }
    got = {r["ratio"]: r for r in ratios(results)}
    assert got["spark-write / java-produce"] == {
        "ratio": "spark-write / java-produce",
        "value": 0.75,
        "target": 1.0,
        "met": False,
    }
    assert got["spark-write-eo / spark-write"]["value"] == 0.2 and got["spark-write-eo / spark-write"]["met"] is False
    assert got["java-transactional / spark-write"] == {"ratio": "java-transactional / spark-write", "value": 0.4}
    assert not any("spark-write-stream" in name or "kafka" in name for name in got)


def test_the_default_lines_leave_kafka_out_unless_asked():
    assert _lines(None, kafka=False) == list(ROCKETMQ_LINES)
    assert _lines(None, kafka=True) == list(ROCKETMQ_LINES + KAFKA_LINES)
    assert _lines("spark-write-eo, java-transactional", kafka=False) == ["spark-write-eo", "java-transactional"]
    assert set(ALL_LINES) == set(ROCKETMQ_LINES) | set(KAFKA_LINES)
    with pytest.raises(SystemExit, match="unknown line"):
        _lines("spark-write,nope", kafka=False)
