"""The connector through Spark: batch read into the noop sink, Trigger.AvailableNow over the same backlog, and
end-to-end latency at a steady produce rate; Spark's Kafka source on the same batch and latency lines."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rmq_spark.source.schema import COLUMN_TYPES


def new_session(
    master: str = "local[*]", driver_memory: str = "2g", jars: list[str] | None = None, java_options: str | None = None
):
    """A local SparkSession; its Python workers run this interpreter (which has rmq_spark installed). ``jars``:
    ``spark.jars`` (Spark's Kafka source for the spark-kafka lines), unset when not given; ``java_options``: the
    driver JVM's options (``--quick``: the tests' quick JIT), Spark's full JIT when not given."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("rmq-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", driver_memory)
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    # Python workers import what the benchmark ships them by reference (the foreach writer, the simple reader)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


NARROW_SCHEMA = "queueOffset BIGINT, body BINARY"
# the default row without its one nested column (keys): the 13 scalars, Kafka's row has 7
SCALAR_SCHEMA = ", ".join(f"{name} {ddl}" for name, ddl in COLUMN_TYPES if name not in ("keys", "properties"))
# the full row, the default before 0.2.0: every column, the properties map too
FULL_ROW = {"includeProperties": "true"}


def _reader(
    spark,
    source: dict[str, str],
    topic: str,
    options: dict[str, str],
    stream: bool = False,
    schema: str | None = None,
    fmt: str = "rocketmq",
):
    """``source``: the connection options, ``{"nameServer": ...}`` (remoting) or ``{"endpoint": ...}`` (gRPC);
    ``schema``: a user schema (a projection of the columns); ``fmt``: the source's name ("rocketmq-simple":
    ``benchmarks.simple_reader``)."""
    r = (spark.readStream if stream else spark.read).format(fmt).option("topic", topic)
    if schema is not None:
        r = r.schema(schema)
    for k, v in {**source, **options}.items():
        r = r.option(k, str(v))
    return r


def batch_noop(
    spark, source: dict[str, str], topic: str, options: dict[str, str] | None = None, schema: str | None = None
) -> dict:
    """``spark.read.format("rocketmq") ... .write.format("noop")``, timed and counted by ``noop_save``."""
    return noop_save(_reader(spark, source, topic, options or {}, schema=schema).load(), "body")


KAFKA_TUNED = {"kafka.fetch.max.wait.ms": "10", "kafka.max.poll.records": "100000"}
KAFKA_NARROW = ("offset", "value")  # the counterpart of NARROW_SCHEMA


def kafka_batch_noop(
    spark, bootstrap: str, topic: str, options: dict[str, str] | None = None, columns: tuple[str, ...] | None = None
) -> dict:
    """Spark's own Kafka source over the same data: ``spark.read.format("kafka")`` (``subscribe``, earliest to
    latest) ``.select(*columns)`` when given, timed and counted by ``noop_save``."""
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in (options or {}).items():
        r = r.option(k, str(v))
    df = r.load()
    return noop_save(df.select(*columns) if columns else df, "value")


def noop_save(df, body: str) -> dict:
    """``df.write.format("noop")``, timed; the rows and the bytes of column ``body`` are counted by an Observation
    on the same query (a count and a sum in the JVM), so the figure is exact for the timed run."""
    from pyspark.sql import functions as F
    from pyspark.sql.observation import Observation

    obs = Observation(f"bench-{time.monotonic_ns()}")
    observed = df.observe(obs, F.count(F.lit(1)).alias("rows"), F.sum(F.length(body)).alias("bytes"))
    t0 = time.perf_counter()
    observed.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - t0
    got = obs.get
    return {"messages": int(got["rows"]), "bodyBytes": int(got["bytes"] or 0), "seconds": seconds}


def stream_available_now(spark, source: dict[str, str], topic: str, options: dict[str, str] | None = None) -> dict:
    """Trigger.AvailableNow from earliest into the noop sink, with a fresh checkpoint; messages = the sum of the
    micro-batches' numInputRows; seconds = start() to termination (query start-up included)."""
    checkpoint = tempfile.mkdtemp(prefix="rmq-bench-ckpt-")
    try:
        opts = {"startingOffsets": "earliest", **(options or {})}
        df = _reader(spark, source, topic, opts, stream=True).load()
        t0 = time.perf_counter()
        q = df.writeStream.format("noop").trigger(availableNow=True).option("checkpointLocation", checkpoint).start()
        q.awaitTermination()
        seconds = time.perf_counter() - t0
        if q.exception() is not None:
            raise RuntimeError(f"streaming query failed: {q.exception()}")
        progress = q.recentProgress
        rows = sum(int(p["numInputRows"]) for p in progress)
        batches = sum(1 for p in progress if int(p["numInputRows"]) > 0)
        return {"messages": rows, "bodyBytes": None, "seconds": seconds, "microBatches": batches}
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def _percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def _epoch_ms(timestamp: str) -> float:
    """A progress timestamp (``2026-11-25T19:40:01.123Z``) in ms since the epoch."""
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000.0


