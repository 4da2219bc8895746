"""The benchmark harness: the connector against the official Java client and the broker's ceiling, in one run.

    .venv/bin/python -m benchmarks.run [--messages 1000000] [--profile default|large|scaling] [--repeat 3]
                                       [--warmup 1] [--quick] [--lines a,b,...] [--no-latency] [--no-cprofile]
                                       [--latency-only] [--latency-rounds N]

One embedded RocketMQ 5.5.0 (1 broker, default pull limits), one topic pre-loaded by the official Java producer,
then every line reads that same data in turn (never two at once), each ``--repeat`` times after ``--warmup``
untimed runs; the median (by messages/s) is reported. The spark-kafka lines (only with --lines) read the same data
from a KRaft Kafka node with Spark's own Kafka source. See benchmarks/README.md for what each line measures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.rss import TreeSampler
from benchmarks.versus_kafka import all_ratios, cpu_per_million, latency_md, latency_ratios, ratios, ratios_md
from rmq_spark_testing.embedded import jvm_flags

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

# The shim's jvm-flags.txt stops the JIT at C1 (fast start for tests); benchmarks run the JVM (broker and the Java
# reference readers) with the full tiered JIT. A --quick run, a smoke run whose figures nobody reads, keeps the
# tests' flags for every JVM it starts (Spark's too): it spends half the CPU.
BENCH_JVM_FLAGS = ("-XX:TieredStopAtLevel=4",)
TAGS = ["TagA", "TagB", "TagC"]

LINE_DOCS = {
    "java-litepull": "official DefaultLitePullConsumer, pullBatchSize 32, all queues (the reference)",
    "java-ceiling": "official DefaultMQPullConsumer async pulls, 16 in flight per queue (broker ceiling)",
    "client": "RemotingClient.read_range, 1 process, depth 8, decoded Message objects",
    "client-grpc": "GrpcClient.read_range through the v2 pull gateway, 1 process, depth 8, decoded Message objects",
    "client-grpc-arrow": "client-arrow through the v2 pull gateway (gRPC answer frames gathered into Arrow columns)",
    "client-depth1": "RemotingClient.read_range, 1 process, depth 1 (one pull at a time)",
    "client-2proc": "RemotingClient.read_range, 2 processes x 4 queues, depth 8",
    "client-raw": "RangeReader only (pulled blocks walked, no columns), 1 process, depth 8",
    "client-arrow": "partition_reader.read_ranges (the executor path: Arrow batches), 1 process, no Spark",
    "spark-batch": "spark.read.format('rocketmq') -> write.format('noop'), local[*] (the default row, no properties)",
    "spark-batch-narrow": "spark-batch with the user schema 'queueOffset BIGINT, body BINARY' (column projection)",
    "spark-batch-scalars": "spark-batch with the default row's 13 scalar columns (keys left out)",
    "spark-batch-properties": "spark-batch with includeProperties=true: the full row with the properties map",
    "spark-batch-grpc": "spark-batch with option endpoint: the gRPC transport through the v2 pull gateway",
    "spark-stream": "readStream, Trigger.AvailableNow, earliest -> noop sink, local[*]",
    "spark-kafka": "Spark's Kafka source (spark-sql-kafka 4.2.0) on a KRaft Kafka 4.1.1 node, default options",
    "spark-kafka-tuned": "spark-kafka with kafka.fetch.max.wait.ms=10, kafka.max.poll.records=100000",
    "spark-kafka-narrow": "spark-kafka-tuned, select('offset', 'value') (the counterpart of spark-batch-narrow)",
}
# Only on request (--lines): they build benchmarks/kafka-shim with Maven and start a Kafka node beside RocketMQ.
KAFKA_LINES = ["spark-kafka", "spark-kafka-tuned", "spark-kafka-narrow"]
# measured when named (--lines): what the nested columns, keys and the properties map, cost Spark
ON_REQUEST_LINES = ["spark-batch-scalars", "spark-batch-properties"]
DEFAULT_LINES = [name for name in LINE_DOCS if name not in KAFKA_LINES + ON_REQUEST_LINES]
SCALING_LINES = ["java-litepull", "java-ceiling", "spark-batch"]
# The latency lines: ours with a consumer group, and Spark's Kafka source tuned (when the Kafka node runs).
LATENCY_LINES = ["rocketmq", "spark-kafka-tuned"]
# on request (--latency-lines): ours through Spark's simple-reader path, and either source into
# Spark's foreach sink, which async progress tracking accepts (foreachBatch is refused), with and without it
LATENCY_VARIANTS = [
    "spark-rate",
    "rocketmq-simple",
    "rocketmq-foreach",
    "rocketmq-foreach-async",
    "spark-kafka-tuned-foreach",
    "spark-kafka-tuned-foreach-async",
]


@dataclass
class Dataset:
    topic: str
    messages: int
    queues: int
    body_size: int
    load_seconds: float
    kafka_load_seconds: float | None = None  # the same data in a Kafka topic of the same name (spark-kafka lines)


@dataclass
class LineResult:
    name: str
    runs: list[dict] = field(default_factory=list)
    warmups: list[dict] = field(default_factory=list)
    error: str | None = None

    def median_run(self) -> dict | None:
        ok = [r for r in self.runs if r.get("seconds")]
        if not ok:
            return None
        ordered = sorted(ok, key=lambda r: r["messages"] / r["seconds"])
        return ordered[(len(ordered) - 1) // 2]  # the median run (the lower one of an even count)


class Harness:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.mq = None
        self.kafka = None
        self.spark_jars: list[str] | None = None
        self.spark = None
        self._spark_lock = threading.Lock()
        self.log_lines: list[str] = []
        # the JVMs' flags beyond jvm-flags.txt (the broker's, and the Java lines' that run in it); Spark's options
        self.jvm_flags: tuple[str, ...] = () if getattr(args, "quick", False) else BENCH_JVM_FLAGS
        self.spark_java_options = " ".join(jvm_flags()) if getattr(args, "quick", False) else None

    # -- infrastructure ---------------------------------------------------------------------------------------
    def log(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, file=sys.stderr, flush=True)
        self.log_lines.append(line)

    def start_cluster(self):
        from rmq_spark_testing.embedded import EmbeddedRocketMQ

        t0 = time.perf_counter()
        self.mq = EmbeddedRocketMQ(brokers=1, heap=self.args.jvm_heap, jvm_flags=self.jvm_flags).start()
        self.log(f"embedded RocketMQ up in {time.perf_counter() - t0:.1f} s (name server {self.mq.name_server})")

    def start_kafka(self) -> None:
        """The spark-kafka lines: build benchmarks/kafka-shim if needed, start its Kafka node, and give the
        session Spark's Kafka source (``spark.jars``, so before Spark starts)."""
        from benchmarks.kafka_broker import EmbeddedKafka, spark_kafka_jars

        t0 = time.perf_counter()
        self.spark_jars = spark_kafka_jars()
        self.kafka = EmbeddedKafka(heap=self.args.jvm_heap).start()
        self.log(
            f"Kafka node up in {time.perf_counter() - t0:.1f} s (bootstrap {self.kafka.bootstrap}); "
            f"spark.jars: {', '.join(Path(j).name for j in self.spark_jars)}"
        )

    def jvm_labels(self) -> dict[int, str]:
        """TreeSampler's names for the brokers' JVMs."""
        labels = {self.mq.pid: "shim"}
        if self.kafka is not None:
            labels[self.kafka.pid] = "kafka"
        return labels

    def get_spark(self):
        with self._spark_lock:
            if self.spark is None:
                from benchmarks.spark_lines import new_session

                t0 = time.perf_counter()
                self.spark = new_session(
                    self.args.spark_master, jars=self.spark_jars, java_options=self.spark_java_options
                )
                self.log(f"SparkSession {self.args.spark_master} up in {time.perf_counter() - t0:.1f} s")
            return self.spark

    def prestart_spark(self) -> None:
        """--quick only: start Spark while the other lines run (saves time; skews their figures, which a smoke
        run does not care about)."""

        def start() -> None:
            try:
                self.get_spark()
            except Exception as e:  # the Spark lines will report it
                self.log(f"SparkSession start failed: {e}")

        threading.Thread(target=start, name="spark-prestart", daemon=True).start()

    def close(self) -> None:
        with self._spark_lock:
            pass  # a pre-start still running finishes first
        if self.spark is not None:
            self.spark.stop()
            self.spark = None
        if self.mq is not None:
            self.mq.close()
            self.mq = None
        if self.kafka is not None:
            self.kafka.close()
            self.kafka = None

    def load(self, messages: int, queues: int, body_size: int) -> Dataset:
        topic = f"bench-{messages}-{queues}q-{body_size}b-{uuid.uuid4().hex[:6]}"
        self.mq.create_topic(topic, queues=queues)
        t0 = time.perf_counter()
        self.mq.produce_bulk(
            topic, messages, body_size, tags=TAGS, key_prefix="key-", timeout=max(600.0, messages / 5000)
        )
        seconds = time.perf_counter() - t0
        held = sum(o["maxOffset"] - o["minOffset"] for o in self.mq.offsets(topic))
        if held != messages:
            raise RuntimeError(f"topic {topic} holds {held} messages after loading {messages}")
        self.log(
            f"loaded {messages:,} x {body_size} B into {topic} ({queues} queues) in {seconds:.1f} s "
            f"({messages / seconds:,.0f} msg/s)"
        )
        return Dataset(topic, messages, queues, body_size, seconds, self.load_kafka(topic, messages, queues, body_size))

    def load_kafka(self, topic: str, messages: int, partitions: int, body_size: int) -> float | None:
        """The same data into a Kafka topic of the same name, when the Kafka node runs: its load seconds."""
        if self.kafka is None:
            return None
        self.kafka.create_topic(topic, partitions)
        t0 = time.perf_counter()
        self.kafka.produce(topic, messages, body_size, timeout=max(600.0, messages / 5000))
        seconds = time.perf_counter() - t0
        held = self.kafka.count(topic)
        if held != messages:
            raise RuntimeError(f"Kafka topic {topic} holds {held} messages after loading {messages}")
        self.log(
            f"loaded {messages:,} x {body_size} B into Kafka topic {topic} ({partitions} partitions) in "
            f"{seconds:.1f} s ({messages / seconds:,.0f} msg/s)"
        )
        return seconds

    # -- lines ------------------------------------------------------------------------------------------------
    def line_fn(self, name: str, ds: Dataset) -> Callable[[], dict]:
        from benchmarks import client_reader as cr

        ns, topic = {"nameServer": self.mq.name_server}, ds.topic
        gw = {"endpoint": self.mq.gateway}
        timeout = max(600.0, ds.messages / 2000)
        if name == "java-litepull":
            return lambda: self.mq.command(
                "benchJavaLitePull", topic=topic, pullBatchSize=32, timeoutMs=int(timeout * 1000), timeout=timeout + 60
            )
        if name == "java-ceiling":
            return lambda: self.mq.command(
                "benchCeiling",
                topic=topic,
                inflightPerQueue=16,
                pullBatchSize=32,
                timeoutMs=int(timeout * 1000),
                timeout=timeout + 60,
            )
        if name.startswith("client"):
            ranges = cr.plan(ns, topic)
            if name == "client-grpc":
                return lambda: cr.read_in_process(gw, topic, ranges, depth=8)
            if name == "client-grpc-arrow":
                return lambda: cr.read_in_process(gw, topic, ranges, depth=8, mode="arrow")
            if name == "client":
                return lambda: cr.read_in_process(ns, topic, ranges, depth=8)
            if name == "client-depth1":
                return lambda: cr.read_in_process(ns, topic, ranges, depth=1)
            if name == "client-2proc":
                return lambda: cr.read_in_processes(ns, topic, ranges, processes=2, depth=8)
            if name == "client-raw":
                return lambda: cr.read_in_process(ns, topic, ranges, depth=8, mode="raw")
            if name == "client-arrow":
                return lambda: cr.read_in_process(ns, topic, ranges, depth=8, mode="arrow")
        if name in (
            "spark-batch",
            "spark-batch-narrow",
            "spark-batch-scalars",
            "spark-batch-properties",
            "spark-batch-grpc",
        ):
            from benchmarks.spark_lines import FULL_ROW, NARROW_SCHEMA, SCALAR_SCHEMA, batch_noop

            spark = self.get_spark()
            source = gw if name == "spark-batch-grpc" else ns
            schema = {"spark-batch-narrow": NARROW_SCHEMA, "spark-batch-scalars": SCALAR_SCHEMA}.get(name)
            options = FULL_ROW if name == "spark-batch-properties" else {}
            return lambda: batch_noop(spark, source, topic, options, schema=schema)
        if name in KAFKA_LINES:
            from benchmarks.spark_lines import KAFKA_NARROW, KAFKA_TUNED, kafka_batch_noop

            spark = self.get_spark()
            options = {} if name == "spark-kafka" else KAFKA_TUNED
            columns = KAFKA_NARROW if name == "spark-kafka-narrow" else None
            return lambda: kafka_batch_noop(spark, self.kafka.bootstrap, topic, options, columns)
        if name == "spark-stream":
            from benchmarks.spark_lines import stream_available_now

            spark = self.get_spark()
            return lambda: stream_available_now(spark, ns, topic)
        raise ValueError(f"unknown line {name!r}; known: {', '.join(LINE_DOCS)}")

    def measure(self, name: str, ds: Dataset, repeat: int, warmup: int) -> LineResult:
        """``warmup`` untimed runs of line ``name``, then ``repeat`` timed ones."""
        return self.measure_interleaved([name], ds, repeat, warmup)[0]

    def measure_interleaved(self, names: list[str], ds: Dataset, repeat: int, warmup: int) -> list[LineResult]:
        """Each line's ``warmup`` untimed runs, then ``repeat`` rounds that run every line once, every other round
        in the other order: Spark's JIT then favours no line for where it stands in the order. A line that fails
        is left out of the later rounds."""
        results = {name: LineResult(name) for name in names}
        fns = {}
        for name in names:
            try:
                fns[name] = self.line_fn(name, ds)
            except Exception as e:
                self._failed(results[name], e)
        for name in list(fns):
            for _ in range(warmup):
                if not self._run(name, fns, ds, results[name], "warm-up"):
                    break
        for i in range(repeat):
            order = list(fns) if i % 2 == 0 else list(fns)[::-1]
            for name in order:
                self._run(name, fns, ds, results[name], f"run {i + 1}/{repeat}")
        return [results[name] for name in names]

    def _run(self, name: str, fns: dict, ds: Dataset, res: LineResult, kind: str) -> bool:
        """One run of line ``name`` into ``res`` (a warm-up or a timed run, as ``kind`` says); a failure ends the
        line (``fns`` loses it). Whether it ran."""
        if name not in fns:
            return False
        try:
            with TreeSampler(jvm_labels=self.jvm_labels(), interval=self.args.rss_interval) as sampler:
                t0 = time.perf_counter()
                r = dict(fns[name]())
                r["wall"] = time.perf_counter() - t0
        except Exception as e:
            del fns[name]
            self._failed(res, e)
            return False
        r["rss"] = sampler.peaks.as_dict()
        r["ok"] = r.get("messages") == ds.messages
        if r.get("bodyBytes") is None and r["ok"]:
            r["bodyBytes"] = ds.messages * ds.body_size  # fixed-size bodies: exact when the count is
        (res.warmups if kind == "warm-up" else res.runs).append(r)
        self.log(
            f"{name:<14} {kind:<9} {r['messages']:>10,} msgs in {r['seconds']:7.2f} s = "
            f"{r['messages'] / r['seconds']:>10,.0f} msg/s   py {r['rss']['python_total_mb']:.0f} MB"
            f" (worker {r['rss']['python_worker_mb']:.0f})"
            + ("" if r["ok"] else f"   MISMATCH: expected {ds.messages:,}")
        )
        return True

    def _failed(self, res: LineResult, e: Exception) -> None:
        res.error = f"{type(e).__name__}: {e}"
        self.log(f"{res.name}: FAILED {res.error}")
        traceback.print_exc()

    def warm_spark(self, names: list[str], ds: Dataset, passes: int) -> None:
        """``passes`` untimed runs of every Spark line of ``names`` in turn before any line is timed: Spark's JIT
        then serves each line alike whatever the order of the lines (a line's own warm-ups only warm what it
        uses)."""
        for i in range(passes):
            for name in [n for n in names if n.startswith("spark")]:
                try:
                    r = self.line_fn(name, ds)()
                    self.log(
                        f"{name:<14} warm pass {i + 1}/{passes} {r['messages']:>10,} msgs in {r['seconds']:7.2f} s"
                    )
                except Exception as e:  # the line's own runs report it
                    self.log(f"{name}: warm pass failed: {type(e).__name__}: {e}")

    def spark_fixed_overhead(self) -> float | None:
        """Seconds of a spark-batch run over a topic of 8 queues with one message each: planning, 8 tasks,
        Python worker hand-off; the part of every spark-batch run that does not depend on the data."""
        from benchmarks.spark_lines import batch_noop

        try:
            topic = f"bench-tiny-{uuid.uuid4().hex[:6]}"
            self.mq.create_topic(topic, queues=8)
            self.mq.produce_bulk(topic, 8, 100, tags=TAGS)
            spark = self.get_spark()
            source = {"nameServer": self.mq.name_server}
            batch_noop(spark, source, topic)
            return round(min(batch_noop(spark, source, topic)["seconds"] for _ in range(2)), 3)
        except Exception as e:
            self.log(f"spark fixed overhead: FAILED {e}")
            return None

    def latency(self) -> dict:
        """The latency lines in ``--latency-rounds`` rounds: ours (with a consumer group, as users run it) and, when
        the Kafka node runs, Spark's Kafka source tuned, at the same rate, bodies, trigger and sink; every other
        round runs them in the other order (Spark's JIT favours the later line). Each round's ratios against their
        targets."""
        names = [
            n for n in self.args.latency_lines.split(",") if not n.startswith("spark-kafka") or self.kafka is not None
        ]
        warmups = {}
        if self.args.latency_warmup > 0:  # untimed: the first run of a source in a session pays its JIT
            warmups = {name: self.latency_line(name, self.args.latency_warmup, "warm-up") for name in names}
        rounds = []
        for i in range(self.args.latency_rounds):
            order = names if i % 2 == 0 else names[::-1]
            lines = {name: self.latency_line(name, self.args.latency_seconds) for name in order}
            found = latency_ratios(lines.get("rocketmq"), lines.get("spark-kafka-tuned"))
            rounds.append({"order": order, "lines": lines, "ratios": found})
            for r in found:
                self.log(
                    f"latency round {i + 1} (in order: {', '.join(order)}): {r['measure']} ours / Kafka's "
                    f"{r['ratio']:.2f} (target <= {r['target']}: {'met' if r['met'] else 'NOT MET'})"
                )
        return {
            "rate": self.args.latency_rate,
            "seconds": self.args.latency_seconds,
            "rounds": rounds,
            "warmups": warmups,
        }

    def latency_line(self, name: str, seconds: float, kind: str = "", attempts: int = 3) -> dict:
        """One latency line (``LATENCY_LINES``) on a fresh 8-queue topic (8 partitions for Kafka); a failed one is
        run again on a new topic, up to ``attempts`` runs in all (a busy machine can make the broker refuse the
        producer: flow control)."""
        r = self._latency_line(name, seconds, kind)
        for attempt in range(2, attempts + 1):
            if "error" not in r:
                break
            self.log(f"latency {f'{name} {kind}'.strip()}: running it again (attempt {attempt} of {attempts})")
            r = {**self._latency_line(name, seconds, kind), "attempt": attempt}
        return r

    def _latency_line(self, name: str, seconds: float, kind: str = "") -> dict:
        from benchmarks.spark_lines import KAFKA_TUNED, LatencySink, kafka_latency, rate_latency, rocketmq_latency

        a = self.args
        topic = f"bench-latency-{uuid.uuid4().hex[:6]}"
        sink = LatencySink(foreach="-foreach" in name, async_progress=name.endswith("-async"))
        line, name = name, f"{name} {kind}".strip()
        try:
            spark = self.get_spark()
            into = ("foreach" if sink.foreach else "foreachBatch") + (", async progress" if sink.async_progress else "")
            self.log(f"latency {name}: {a.latency_rate:,} msg/s for {seconds:.0f} s into {into}")
            with TreeSampler(jvm_labels=self.jvm_labels(), interval=a.rss_interval) as sampler:
                if line.startswith("rocketmq"):
                    self.mq.create_topic(topic, queues=8)
                    r = rocketmq_latency(
                        spark,
                        self.mq,
                        topic,
                        rate=a.latency_rate,
                        seconds=seconds,
                        options={"consumerGroup": f"bench-group-{topic}"},
                        source="rocketmq-simple" if line == "rocketmq-simple" else "rocketmq",
                        sink=sink,
                    )
                elif line == "spark-rate":
                    r = rate_latency(spark, rate=a.latency_rate, seconds=seconds, sink=sink)
                else:
                    self.kafka.create_topic(topic, 8)
                    r = kafka_latency(
                        spark,
                        self.kafka,
                        topic,
                        rate=a.latency_rate,
                        seconds=seconds,
                        options=KAFKA_TUNED,
                        sink=sink,
                    )
            r["rss"] = sampler.peaks.as_dict()
            self.log(
                f"latency {name}: {r['latency_ms']} ({r['messages']:,} of {r['sent']:,} received); first "
                f"10 s: {r['startup_latency_ms']}"
            )
            self.log(
                f"latency {name}: micro-batch phases (ms, p50/p90): "
                + ", ".join(f"{k} {v['p50']:.0f}/{v['p90']:.0f}" for k, v in r["phases_ms"].items() if k != "batches")
                + f" over {r['phases_ms']['batches']} batches"
            )
            self.log(
                f"latency {name} by birth time: "
                + ", ".join(
                    f"{w['from_s']}s p50 {w['p50']:.0f} p99 {w['p99']:.0f}" for w in r["latency_ms_by_born_window"]
                )
            )
            return r
        except Exception as e:
            self.log(f"latency {name}: FAILED {type(e).__name__}: {e}")
            traceback.print_exc()
            return {"error": f"{type(e).__name__}: {e}"}


