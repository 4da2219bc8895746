"""The benchmark harness end to end on a tiny data set: every line must run and read exactly what was loaded.

No timing is asserted; this guards the harness (and the readers it drives) against breaking silently.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 5_000  # 625 per queue: each line still reads every queue in many pulls


def test_quick_run_reads_every_message_on_every_line(tmp_path):
    from benchmarks.run import DEFAULT_LINES

    out = tmp_path / "quick.json"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--messages", str(MESSAGES), "--output", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-60:])
    assert out.is_file(), f"the harness wrote no results (exit {proc.returncode}):\n{tail}"
    report = json.loads(out.read_text())
    assert "error" not in report, f"{report['error']}\n{tail}"
    assert report["dataset"]["messages"] == MESSAGES

    lines = {row["line"]: row for row in report["lines"]}
    assert sorted(lines) == sorted(DEFAULT_LINES)
    for name, row in lines.items():
        assert row["error"] is None, f"{name}: {row['error']}\n{tail}"
        assert len(row["runs"]) == 1, name
        for run in row["runs"]:
            assert run["messages"] == MESSAGES, f"{name} read {run['messages']} of {MESSAGES} messages"
            assert run["seconds"] > 0, name
            assert run["rss"]["samples"] >= 1, name
        assert row["all_ok"], name
        assert row["msgs_per_s"] > 0, name
    # every line that knows body sizes read 100-byte bodies (the loader's fixed size); client-raw counts whole
    # pulled records and is larger
    for name, row in lines.items():
        if name != "client-raw":
            assert row["runs"][0]["bodyBytes"] == MESSAGES * 100, name
    assert lines["java-litepull"]["runs"][0].get("gaps") == 0
    assert "x_java-litepull" in lines["spark-batch"] and "x_java-ceiling" in lines["spark-batch"]
    # the Spark lines ran Python workers under this process tree and the sampler saw them
    assert lines["spark-batch"]["python_worker_mb"] > 0
    assert proc.returncode == 0, tail


def _scale(*args: str) -> tuple[dict, str]:
    """``python -m benchmarks.scale *args`` run to its end: the JSON it printed, and its output's tail."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
    assert proc.returncode == 0, tail
    return json.loads(proc.stdout[proc.stdout.index("{") : proc.stdout.rindex("}") + 1]), tail


def test_the_scale_profile_measures_a_small_query(tmp_path):
    """benchmarks.scale on 3 topics for a few seconds, a message to each queue every 2 s from the trickle's own
    process: the brokers' own request counts see the query's requests, and Spark's progress gives trigger durations
    and the queues each batch read. No warm-up but its least (until the query's batches read messages), a window
    of a few triggers (and until a batch in it read messages), Spark's JVM with the tests' flags."""
    result, tail = _scale(
        *"--topics 3 --queues-per-broker 2 --seconds 5 --warmup 0 --trickle-every 2 --test-jvm".split()
    )
    assert result["queues"] == 12 and result["triggers"] >= 1, tail
    assert result["trickle"]["sent"] > 0 and result["trickle"]["failed"] == 0, tail
    # the driver's held pulls and the tasks' reads are PULL_MESSAGE (a moved queue may need no GET_MAX_OFFSET)
    assert result["byCode"].get("PULL_MESSAGE", 0) > 0 and result["brokerRequestsPerSecond"] > 0, tail
    assert result["messagesPerQueuePerMinute"] > 0 and result["queuesReadPerQueuePerMinute"] > 0, tail
    assert result["latestOffsetMs"]["median"] is not None and result["driverPythonCpuSecondsPerMinute"] > 0, tail