def _phases(progress: list[dict]) -> dict:
    """Median and p90 per part of the micro-batches' time (ms), and how many batches were measured."""
    out: dict = {"batches": len(progress)}
    for phase in PHASES:
        values = sorted(float(p["durationMs"].get(phase, 0)) for p in progress)
        out[phase] = {"p50": round(_percentile(values, 50), 1), "p90": round(_percentile(values, 90), 1)}
    return out


WINDOW_S = 5  # latency is also reported per window of this many seconds of birth time (start-up vs steady state)


# The parts of a micro-batch's time in Spark's query progress (durationMs), in the order a trigger runs them.
PHASES = ("latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets", "triggerExecution")


def rocketmq_latency(
    spark,
    mq,
    topic: str,
    *,
    rate: int,
    seconds: float,
    body_size: int = 100,
    options: dict[str, str] | None = None,
    source: str = "rocketmq",
    sink: LatencySink | None = None,
) -> dict:
    """``stream_latency`` of the connector: ``readStream.format(source)`` from earliest, latency from
    ``bornTimestamp``, the shim's steady producer (``benchProduceRate``). ``source`` "rocketmq-simple": the same
    stream through Spark's simple-reader path (``benchmarks.simple_reader``)."""
    if source != "rocketmq":
        from benchmarks.simple_reader import register

        register(spark)
    opts = {"startingOffsets": "earliest", **(options or {})}
    return stream_latency(
        _reader(spark, {"nameServer": mq.name_server}, topic, opts, stream=True, fmt=source).load(),
        "bornTimestamp",
        lambda: mq.command(
            "benchProduceRate", topic=topic, rate=rate, seconds=seconds, bodySize=body_size, timeout=seconds + 120
        ),
        rate=rate,
        seconds=seconds,
        sink=sink,
    )


def kafka_latency(
    spark,
    kafka,
    topic: str,
    *,
    rate: int,
    seconds: float,
    body_size: int = 100,
    options: dict[str, str] | None = None,
    sink: LatencySink | None = None,
) -> dict:
    """``stream_latency`` of Spark's Kafka source: ``readStream.format("kafka")`` (``subscribe``, earliest, the
    given options), latency from ``timestamp`` (the producer's CreateTime), the Kafka node's steady producer
    (``produceRate``: the same rate, ticks and bodies)."""
    r = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in (options or {}).items():
        r = r.option(k, str(v))
    return stream_latency(
        r.load(),
        "timestamp",
        lambda: kafka.produce_rate(topic, rate, seconds, body_size),
        rate=rate,
        seconds=seconds,
        sink=sink,
    )


@dataclass(frozen=True)
class LatencySink:
    """Where a latency line takes each message's latency: by default a foreachBatch sink on the driver, once its
    micro-batch is fetched there; with ``foreach``, Spark's foreach sink (which async progress tracking accepts),
    as each task sees the row. ``async_progress``: the query's ``asyncProgressTrackingEnabled``."""

    foreach: bool = False
    async_progress: bool = False


class TaskLatencies:
    """A foreach writer: each row's (born ms, latency ms) when its task sees it, written when its partition ends
    to a file of its own in ``folder``."""

    def __init__(self, folder: str, born: str) -> None:
        self.folder, self.born = folder, born

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.rows: list[str] = []
        self.name = f"{epoch_id}-{partition_id}-{os.getpid()}-{time.monotonic_ns()}"
        return True

    def process(self, row) -> None:
        now_ms = time.time() * 1000.0
        born_ms = row[self.born].timestamp() * 1000.0
        self.rows.append(f"{born_ms} {now_ms - born_ms}\n")

    def close(self, error) -> None:
        if self.rows:
            path = os.path.join(self.folder, self.name)
            with open(path + ".tmp", "w") as f:
                f.writelines(self.rows)
            os.rename(path + ".tmp", path + ".txt")


def _task_latencies(folder: str, read: set[str] | None = None) -> list[tuple[float, float]]:
    """What ``TaskLatencies`` wrote into ``folder`` so far, less the files named in ``read`` (which gets the names
    of those read now: the harness polls while the query runs, and reads each file once)."""
    found = []
    read = set() if read is None else read
    for name in os.listdir(folder):
        if name.endswith(".txt") and name not in read:
            read.add(name)
            with open(os.path.join(folder, name)) as f:
                found += [(float(a), float(b)) for a, b in (line.split() for line in f)]
    return found