# ------------------------------------------------------------------------------------------------ summaries


def summarize(results: list[LineResult], ds: Dataset) -> list[dict]:
    rows = []
    for res in results:
        row: dict = {
            "line": res.name,
            "what": LINE_DOCS.get(res.name, ""),
            "error": res.error,
            "runs": res.runs,
            "warmups": res.warmups,
            "all_ok": bool(res.runs) and all(r["ok"] for r in res.runs) and res.error is None,
        }
        med = res.median_run()
        if med is not None:
            rates = [r["messages"] / r["seconds"] for r in res.runs if r.get("seconds")]
            row.update(
                {
                    "messages": med["messages"],
                    "msgs_per_s": med["messages"] / med["seconds"],
                    "mb_per_s": (med.get("bodyBytes") or 0) / med["seconds"] / 1e6,
                    "seconds": med["seconds"],
                    "wall": med["wall"],
                    "spread": [round(min(rates)), round(max(rates))],
                    "cpu_seconds": med["rss"].get("cpu_seconds", {}),
                    "cpu_per_1m": cpu_per_million(
                        med["rss"].get("cpu_seconds", {}),
                        med["messages"],
                        "kafka" if res.name in KAFKA_LINES else "shim",
                    ),
                    "python_total_mb": max(r["rss"]["python_total_mb"] for r in res.runs),
                    "python_worker_mb": max(r["rss"]["python_worker_mb"] for r in res.runs),
                    "python_driver_mb": max(r["rss"]["python_driver_mb"] for r in res.runs),
                    "jvm_mb": {
                        k: max(r["rss"]["jvm_mb"].get(k, 0) for r in res.runs)
                        for k in sorted({k for r in res.runs for k in r["rss"]["jvm_mb"]})
                    },
                    "jvm_anon_mb": {
                        k: max(r["rss"]["jvm_anon_mb"].get(k, 0) for r in res.runs)
                        for k in sorted({k for r in res.runs for k in r["rss"]["jvm_anon_mb"]})
                    },
                }
            )
        rows.append(row)
    ref = {r["line"]: r.get("msgs_per_s") for r in rows}
    for r in rows:
        if r.get("msgs_per_s"):
            for base in ("java-litepull", "java-ceiling"):
                if ref.get(base):
                    r[f"x_{base}"] = r["msgs_per_s"] / ref[base]
    return rows


