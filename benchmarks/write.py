"""The sink's benchmark: Spark writes of N messages against the official Java producer on the same embedded broker
in one run (ratios, not absolute figures, are what compare across runs), and with --kafka Spark's Kafka sink against
Kafka's own producer on the benchmark's Kafka node.

usage: python -m benchmarks.write [--messages 1000000] [--body-size 100] [--queues 8] [--repeat 3] [--lines a,b]
                                  [--kafka] [--tx-in-flight 128] [--tx-threads 32] [--output PATH]

Lines (each run writes N messages into a fresh topic and is checked to have stored exactly N):
  java-produce             DefaultMQProducer.send(batch, queue), 64 per batch, 8 in flight (jvm-shim BulkLoad)
  java-transactional       the exactly-once floor: N transactions of the official Java client, each an asynchronous
                           half message (the broker takes no half message in a batch) committed by one two-way
                           END_TRANSACTION when stored, --tx-in-flight transactions in flight (jvm-shim
                           TransactionalLoad, mode async)
  java-transactional-sync  TransactionMQProducer.sendMessageInTransaction, the official API (synchronous per
                           message, its END_TRANSACTION one-way), from --tx-threads threads
  spark-write              df.write.format("rocketmq") of a cached DataFrame, at_least_once, default settings
  spark-write-stream       writeStream.format("rocketmq") at_least_once of the same rows from a parquet copy
                           (readStream.parquet, Trigger.AvailableNow: one micro-batch)
  spark-write-eo           the same stream with deliveryGuarantee=exactly_once (halves, one END_TRANSACTION each)
  kafka-produce            (--kafka) Kafka's Java producer: linger.ms=10, batch.size=256 KiB, acks=all, idempotence
  spark-kafka-write        (--kafka) df.write.format("kafka") of the same rows (value = body), the producer
                           defaults of Spark's kafka-clients 3.9.2 (linger.ms=0, batch.size=16 KiB, acks=all)
  spark-kafka-write-tuned  (--kafka) the same with kafka.linger.ms=10 and kafka.batch.size=262144 (kafka-produce's)

The best of --repeat runs counts (after --warmup untimed runs of each line). Every timed run samples the process tree
(benchmarks.rss): the peak RSS of the largest Python process other than the harness (a Spark Python worker: a write
task, or the streaming sink's driver-side runner; Spark reuses its workers, so ``python_worker_mb_at_start`` says
what earlier runs left them) and of all Python processes together, and the CPU seconds of the best run. Prints a
JSON report (with --output also written there) and a table with the ratios on stderr; exits 1 when a line failed or
a run stored other than N.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from benchmarks.run import BENCH_JVM_FLAGS

ROCKETMQ_LINES = (
    "java-produce",
    "java-transactional",
    "java-transactional-sync",
    "spark-write",
    "spark-write-stream",
    "spark-write-eo",
)
KAFKA_LINES = ("kafka-produce", "spark-kafka-write", "spark-kafka-write-tuned")
ALL_LINES = ROCKETMQ_LINES + KAFKA_LINES
# Kafka's producer settings of kafka-produce (benchmarks/kafka-shim Tools.produce), given to spark-kafka-write-tuned
KAFKA_TUNED_WRITE = {"kafka.linger.ms": "10", "kafka.batch.size": str(256 * 1024)}

# the broker's own topics of transactions: half messages (and those its check writes again), ended halves' ops
TRANSACTION_TOPICS = {"half_topic_writes": "RMQ_SYS_TRANS_HALF_TOPIC", "op_topic_writes": "RMQ_SYS_TRANS_OP_HALF_TOPIC"}

# (numerator, denominator, target): the ratios of msgs/s the report gives when both lines ran
RATIOS = (
    ("spark-write", "java-produce", 1.0),
    ("spark-write-eo", "spark-write", 0.7),
    ("spark-write-eo", "spark-write-stream", None),
    ("spark-write-stream", "spark-write", None),
    ("spark-write-eo", "java-transactional", None),
    ("java-transactional", "spark-write", None),  # the most the broker leaves the eo ratio
    ("java-transactional", "java-produce", None),
    ("java-transactional-sync", "java-transactional", None),
    ("spark-kafka-write", "kafka-produce", None),
    ("spark-kafka-write-tuned", "kafka-produce", None),
)


def _lines(arg: str | None, kafka: bool) -> list[str]:
    if arg is None:
        return list(ROCKETMQ_LINES + (KAFKA_LINES if kafka else ()))
    lines = [s.strip() for s in arg.split(",") if s.strip()]
    unknown = [s for s in lines if s not in ALL_LINES]
    if unknown:
        raise SystemExit(f"unknown line(s) {', '.join(unknown)}; the lines are {', '.join(ALL_LINES)}")
    return lines


def ratios(results: dict[str, dict]) -> list[dict]:
    """The RATIOS whose two lines both ran, with their target and whether it is met."""
    out = []
    for num, den, target in RATIOS:
        a, b = results.get(num), results.get(den)
        if not a or not b or not a.get("msgs_per_s") or not b.get("msgs_per_s"):
            continue
        value = round(a["msgs_per_s"] / b["msgs_per_s"], 3)
        row: dict = {"ratio": f"{num} / {den}", "value": value}
        if target is not None:
            row["target"] = target
            row["met"] = value >= target
        out.append(row)
    return out


def table(report: dict) -> str:
    """The report as text: a row per line, then the ratios."""
    rows = [
        f"{report['messages']:,} messages x {report['body_size']} B, {report['queues']} queues "
        f"(best of {report['repeat']})",
        f"{'line':<24} {'msgs/s':>10} {'s':>8} {'ok':>4} {'py worker MB':>13} {'py total MB':>12}",
    ]
    for name, r in report["lines"].items():
        if "error" in r:
            rows.append(f"{name:<24} ERROR {r['error']}")
            continue
        rss = r["rss"]
        rows.append(
            f"{name:<24} {r['msgs_per_s']:>10,} {r['seconds']:>8.2f} {'yes' if r['ok'] else 'NO':>4} "
            f"{rss['python_worker_mb']:>13.0f} {rss['python_total_mb']:>12.0f}"
        )
    for x in report["ratios"]:
        verdict = "" if "target" not in x else f"  (target >= {x['target']}: {'met' if x['met'] else 'NOT MET'})"
        rows.append(f"{x['ratio']:<45} {x['value']:.3f}{verdict}")
    return "\n".join(rows)


def _peaks(runs: list[dict]) -> dict:
    """The RSS peaks over a line's timed runs."""
    keys = ("python_worker_mb", "python_total_mb", "python_driver_mb", "python_processes_max")
    out: dict = {k: max(r["rss"][k] for r in runs) for k in keys}
    out["python_worker_mb_at_start"] = round(min(r["rss"]["python_worker_mb_at_start"] for r in runs), 1)
    jvms = sorted({k for r in runs for k in r["rss"]["jvm_mb"]})
    out["jvm_mb"] = {k: max(r["rss"]["jvm_mb"].get(k, 0) for r in runs) for k in jvms}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.write", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--body-size", type=int, default=100)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--warmup", type=int, default=None, help="untimed runs of each line first (default 1 up to 200,000 messages)"
    )
    ap.add_argument("--lines", default=None, help=f"a subset, comma-separated, of {', '.join(ALL_LINES)}")
    ap.add_argument("--kafka", action="store_true", help="add the Kafka lines (starts the benchmark's Kafka node)")
    ap.add_argument("--tx-in-flight", type=int, default=128, help="java-transactional: transactions in flight")
    ap.add_argument("--tx-threads", type=int, default=32, help="java-transactional-sync: sending threads")
    ap.add_argument("--spark-master", default="local[*]")
    ap.add_argument("--output", default=None, help="also write the JSON report to this file")
    args = ap.parse_args(argv)
    lines = _lines(args.lines, args.kafka)
    warmup = args.warmup if args.warmup is not None else (1 if args.messages <= 200_000 else 0)

    from pyspark.sql import functions as F

    from benchmarks.rss import TreeSampler
    from benchmarks.spark_lines import new_session
    from rmq_spark_testing.embedded import EmbeddedRocketMQ

    n, size = args.messages, args.body_size
    long_wait = max(600.0, n / 1000)
    kafka = None
    scratch = Path(tempfile.mkdtemp(prefix="rmq-bench-write-"))
    results: dict[str, dict] = {}
    with EmbeddedRocketMQ(brokers=1, jvm_flags=BENCH_JVM_FLAGS) as mq:
        try:
            jars = None
            if any(line in KAFKA_LINES for line in lines):
                from benchmarks.kafka_broker import EmbeddedKafka, spark_kafka_jars

                jars = spark_kafka_jars()
                kafka = EmbeddedKafka().start()
            spark = new_session(args.spark_master, jars=jars)
            labels = {mq.pid: "shim", **({kafka.pid: "kafka"} if kafka is not None else {})}

            def fresh() -> str:
                topic = f"write-bench-{uuid.uuid4().hex[:8]}"
                mq.create_topic(topic, queues=args.queues)
                return topic

            def held(topic: str) -> int:
                return sum(o["maxOffset"] - o["minOffset"] for o in mq.offsets(topic))

            def java() -> dict:
                topic = fresh()
                t0 = time.perf_counter()
                mq.produce_bulk(topic, n, size, timeout=max(600.0, n / 5000))
                return {"seconds": time.perf_counter() - t0, "stored": held(topic)}

            def java_transactional(mode: str, concurrency: int) -> Callable[[], dict]:
                def run() -> dict:
                    topic = fresh()
                    t0 = time.perf_counter()
                    r = mq.produce_transactional(topic, n, size, mode=mode, concurrency=concurrency, timeout=long_wait)
                    wall = time.perf_counter() - t0
                    # first half to the topic holding every message; the producer's start is not timed
                    return {
                        "seconds": r["seconds"],
                        "wall_seconds": wall,
                        "sent_seconds": r["sentSeconds"],
                        "busy_retries": r.get("busyRetries", 0),
                        "stored": held(topic),
                    }

                return run

            rows = (
                spark.range(0, n, numPartitions=spark.sparkContext.defaultParallelism)
                .select(F.expr(f"CAST(lpad(CAST(id AS STRING), {size}, 'x') AS BINARY)").alias("body"))
                .cache()
            )
            rows.count()  # build the input once: the line measures the write
            parquet = scratch / "rows.parquet"
            if any(line in ("spark-write-stream", "spark-write-eo") for line in lines):
                rows.write.parquet(str(parquet))  # one file per partition: the stream's one micro-batch

            def spark_write() -> dict:
                topic = fresh()
                t0 = time.perf_counter()
                (
                    rows.write.format("rocketmq")
                    .mode("append")
                    .option("nameServer", mq.name_server)
                    .option("topic", topic)
                    .save()
                )
                return {"seconds": time.perf_counter() - t0, "stored": held(topic)}

            def spark_stream(exactly_once: bool) -> Callable[[], dict]:
                def run() -> dict:
                    topic = fresh()
                    checkpoint = tempfile.mkdtemp(prefix="chk-", dir=scratch)
                    w = (
                        spark.readStream.schema(rows.schema)
                        .parquet(str(parquet))
                        .writeStream.format("rocketmq")
                        .option("nameServer", mq.name_server)
                        .option("topic", topic)
                        .option("checkpointLocation", checkpoint)
                        .trigger(availableNow=True)
                    )
                    if exactly_once:
                        w = w.option("deliveryGuarantee", "exactly_once").option("producerGroup", f"pg-{topic}")
                    t0 = time.perf_counter()
                    q = w.start()
                    q.awaitTermination()
                    seconds = time.perf_counter() - t0
                    if q.exception() is not None:
                        raise RuntimeError(f"the streaming write failed: {q.exception()}")
                    progress = [p for p in q.recentProgress if int(p["numInputRows"]) > 0]
                    shutil.rmtree(checkpoint, ignore_errors=True)
                    return {
                        "seconds": seconds,  # start() to termination: query start-up and the commit included
                        "add_batch_seconds": sum(p["durationMs"].get("addBatch", 0) for p in progress) / 1000,
                        "micro_batches": len(progress),
                        "input_rows": sum(int(p["numInputRows"]) for p in progress),
                        "stored": held(topic),
                    }

                return run

            def kafka_topic() -> str:
                assert kafka is not None
                topic = f"write-bench-{uuid.uuid4().hex[:8]}"
                kafka.create_topic(topic, partitions=args.queues)
                # An idempotent producer that sends at once to a topic just created sometimes never completes on
                # this node: its first batch is stored, its retry refused as OUT_OF_ORDER_SEQUENCE_NUMBER until
                # delivery.timeout.ms (120 s) expires (Kafka 4.1.1, seen from the third producer of a node on). With
                # the partitions' offsets answered and a moment's pause, it did not happen. Not timed.
                deadline = time.monotonic() + 30
                while kafka.command("count", topic)["partitions"] < args.queues and time.monotonic() < deadline:
                    time.sleep(0.1)
                time.sleep(2)
                return topic

            def kafka_produce() -> dict:
                assert kafka is not None
                topic = kafka_topic()
                t0 = time.perf_counter()
                own = kafka.produce(topic, n, size, timeout=long_wait)
                return {"seconds": time.perf_counter() - t0, "producer_seconds": own, "stored": kafka.count(topic)}

            def spark_kafka_write(options: dict[str, str]) -> Callable[[], dict]:
                def run() -> dict:
                    assert kafka is not None
                    topic = kafka_topic()
                    w = (
                        rows.select(F.col("body").alias("value"))
                        .write.format("kafka")
                        .mode("append")
                        .option("kafka.bootstrap.servers", kafka.bootstrap)
                        .option("topic", topic)
                    )
                    for k, v in options.items():
                        w = w.option(k, v)
                    t0 = time.perf_counter()
                    w.save()
                    return {"seconds": time.perf_counter() - t0, "stored": kafka.count(topic)}

                return run

            runners: dict[str, Callable[[], dict]] = {
                "java-produce": java,
                "java-transactional": java_transactional("async", args.tx_in_flight),
                "java-transactional-sync": java_transactional("sync", args.tx_threads),
                "spark-write": spark_write,
                "spark-write-stream": spark_stream(False),
                "spark-write-eo": spark_stream(True),
                "kafka-produce": kafka_produce,
                "spark-kafka-write": spark_kafka_write({}),
                "spark-kafka-write-tuned": spark_kafka_write(KAFKA_TUNED_WRITE),
            }

            def written(topic: str) -> int:
                """Messages the broker has written to a topic of its own (0 before it exists)."""
                try:
                    return sum(o["maxOffset"] for o in mq.offsets(topic))
                except Exception:
                    return 0

            def timed(fn: Callable[[], dict]) -> dict:
                before = TreeSampler(jvm_labels=labels)
                before.sample()  # Spark reuses its Python workers: what the earlier runs left them
                system = {name: written(topic) for name, topic in TRANSACTION_TOPICS.items()}
                with TreeSampler(jvm_labels=labels) as sampler:
                    r = fn()
                r["rss"] = {**sampler.peaks.as_dict(), "python_worker_mb_at_start": before.peaks.python_worker_mb}
                # a half the broker's transaction check found unended (older than transactionTimeOut, 6 s) is
                # written to the half topic again: more half writes than messages are the check's work
                for name, topic in TRANSACTION_TOPICS.items():
                    if grew := written(topic) - system[name]:
                        r[name] = grew
                return r

            for name in lines:
                fn = runners[name]
                print(f"[write] {name} ...", file=sys.stderr, flush=True)
                try:
                    for _ in range(warmup):
                        fn()
                    runs = [timed(fn) for _ in range(args.repeat)]
                except Exception as e:  # the report names it; the other lines still run
                    results[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
                    print(f"[write] {name} failed: {e}", file=sys.stderr, flush=True)
                    continue
                best = min(runs, key=lambda r: r["seconds"])
                extras = {k: v for k, v in best.items() if k not in ("seconds", "stored", "rss")}
                results[name] = {
                    "seconds": round(best["seconds"], 3),
                    "msgs_per_s": round(n / best["seconds"]),
                    "runs": [round(r["seconds"], 3) for r in runs],
                    "stored": [r["stored"] for r in runs],
                    "ok": all(r["stored"] == n for r in runs),
                    "rss": _peaks(runs),
                    "cpu_seconds": best["rss"]["cpu_seconds"],
                    **extras,
                }
                print(
                    f"[write] {name}: {results[name]['msgs_per_s']:,} msgs/s, stored {results[name]['stored']}",
                    file=sys.stderr,
                    flush=True,
                )
            spark.stop()
        finally:
            if kafka is not None:
                kafka.close()
            shutil.rmtree(scratch, ignore_errors=True)
    report = {
        "messages": n,
        "body_size": size,
        "queues": args.queues,
        "repeat": args.repeat,
        "warmup": warmup,
        "tx_in_flight": args.tx_in_flight,
        "tx_threads": args.tx_threads,
        "lines": results,
        "ratios": ratios(results),
    }
    for x in report["ratios"]:
        if x["ratio"] == "spark-write / java-produce":
            report["spark_write_vs_java"] = x["value"]  # the key of earlier reports
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(table(report), file=sys.stderr)
    failed = [name for name, r in results.items() if "error" in r or not r["ok"]]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