def rate_latency(spark, *, rate: int, seconds: float, sink: LatencySink | None = None) -> dict:
    """``stream_latency`` of Spark's own rate source (``rowsPerSecond`` = ``rate``, 8 partitions; latency from its
    ``timestamp``, the time each row is due): no broker and no Python source, so what Spark itself takes for the
    same trigger and sink, the floor under both sources' lines."""
    df = spark.readStream.format("rate").option("rowsPerSecond", rate).option("numPartitions", 8).load()

    def produce() -> dict:
        time.sleep(seconds)
        return {"acked": int(rate * seconds)}

    return stream_latency(df, "timestamp", produce, rate=rate, seconds=seconds, sink=sink)


def stream_latency(
    df,
    born: str,
    produce: Callable[[], dict],
    *,
    rate: int,
    seconds: float,
    warmup_seconds: float = 10.0,
    sink: LatencySink | None = None,
) -> dict:
    """Streaming ``df`` (default trigger) into ``sink`` while ``produce()`` sends ``rate`` messages/s
    for ``seconds`` and returns how many were acknowledged (``acked``). Latency of a message = the wall-clock time
    its micro-batch has been fetched into the driver's sink (or its task saw it: ``LatencySink``) minus its column
    ``born`` (the producer's send time, same host clock). The steady state is the messages born after the first
    ``warmup_seconds``; the start-up (the rest) is reported apart, and so are the percentiles per ``WINDOW_S``
    seconds of birth time. ``phases_ms``: the median and p90 of each part of the steady state's micro-batches
    (Spark's durationMs), which tells where a batch's time goes."""
    sink = sink or LatencySink()
    checkpoint = tempfile.mkdtemp(prefix="rmq-bench-lat-")
    latencies: list[tuple[float, float]] = []
    received = [0]
    files_read: set[str] = set()  # TaskLatencies' files already in ``latencies``
    lock = threading.Lock()

    def to_driver(batch_df, batch_id):
        table = batch_df.select(born).toArrow()
        now_ms = time.time() * 1000.0
        col = table.column(0).cast("int64").to_pylist()  # microseconds since epoch
        with lock:
            received[0] += len(col)
            latencies.extend((us / 1000.0, now_ms - us / 1000.0) for us in col if us is not None)

    q = None
    try:
        df.sparkSession.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")  # every batch's progress
        if sink.foreach:
            writer = df.select(born).writeStream.foreach(TaskLatencies(checkpoint + "-rows", born))
            os.makedirs(checkpoint + "-rows")
        else:
            writer = df.writeStream.foreachBatch(to_driver)
        if sink.async_progress:
            writer = writer.option("asyncProgressTrackingEnabled", "true")
        q = writer.option("checkpointLocation", checkpoint).start()
        # wait for the query to run its first (empty) trigger before producing
        deadline = time.monotonic() + 60
        while not q.recentProgress and time.monotonic() < deadline:
            time.sleep(0.1)
        produced = produce()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and q.isActive:
            if sink.foreach:
                with lock:
                    latencies += _task_latencies(checkpoint + "-rows", files_read)
                    received[0] = len(latencies)
            if received[0] >= produced["acked"]:
                break
            time.sleep(0.1 if not sink.foreach else 0.5)
        q.stop()
        with lock:
            first = min((b for b, _ in latencies), default=0.0)
            start_ms = first + warmup_seconds * 1000.0
            steady = sorted(lat for born_ms, lat in latencies if born_ms >= start_ms)
            startup = sorted(lat for born_ms, lat in latencies if born_ms < start_ms)
            windows: dict[int, list[float]] = {}
            for born_ms, lat in latencies:
                windows.setdefault(int((born_ms - first) // (WINDOW_S * 1000)), []).append(lat)
        phases = _phases(
            [p for p in q.recentProgress if int(p["numInputRows"]) > 0 and _epoch_ms(p["timestamp"]) >= start_ms]
        )
        return {
            "messages": received[0],
            "sent": produced["acked"],
            "rate": rate,
            "seconds": seconds,
            "latency_ms": {
                "p50": round(_percentile(steady, 50), 1),
                "p90": round(_percentile(steady, 90), 1),
                "p99": round(_percentile(steady, 99), 1),
                "max": round(steady[-1], 1) if steady else None,
                "measured": len(steady),
            },
            "startup_latency_ms": {
                "p50": round(_percentile(startup, 50), 1),
                "p99": round(_percentile(startup, 99), 1),
                "measured": len(startup),
            },
            "phases_ms": phases,
            "latency_ms_by_born_window": [
                {
                    "from_s": w * WINDOW_S,
                    "messages": len(lats),
                    "p50": round(_percentile(sorted(lats), 50), 1),
                    "p99": round(_percentile(sorted(lats), 99), 1),
                }
                for w, lats in sorted(windows.items())
            ],
        }
    finally:
        if q is not None:
            q.stop()  # a failed producer leaves it running; stopping twice is harmless
        shutil.rmtree(checkpoint, ignore_errors=True)
        shutil.rmtree(checkpoint + "-rows", ignore_errors=True)