def test_the_kafka_ratios_compare_engine_cpu_per_message_against_their_targets():
    """Pure arithmetic, no broker: the wall-clock ratios carry no target; engine CPU (Spark's JVM + Python
    workers) per message of ours over Kafka's is checked against its targets (benchmarks/README.md)."""
    from benchmarks.versus_kafka import cpu_per_million, ratios

    def row(line, msgs_per_s, spark, workers, broker_label):
        cpu = {"spark": spark, "python_workers": workers, "python": workers + 0.5, broker_label: 0.4}
        return {"line": line, "msgs_per_s": msgs_per_s, "cpu_per_1m": cpu_per_million(cpu, 2_000_000, broker_label)}

    rows = [
        row("spark-batch", 400_000, 3.0, 2.0, "shim"),
        row("spark-batch-narrow", 600_000, 1.0, 1.0, "shim"),
        row("spark-kafka", 300_000, 4.4, 0.0, "kafka"),
        row("spark-kafka-tuned", 1_000_000, 3.2, 0.0, "kafka"),
        row("spark-kafka-narrow", 900_000, 3.0, 0.0, "kafka"),
        {"line": "spark-stream", "msgs_per_s": None},
    ]
    assert rows[0]["cpu_per_1m"] == {"spark": 1.5, "python_workers": 1.0, "broker": 0.2, "engine": 2.5}
    found = {(r["measure"], r["ours"], r["theirs"]): r for r in ratios(rows)}
    assert len(found) == 7
    wall = found[("msgs/s", "spark-batch-narrow", "spark-kafka-tuned")]
    assert wall["ratio"] == 0.6 and wall["target"] is None and wall["met"] is None
    narrow = found[("engine CPU per message", "spark-batch-narrow", "spark-kafka-narrow")]
    assert abs(narrow["ratio"] - 2 / 3) < 1e-9 and narrow["target"] == 0.7 and narrow["met"] is True
    full = found[("engine CPU per message", "spark-batch", "spark-kafka-tuned")]
    assert full["ratio"] == 2.5 / 1.6 and full["met"] is False
    assert ratios(rows[:2]) == []  # no Kafka line measured: no ratios


def test_the_latency_ratios_compare_steady_percentiles_against_their_targets():
    """Pure arithmetic, no broker: ours (with a consumer group) over Spark's Kafka source tuned per percentile,
    against its targets (p50 <= 0.75, p99 <= 0.65); a line that failed or measured no steady state gives
    none. The report's one table of ratios holds both anchors' with their targets."""
    from benchmarks.versus_kafka import all_ratios, latency_md, latency_ratios, ratios_md

    ours = {"latency_ms": {"p50": 150.0, "p90": 200.0, "p99": 330.0, "max": 400.0}}
    theirs = {"latency_ms": {"p50": 200.0, "p90": 300.0, "p99": 480.0, "max": 900.0}}
    found = {r["measure"]: r for r in latency_ratios(ours, theirs)}
    assert found["latency p50"]["ratio"] == 0.75 and found["latency p50"]["met"] is True
    assert found["latency p99"]["ratio"] == 330 / 480 and found["latency p99"]["met"] is False
    assert latency_ratios(ours, {"error": "the Kafka line failed"}) == []
    assert [r["measure"] for r in latency_ratios(ours, {"latency_ms": {"p50": float("nan"), "p99": 480.0}})] == [
        "latency p99"
    ]
    phases = {k: {"p50": 1.0, "p90": 2.0} for k in ("addBatch", "walCommit", "triggerExecution")}
    lines = {
        name: {**r, "messages": 10, "sent": 10, "phases_ms": phases}
        for name, r in (("rocketmq", ours), ("spark-kafka-tuned", theirs))
    }
    latency = {
        "rate": 20_000,
        "seconds": 30,
        "rounds": [{"order": list(lines), "lines": lines, "ratios": latency_ratios(ours, theirs)}],
    }
    row = "| 1 | rocketmq then spark-kafka-tuned | rocketmq | 150 | 200 | 330 | 400 | 10 of 10 |"
    assert row in latency_md(latency)
    rows = [{"line": "spark-batch", "msgs_per_s": 500_000}, {"line": "java-litepull", "msgs_per_s": 400_000}]
    table = ratios_md(all_ratios(rows, latency))  # one table: both anchors, each ratio with its target
    assert "| msgs/s | spark-batch | java-litepull | 1.25 | >= 1.25 | yes |" in table
    assert (
        "| latency p99 (round 1: rocketmq first) | rocketmq | spark-kafka-tuned | 0.69 | <= 0.65 | NOT MET |" in table
    )