def table(rows: list[dict], ds: Dataset) -> str:
    head = (
        f"{ds.messages:,} messages x {ds.body_size} B, {ds.queues} queues, topic {ds.topic}\n"
        "| line | msgs/s (median) | min-max msgs/s | MB/s | s (read) | wall s | py RSS MB total / worker "
        "| JVM RSS MB (anon) | CPU s py / shim / spark | CPU-s per 1M spark / py workers / broker "
        "| x litepull | x ceiling | ok |\n"
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|:-:|\n"
    )
    out = [head]
    for r in rows:
        if r.get("msgs_per_s") is None:
            out.append(f"| {r['line']} | failed: {r.get('error')} | | | | | | | | | | | no |\n")
            continue
        jvm = ", ".join(f"{k} {v:.0f} ({r['jvm_anon_mb'].get(k, 0):.0f})" for k, v in r["jvm_mb"].items())
        c = r.get("cpu_seconds", {})
        cpu = " / ".join(f"{c[k]:.1f}" if k in c else "-" for k in ("python", "shim", "spark"))
        per = " / ".join(f"{r['cpu_per_1m'][k]:.2f}" for k in ("spark", "python_workers", "broker"))
        xl = r.get("x_java-litepull")
        xc = r.get("x_java-ceiling")
        lo, hi = r["spread"]
        out.append(
            f"| {r['line']} | {r['msgs_per_s']:,.0f} | {lo / 1000:,.0f}k-{hi / 1000:,.0f}k | "
            f"{r['mb_per_s']:.1f} | {r['seconds']:.2f} | "
            f"{r['wall']:.2f} | {r['python_total_mb']:.0f} / {r['python_worker_mb']:.0f} | {jvm} | "
            f"{cpu} | {per} | "
            f"{'' if xl is None else f'{xl:.2f}'} | {'' if xc is None else f'{xc:.2f}'} | "
            f"{'yes' if r['all_ok'] else 'NO'} |\n"
        )
    return "".join(out)


