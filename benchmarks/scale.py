"""The stream driver at scale: a streaming query over many queues (default 125 topics x 8 queues on the
embedded RocketMQ's 2 brokers) with a trickle of messages and a 1 s trigger (``--trigger``), measured after a
warm-up for a window of triggers: median and p90 ``latestOffset`` and trigger time (Spark's query progress), the
requests the brokers receive per second in all and by request code (counted by the brokers themselves, jvm-shim's
RPC hook; the trickle's sends and the Java clients' heartbeats left out), and the CPU the source's driver-side
Python process spends per minute. With ``--trickle-every`` every queue gets a message every few
seconds from a process of its own, and the requests are also given per queue and minute, beyond the messages.

    .venv/bin/python -m benchmarks.scale [--topics 125] [--queues-per-broker 4] [--seconds 60] [--trickle-every 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.floor_source import register as register_floor
from benchmarks.rss import _scan, _tree
from benchmarks.spark_lines import new_session
from rmq_spark.client.remoting import codes
from rmq_spark_testing.embedded import EmbeddedRocketMQ, jvm_flags

# Request codes that are not the query's: the trickle's sends and the shim's Java clients' heartbeats.
NOT_THE_QUERY = {codes.SEND_MESSAGE, codes.SEND_MESSAGE_V2, codes.SEND_BATCH_MESSAGE, codes.HEART_BEAT}
# the longest a warm-up or a window goes on past its seconds for a batch that reads messages
READ_TIMEOUT_S = 120.0
NAMES = {
    getattr(codes, name): name
    for name in (
        "PULL_MESSAGE",
        "QUERY_CONSUMER_OFFSET",
        "UPDATE_CONSUMER_OFFSET",
        "SEARCH_OFFSET_BY_TIMESTAMP",
        "GET_MAX_OFFSET",
        "GET_MIN_OFFSET",
        "GET_EARLIEST_MSG_STORETIME",
        "CHECK_CLIENT_CONFIG",
        "GET_CONSUMER_LIST_BY_GROUP",
        "GET_TOPIC_CONFIG",
    )
}


def _runner_cpu_s() -> float:
    """CPU seconds so far of the Python processes under this one that run streaming Python data sources for the
    driver (another Spark on the machine, a test suite's say, has its own, which come and go)."""
    kids, cpu = _scan()
    total = 0.0
    for pid in _tree(os.getpid(), kids):
        try:
            if b"python_streaming_source_runner" in Path(f"/proc/{pid}/cmdline").read_bytes():
                total += cpu.get(pid, 0.0)
        except OSError:
            continue
    return total


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _queues_read(progress: dict) -> int:
    """How many queues a micro-batch read: those whose offset its end moves past its start (Spark's progress)."""
    source = progress["sources"][0]
    start, end = (  # a query's first batch has no start ("null")
        (json.loads(o) if isinstance(o, str) else o) or {} for o in (source["startOffset"], source["endOffset"])
    )
    return sum(
        1
        for topic, queues in end.items()
        if isinstance(queues, dict)
        for queue, offset in queues.items()
        if offset != start.get(topic, {}).get(queue, offset)
    )


def _start_trickle(name_server: str, topics: list[str], every: float) -> subprocess.Popen:
    """benchmarks.trickle in a process of its own: a message to each queue every ``every`` seconds."""
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.trickle", "--name-server", name_server, "--every", str(every), *topics],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )


def _stop_trickle(proc: subprocess.Popen) -> dict:
    """Stop the trickle process; what it sent."""
    try:
        out, _ = proc.communicate("", timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"the trickle process failed (exit {proc.returncode})")
    return json.loads(out)


def _read_messages(query, after: int, timeout: float) -> None:
    """Wait (at most ``timeout`` s) until a batch of ``query`` later than batch ``after`` has read messages: a
    warm-up or a window that ends before it measures a query that has read nothing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not any(
        p["batchId"] > after and p["numInputRows"] > 0 for p in query.recentProgress
    ):
        time.sleep(0.1)


def measure(
    topics: int,
    queues_per_broker: int,
    seconds: float,
    warmup: float,
    trickle_per_s: float,
    trigger: str,
    trickle_every: float = 0.0,
    java_options: str | None = None,
) -> dict:
    """With ``trickle_every`` > 0, every queue gets a message every that many seconds from a process of its own;
    else ``trickle_per_s`` messages a second go over the topics, from a thread of this process. The warm-up and
    the window each last their seconds and at least until a batch in them has read messages. ``java_options``:
    Spark's driver JVM's (Spark's full JIT when not given)."""
    run = f"scale{int(time.time()) % 100000}"
    with EmbeddedRocketMQ(brokers=2) as mq, tempfile.TemporaryDirectory() as checkpoint:
        names = [f"{run}-{i:03d}" for i in range(topics)]
        t0 = time.perf_counter()
        for name in names:
            mq.create_topic(name, queues=queues_per_broker)
        created_s = time.perf_counter() - t0
        spark = new_session("local[2]", java_options=java_options)
        query = (
            spark.readStream.format("rocketmq")
            .option("nameServer", mq.name_server)
            .option("topicPattern", f"{run}-.*")
            .option("startingOffsets", "latest")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=trigger)
            .start()
        )
        stop = threading.Event()

        def trickle() -> None:
            i = 0
            while not stop.wait(1.0 / trickle_per_s):
                mq.produce(names[i % len(names)], [{"body": f"t{i}"}])
                i += 1

        producer = threading.Thread(target=trickle, name="trickle", daemon=True)
        trickling = _start_trickle(mq.name_server, names, trickle_every) if trickle_every > 0 else None
        if trickling is None:
            producer.start()
        sent: dict = {}
        try:
            time.sleep(warmup)
            _read_messages(query, -1, READ_TIMEOUT_S)
            counts0, cpu0, t_start = mq.request_counts(), _runner_cpu_s(), time.monotonic()
            load0 = os.getloadavg()[0]
            first_batch = (query.lastProgress or {}).get("batchId", -1)
            time.sleep(seconds)
            _read_messages(query, first_batch, READ_TIMEOUT_S)
            counts1, cpu1, elapsed = mq.request_counts(), _runner_cpu_s(), time.monotonic() - t_start
            load1 = os.getloadavg()[0]
            progress = [p for p in query.recentProgress if p["batchId"] > first_batch]
        finally:
            stop.set()
            if trickling is not None:
                sent = _stop_trickle(trickling)
            else:
                producer.join()
            query.stop()
            spark.stop()
    per_code = {code: (counts1.get(code, 0) - counts0.get(code, 0)) / elapsed for code in counts1}
    query_codes = {code: rate for code, rate in per_code.items() if code not in NOT_THE_QUERY and rate > 0}
    queues, minutes = topics * queues_per_broker * 2, elapsed / 60
    read = sum(_queues_read(p) for p in progress)
    requests = sum(query_codes.values()) * elapsed
    return {
        "queues": queues,
        "topics": topics,
        "trigger": trigger,
        "trickle": {"everySeconds": trickle_every, **sent} if trickle_every > 0 else {"perSecond": trickle_per_s},
        "loadAverage1m": {"start": round(load0, 1), "end": round(load1, 1)},
        "messagesPerQueuePerMinute": round(sum(p["numInputRows"] for p in progress) / queues / minutes, 2),
        "queuesReadPerQueuePerMinute": round(read / queues / minutes, 2),
        "requestsPerQueuePerMinute": round(requests / queues / minutes, 2),
        # what the messages themselves take out: for each queue a batch reads, the task's pull of its range and
        # the driver's hold armed again at its new end
        "requestsBeyondMessagesPerQueuePerMinute": round((requests - 2 * read) / queues / minutes, 2),
        "topicsCreatedSeconds": round(created_s, 1),
        "brokerRequestsPerSecond": round(sum(query_codes.values()), 1),
        "byCode": {NAMES.get(code, str(code)): round(rate, 1) for code, rate in sorted(query_codes.items())},
        **_spark_figures(progress, cpu1 - cpu0, elapsed),
    }


def _spark_figures(progress: list[dict], cpu_s: float, elapsed: float) -> dict:
    """Spark's side of a measured window: its triggers' phases and the driver-side Python process's CPU."""
    latest = [p["durationMs"].get("latestOffset", 0) for p in progress]
    trigger_ms = [p["durationMs"].get("triggerExecution", 0) for p in progress]
    return {
        "windowSeconds": round(elapsed, 1),
        "triggers": len(progress),
        "latestOffsetMs": {"median": statistics.median(latest) if latest else None, "p90": _percentile(latest, 0.9)},
        "triggerMs": {
            "median": statistics.median(trigger_ms) if trigger_ms else None,
            "p90": _percentile(trigger_ms, 0.9),
        },
        # where a trigger's time goes: the median of each of Spark's phases
        "phasesMedianMs": {
            phase: statistics.median(p["durationMs"].get(phase, 0) for p in progress)
            for phase in sorted({k for p in progress for k in p["durationMs"]})
        },
        "driverPythonCpuSecondsPerMinute": round(cpu_s * 60 / elapsed, 2),
    }


def measure_floor(
    topics: int,
    queues_per_broker: int,
    seconds: float,
    warmup: float,
    trigger: str,
    every: float,
    java_options: str | None = None,
) -> dict:
    """The same query shape over ``benchmarks.floor_source`` (no broker, every queue moving once every ``every``
    seconds): Spark's own part of the figures ``measure`` gives."""
    spark = new_session("local[2]", java_options=java_options)
    register_floor(spark)
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            spark.readStream.format("rocketmq-floor")
            .option("topics", ",".join(f"floor-{i:03d}" for i in range(topics)))
            .option("queuesPerBroker", str(queues_per_broker))
            .option("every", str(every))
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=trigger)
            .start()
        )
        try:
            time.sleep(warmup)
            cpu0, t_start, load0 = _runner_cpu_s(), time.monotonic(), os.getloadavg()[0]
            first_batch = (query.lastProgress or {}).get("batchId", -1)
            time.sleep(seconds)
            cpu1, elapsed, load1 = _runner_cpu_s(), time.monotonic() - t_start, os.getloadavg()[0]
            progress = [p for p in query.recentProgress if p["batchId"] > first_batch]
        finally:
            query.stop()
            spark.stop()
    return {
        "floor": True,
        "queues": topics * queues_per_broker * 2,
        "topics": topics,
        "trigger": trigger,
        "movesEverySeconds": every,
        "loadAverage1m": {"start": round(load0, 1), "end": round(load1, 1)},
        "queuesReadPerQueuePerMinute": round(
            sum(_queues_read(p) for p in progress) / (topics * queues_per_broker * 2) / (elapsed / 60), 2
        ),
        **_spark_figures(progress, cpu1 - cpu0, elapsed),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=125)
    ap.add_argument("--queues-per-broker", type=int, default=4, help="queues of each topic on each of 2 brokers")
    ap.add_argument(
        "--seconds",
        type=float,
        default=60.0,
        help="the measured window, after the warm-up; with a broker, at least until a batch in it read messages",
    )
    ap.add_argument(
        "--warmup", type=float, default=20.0, help="with a broker, at least until the query's batches read messages"
    )
    ap.add_argument("--trickle", type=float, default=1.0, help="messages per second produced, over the topics")
    ap.add_argument(
        "--trickle-every",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="instead of --trickle: one message to every queue every SECONDS, sent by a process of its "
        "own (benchmarks.trickle)",
    )
    ap.add_argument(
        "--trigger",
        default="1 second",
        help="the query's processingTime trigger ('0 seconds': Spark's default, as fast as it can)",
    )
    ap.add_argument(
        "--test-jvm",
        action="store_true",
        help="Spark's JVM with the tests' flags (jvm-shim/jvm-flags.txt: C1 only, serial GC) instead of its full "
        "JIT: a smoke run's, half the JVM's CPU; its trigger times are not comparable with a full JIT's",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="Spark's own part instead: the same query over a stand-in source with no broker whose queues move "
        "once every --trickle-every seconds (benchmarks.floor_source)",
    )
    args = ap.parse_args(argv)
    java_options = " ".join(jvm_flags()) if args.test_jvm else None
    if args.floor:
        every = args.trickle_every or 5.0
        result = measure_floor(
            args.topics, args.queues_per_broker, args.seconds, args.warmup, args.trigger, every, java_options
        )
        print(json.dumps(result, indent=2))
        return 0
    result = measure(
        args.topics,
        args.queues_per_broker,
        args.seconds,
        args.warmup,
        args.trickle,
        args.trigger,
        args.trickle_every,
        java_options,
    )
    print(json.dumps(result, indent=2))
    targets = {
        "median latestOffset <= 5 ms": (result["latestOffsetMs"]["median"] or 0) <= 5,
        "driver Python CPU <= 0.5 s/min": result["driverPythonCpuSecondsPerMinute"] <= 0.5,
    }
    if args.trickle_every > 0:  # a trickle over every queue
        targets["broker requests beyond the messages <= 2 per queue per minute"] = (
            result["requestsBeyondMessagesPerQueuePerMinute"] <= 2
        )
    else:  # a steady load
        targets["broker requests <= 50/s"] = result["brokerRequestsPerSecond"] <= 50
    for target, met in targets.items():
        print(f"{'met    ' if met else 'NOT met'}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