def test_the_foreach_latency_writer_keeps_each_rows_latency_per_partition(tmp_path):
    """No Spark: the foreach writer of the latency variants (the sink async progress tracking accepts) writes one
    file per partition and epoch, read back whole; a partition that saw no row writes none; a latency line name the
    harness does not know is refused before anything starts."""
    import datetime

    import pytest

    from benchmarks.run import main
    from benchmarks.spark_lines import TaskLatencies, _task_latencies

    born = datetime.datetime.now() - datetime.timedelta(milliseconds=250)
    for partition, rows in ((0, 3), (1, 2), (2, 0)):
        writer = TaskLatencies(str(tmp_path), "bornTimestamp")
        assert writer.open(partition, 7) is True
        for _ in range(rows):
            writer.process({"bornTimestamp": born})
        writer.close(None)
    read: set[str] = set()
    found = _task_latencies(str(tmp_path), read)
    assert len(found) == 5 and len(list(tmp_path.iterdir())) == 2
    assert _task_latencies(str(tmp_path), read) == []  # each file is read once
    assert all(abs(b - born.timestamp() * 1000) < 1 and 250 <= lat < 60_000 for b, lat in found)
    with pytest.raises(SystemExit):
        main(["--latency-only", "--latency-lines", "rocketmq,rocketmq-bogus"])


def test_interleaved_lines_run_in_rounds_that_alternate_their_order():
    """No broker: with --interleave each Spark line gets its warm-ups, then every round runs each line once, every
    other round in the other order (so no line gains from its place); a line that fails leaves the later rounds."""
    import argparse

    from benchmarks.run import Dataset, Harness

    calls: list[str] = []

    def line(name: str):
        def run() -> dict:
            calls.append(name)
            if name == "c" and calls.count("c") == 2:
                raise RuntimeError("the line broke")
            return {"messages": 10, "seconds": 1.0}

        return run

    h = Harness(argparse.Namespace(rss_interval=0.5))
    h.line_fn = lambda name, ds: line(name)  # type: ignore[method-assign]
    h.jvm_labels = lambda: {}  # type: ignore[method-assign]
    ds = Dataset(topic="t", messages=10, queues=1, body_size=1, load_seconds=0.0)
    results = h.measure_interleaved(["a", "b", "c"], ds, repeat=3, warmup=1)
    assert calls == ["a", "b", "c", "a", "b", "c", "b", "a", "a", "b"]
    assert [len(r.runs) for r in results] == [3, 3, 0] and [len(r.warmups) for r in results] == [1, 1, 1]
    assert results[2].error == "RuntimeError: the line broke" and results[0].error is None


def test_a_first_batch_without_a_start_counts_no_queue_read():
    """Spark's progress gives a query's first batch the start "null" (the floor's first batch may fall inside a short
    window): it reads no queue, and the next batch's moved queues count."""
    from benchmarks.scale import _queues_read

    def progress(start: str, end: str) -> dict:
        return {"sources": [{"startOffset": start, "endOffset": end}]}

    assert _queues_read(progress("null", '{"T": {"b/0": 3, "b/1": 0}}')) == 0
    assert _queues_read(progress('{"T": {"b/0": 1, "b/1": 0}}', '{"T": {"b/0": 3, "b/1": 0}}')) == 1


def test_the_driver_cpu_counts_only_the_runners_under_the_benchmark():
    """The driver's Python CPU sums the streaming source runners under the benchmark's process: another Spark's on the
    machine (the suite runs tests/stock and tests/deploy beside the rest) came and went and made it negative. Here a
    busy process named like a runner whose parent has exited (so it is no longer under this one)."""
    from benchmarks.scale import _runner_cpu_s

    busy = "import time\nt = time.time()\nwhile time.time() - t < 5: pass"
    spawn = (
        "import subprocess, sys\n"
        f"argv = [sys.executable, '-c', {busy!r}, 'python_streaming_source_runner']\n"
        "print(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
    )
    pid = int(subprocess.run([sys.executable, "-c", spawn], capture_output=True, text=True, check=True).stdout)
    try:
        time.sleep(1.0)
        with_it = _runner_cpu_s()
    finally:
        os.kill(pid, 9)
    time.sleep(0.2)
    assert abs(with_it - _runner_cpu_s()) < 0.3, "another process's runner was counted"