def machine(extra_jvm_flags: tuple[str, ...] = BENCH_JVM_FLAGS) -> dict:
    info: dict = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_gib"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
        with open("/proc/loadavg") as f:
            info["loadavg_at_start"] = f.read().split()[:3]
    except OSError:
        pass
    try:
        import pyarrow
        import pyspark

        info["pyspark"] = pyspark.__version__
        info["pyarrow"] = pyarrow.__version__
    except ImportError:
        pass
    try:
        v = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr.splitlines()
        info["java"] = v[0] if v else None
        info["git_commit"] = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30
            ).stdout.strip()
            or None
        )
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        info["git_modified"] = [line[3:] for line in status.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    info["rocketmq"] = "5.5.0 (embedded, 1 broker, default pull limits: 32 msgs / 256 KiB per pull from memory)"
    info["jvm_flags"] = list(extra_jvm_flags)
    return info


# ------------------------------------------------------------------------------------------------ profiles


def run_dataset(
    h: Harness,
    messages: int,
    queues: int,
    body_size: int,
    lines: list[str],
    repeat: int,
    warmup: int,
    jvm_warmup: int,
    warm_passes: int = 0,
    interleave: bool = False,
) -> tuple[Dataset, list[dict]]:
    ds = h.load(messages, queues, body_size)
    h.warm_spark(lines, ds, warm_passes)
    results = []
    spark = [name for name in lines if name.startswith("spark")] if interleave else []
    for name in lines:
        if name in spark:
            if name == spark[0]:
                results += h.measure_interleaved(spark, ds, repeat, warmup)
            continue
        # The Java readers (JIT) and Spark (worker start-up, JIT) get warm-up runs; the Python client has no JIT
        # and runs after the Java lines have warmed the broker.
        w = jvm_warmup if name.startswith("java") else 0 if name.startswith("client") else warmup
        results.append(h.measure(name, ds, repeat, w))
    results.sort(key=lambda res: lines.index(res.name))
    rows = summarize(results, ds)
    print(table(rows, ds) + ratios_md(ratios(rows)), flush=True)
    return ds, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--profile",
        choices=("default", "large", "scaling"),
        default="default",
        help="default: 1M messages; large: 5M; scaling: messages 1M->5M, queues 4->32, body 100B->10KiB",
    )
    ap.add_argument("--messages", type=int, help="messages to load (default 1,000,000; large 5,000,000)")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--body-size", type=int, default=100)
    ap.add_argument("--repeat", type=int, help="timed runs per line (default 3; scaling 1)")
    ap.add_argument("--warmup", type=int, help="untimed runs of each Spark line before the timed ones (default 1)")
    ap.add_argument(
        "--jvm-warmup",
        type=int,
        help="untimed runs of each Java line before the timed ones "
        "(default 2: the JIT keeps improving them over the first runs)",
    )
    ap.add_argument(
        "--spark-warm-passes",
        type=int,
        default=0,
        help="untimed runs of every Spark line in turn before any line is timed (default 0): Spark's JIT "
        "then favours no line for its place in the order",
    )
    ap.add_argument(
        "--interleave",
        action="store_true",
        help="time the Spark lines in rounds (every line once per round, every other round in the other order) "
        "instead of line after line: their ratios then do not depend on the order of --lines",
    )
    ap.add_argument("--lines", help="comma-separated subset of: " + ", ".join(LINE_DOCS))
    ap.add_argument(
        "--quick",
        action="store_true",
        help="tiny smoke run: 20,000 messages, 1 repeat, no warm-up, no latency, no cProfile, every JVM with the "
        "tests' flags (jvm-shim/jvm-flags.txt: C1 only, serial GC)",
    )
    ap.add_argument("--no-latency", action="store_true", help="skip the streaming latency measurement")
    ap.add_argument("--latency-rate", type=int, default=20_000, help="messages/s for the latency measurement")
    ap.add_argument("--latency-seconds", type=float, default=30.0)
    ap.add_argument(
        "--latency-lines",
        default=",".join(LATENCY_LINES),
        help="comma-separated latency lines: " + ", ".join(LATENCY_LINES + LATENCY_VARIANTS),
    )
    ap.add_argument(
        "--latency-rounds",
        type=int,
        default=1,
        help="rounds of the latency lines; every other round runs them in the other order",
    )
    ap.add_argument(
        "--latency-warmup",
        type=float,
        default=0.0,
        help="seconds of an untimed run of each latency line before the rounds (0: none)",
    )
    ap.add_argument(
        "--latency-only",
        action="store_true",
        help="only the latency lines: ours and Spark's Kafka source's (builds benchmarks/kafka-shim)",
    )
    ap.add_argument("--no-cprofile", action="store_true", help="skip the cProfile of the Python reader")
    ap.add_argument("--cprofile-messages", type=int, default=500_000)
    ap.add_argument("--spark-master", default="local[*]")
    ap.add_argument("--jvm-heap", default="1g")
    ap.add_argument("--rss-interval", type=float, default=0.2, help="seconds between /proc samples")
    ap.add_argument("--output", help="JSON path (default benchmarks/results/latest.json)")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.latency_lines.split(",")) - set(LATENCY_LINES + LATENCY_VARIANTS))
    if unknown:
        ap.error(f"unknown --latency-lines {', '.join(unknown)}; known: {', '.join(LATENCY_LINES + LATENCY_VARIANTS)}")

    if args.quick:
        args.messages = args.messages or 20_000
        args.repeat = args.repeat or 1
        args.warmup = 0 if args.warmup is None else args.warmup
        args.jvm_warmup = 0 if args.jvm_warmup is None else args.jvm_warmup
        args.no_latency = True
        args.no_cprofile = True
    default_messages = 5_000_000 if args.profile == "large" else 1_000_000
    args.messages = args.messages or default_messages
    args.repeat = args.repeat or (1 if args.profile == "scaling" else 3)
    args.warmup = 1 if args.warmup is None else args.warmup
    args.jvm_warmup = 2 if args.jvm_warmup is None else args.jvm_warmup
    lines = args.lines.split(",") if args.lines else (SCALING_LINES if args.profile == "scaling" else DEFAULT_LINES)
    for name in lines:
        if name not in LINE_DOCS:
            ap.error(f"unknown line {name!r}; known: {', '.join(LINE_DOCS)}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    out_path = Path(args.output) if args.output else RESULTS / "latest.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "command": " ".join([Path(sys.executable).name, "-m", "benchmarks.run", *(argv or sys.argv[1:])]),
        "profile": args.profile,
        "quick": args.quick,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(() if args.quick else BENCH_JVM_FLAGS),
        "repeat": args.repeat,
        "warmup": args.warmup,
        "jvm_warmup": args.jvm_warmup,
    }
    t_start = time.perf_counter()
    h = Harness(args)
    failed = False
    try:
        h.start_cluster()
        if args.latency_only or any(n in KAFKA_LINES for n in lines):
            h.start_kafka()
        if args.quick and any(n.startswith("spark") for n in lines):
            h.prestart_spark()
        if args.latency_only:
            report["latency"] = h.latency()
            report["versus_anchors"] = all_ratios([], report["latency"])
            report["table_md"] = latency_md(report["latency"]) + ratios_md(report["versus_anchors"])
            print(report["table_md"], flush=True)
            failed |= any("error" in r for rnd in report["latency"]["rounds"] for r in rnd["lines"].values())
        elif args.profile == "scaling":
            points = []
            plan = (
                [("messages", m, args.queues, args.body_size) for m in (1_000_000, 2_000_000, 5_000_000)]
                + [("queues", 1_000_000, q, args.body_size) for q in (4, 16, 32)]
                + [("body", 500_000, args.queues, 1024), ("body", 100_000, args.queues, 10 * 1024)]
            )
            if args.quick:
                plan = [(axis, max(1000, m // 200), q, b) for axis, m, q, b in plan]
            for axis, m, q, b in plan:
                t0 = time.perf_counter()
                ds, rows = run_dataset(h, m, q, b, lines, args.repeat, args.warmup, args.jvm_warmup)
                points.append(
                    {
                        "axis": axis,
                        "dataset": vars(ds),
                        "lines": rows,
                        "seconds_total": round(time.perf_counter() - t0, 1),
                    }
                )
                failed |= not all(r["all_ok"] for r in rows)
                report["scaling"] = points
                out_path.write_text(json.dumps(report, indent=2, default=str))
        else:
            ds, rows = run_dataset(
                h,
                args.messages,
                args.queues,
                args.body_size,
                lines,
                args.repeat,
                args.warmup,
                args.jvm_warmup,
                args.spark_warm_passes,
                args.interleave,
            )
            report["dataset"] = vars(ds)
            report["lines"] = rows
            report["table_md"] = table(rows, ds)
            failed |= not all(r["all_ok"] for r in rows)
            out_path.write_text(json.dumps(report, indent=2, default=str))
            if any(n.startswith("spark") for n in lines) and not args.quick:
                report["spark_fixed_overhead_s"] = h.spark_fixed_overhead()
                h.log(f"spark-batch over 8 messages in 8 queues: {report['spark_fixed_overhead_s']} s")
            if not args.no_latency:
                report["latency"] = h.latency()
                print(latency_md(report["latency"]), flush=True)
            report["versus_anchors"] = all_ratios(rows, report.get("latency"))
            report["table_md"] += latency_md(report.get("latency")) + ratios_md(report["versus_anchors"])
            print(ratios_md(report["versus_anchors"]), flush=True)
            if not args.no_cprofile:
                from benchmarks.profile_reader import profile

                h.log(f"cProfile of the Python reader over {args.cprofile_messages:,} messages")
                report["reader_profile"] = profile(h.mq.name_server, ds.topic, args.cprofile_messages, out_path.parent)
                h.log("reader profile: " + json.dumps(report["reader_profile"]["stages"]))
    except Exception as e:
        failed = True
        report["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    finally:
        h.close()
        report["seconds_total"] = round(time.perf_counter() - t_start, 1)
        try:
            with open("/proc/loadavg") as f:
                report["machine"]["loadavg_at_end"] = f.read().split()[:3]
        except OSError:
            pass
        report["log"] = h.log_lines
        out_path.write_text(json.dumps(report, indent=2, default=str))
        if "table_md" in report:
            (out_path.with_suffix(".md")).write_text(report["table_md"])
        print(f"wrote {out_path} ({report['seconds_total']:.0f} s in all)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
