"""The demo (the README's main-job command): exactly-once streaming from a real RocketMQ into Parquet.

1. Starts the embedded Apache RocketMQ (name server + 2 brokers) and a steady producer of sample events.
2. Runs a streaming query (checkpoint, Parquet sink) and prints a summary of each micro-batch.
3. Stops it, restarts it from its checkpoint, and shows it continued where it stopped.
4. Stops the producer, drains the rest with Trigger.AvailableNow, and checks the sink holds every message once,
   and that the consumer group's offsets on the brokers caught up.
5. Writes one aggregate (events per user) back to a topic through the sink, exactly once, and reads it back.
6. Backfills an offset range with a batch query. Ends by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from rmq_spark.client.errors import RocketMQError
from rmq_spark.source.progress import query_lag
from rmq_spark_testing.embedded import EmbeddedClusterError, EmbeddedRocketMQ

TOPIC = "DemoEvents"
TOTALS = "DemoUserTotals"
GROUP = "demo-pipeline"
ACTIONS = ("click", "view", "purchase")


class Producer(threading.Thread):
    """Sends a few sample events every 100 ms with the official Java producer until stopped."""

    def __init__(self, mq: EmbeddedRocketMQ, per_tick: int = 20) -> None:
        super().__init__(daemon=True)
        self.mq, self.per_tick, self.sent = mq, per_tick, 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            events: list[dict] = []
            for _ in range(self.per_tick):
                n = self.sent + len(events)
                action = ACTIONS[n % 3]
                body = json.dumps(
                    {
                        "event": n,
                        "user": f"user-{n % 17}",
                        "action": action,
                        "amount": round((n % 50) * 1.5, 2) if action == "purchase" else None,
                    }
                )
                events.append({"body": body, "tags": action, "keys": [f"user-{n % 17}"]})
            try:
                self.mq.produce(TOPIC, events)
            except EmbeddedClusterError:
                return  # the cluster is shutting down
            self.sent += len(events)
            self.stopped.wait(0.1)


def _spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warnings.filterwarnings("ignore", category=FutureWarning)  # pyspark's note on pandas 3
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rmq-spark-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _stream(spark, mq: EmbeddedRocketMQ, out: Path, checkpoint: Path, *, available_now: bool = False):
    df = (
        spark.readStream.format("rocketmq")
        .option("nameServer", mq.name_server)
        .option("topic", TOPIC)
        .option("startingOffsets", "earliest")
        .option("consumerGroup", GROUP)  # offsets are mirrored to this group after each commit
        .option("maxMessagesPerTrigger", "500")
        .load()
    )
    writer = (
        df.selectExpr("brokerName", "queueId", "queueOffset", "tags", "CAST(body AS STRING) AS event", "storeTimestamp")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="1 second")
    return writer.start()


def _summarize(query, seen: set[int]) -> None:
    for p in query.recentProgress:
        if p["batchId"] in seen or not p["numInputRows"]:
            continue
        seen.add(p["batchId"])
        lag = query_lag(p)[0]
        print(
            f"  batch {p['batchId']:>3}: {p['numInputRows']:>5} messages, "
            f"{p.get('processedRowsPerSecond', 0):>8.0f} rows/s"
            + (f", {lag.total} behind the brokers (max {lag.max} on one queue)" if lag else ""),
            flush=True,
        )


def _run_for(query, batches: int, timeout: float = 120) -> None:
    """Let the query commit ``batches`` non-empty micro-batches, then stop it between two triggers."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < batches and time.monotonic() < deadline:
        time.sleep(0.3)
        _summarize(query, seen)
    while query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()
    _summarize(query, seen)


def run(batches: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="rmq-spark-demo-"))
    out, checkpoint = work / "events", work / "checkpoint"
    try:
        print("== Starting the embedded Apache RocketMQ (name server + 2 brokers in one JVM) ...", flush=True)
        with EmbeddedRocketMQ(brokers=2) as mq:
            print(
                f"   name server {mq.name_server}; brokers " + ", ".join(f"{n} at {a}" for n, a in mq.brokers.items())
            )
            mq.create_topic(TOPIC, queues=4)
            producer = Producer(mq)
            producer.start()
            print(f"== Producing sample events to topic {TOPIC!r} (8 queues) with the official Java producer")
            spark = _spark()

            print(f"== Streaming query, run 1: RocketMQ -> Parquet {out}, at least {batches} micro-batches")
            _run_for(_stream(spark, mq, out, checkpoint), batches)
            first = spark.read.parquet(str(out))
            n1 = first.count()
            print(f"   stopped. The sink holds {n1} events.")

            print(f"== Streaming query, run 2: restarted from the checkpoint, at least {batches} micro-batches")
            _run_for(_stream(spark, mq, out, checkpoint), batches)
            n2 = spark.read.parquet(str(out)).count()
            print(f"   stopped. The sink holds {n2} events: run 2 added {n2 - n1}, continuing where run 1 stopped.")

            producer.stopped.set()
            producer.join()
            print(f"== Producer stopped after {producer.sent} events; draining the rest with Trigger.AvailableNow")
            _stream(spark, mq, out, checkpoint, available_now=True).awaitTermination()
            events = spark.read.parquet(str(out))
            total = events.count()
            distinct = events.select("brokerName", "queueId", "queueOffset").distinct().count()
            print(
                f"   the sink holds {total} events, {distinct} distinct (broker, queue, offset); "
                f"{producer.sent} were sent -> "
                + ("exactly once." if total == distinct == producer.sent else "MISMATCH!")
            )
            print("   events per action:", {r["tags"]: r["count"] for r in events.groupBy("tags").count().collect()})

            print(f"== Consumer group {GROUP!r} on the brokers (mirrored after each committed batch):")
            for o in mq.offsets(TOPIC):
                committed = mq.query_consumer_offset(GROUP, TOPIC, o["brokerName"], o["queueId"])
                print(
                    f"   {o['brokerName']}/{o['queueId']}: committed {committed:>5}, max {o['maxOffset']:>5}, "
                    f"lag {o['maxOffset'] - committed}"
                )

            print(f"== Writing events per user back to topic {TOTALS!r} (exactly once, keyed by user) and reading it:")
            mq.create_topic(TOTALS, queues=2)
            from pyspark.sql import functions as F

            totals = (
                events.select(F.get_json_object("event", "$.user").alias("user"))
                .groupBy("user")
                .count()
                .select(
                    F.col("user").alias("shardingKey"),
                    F.col("user").alias("keys"),
                    F.to_json(F.struct("user", "count")).alias("body"),
                )
            )
            (
                totals.write.format("rocketmq")
                .mode("append")
                .option("nameServer", mq.name_server)
                .option("topic", TOTALS)
                .option("deliveryGuarantee", "exactly_once")
                .option("producerGroup", "demo-totals")
                .save()
            )
            back = (
                spark.read.format("rocketmq")
                .option("nameServer", mq.name_server)
                .option("topic", TOTALS)
                .load()
                .select("brokerName", "queueId", F.col("body").cast("string").alias("body"))
            )
            rows = sorted(back.collect(), key=lambda r: json.loads(r["body"])["user"])
            for r in rows[:3]:
                print(f"   {r['brokerName']}/{r['queueId']}: {r['body']}")
            written = sum(json.loads(r["body"])["count"] for r in rows)
            print(
                f"   ... {len(rows)} users, {written} events in all -> "
                + ("matches the sink." if written == total and len(rows) == 17 else "MISMATCH!")
            )

            # every other queue: from latest (-1) to latest, i.e. nothing
            others = {f"{b}/{q}": -1 for b in mq.brokers for q in range(4)}
            start = {TOPIC: {**others, "broker-a/0": 10}}
            end = {TOPIC: {**others, "broker-a/0": 15}}
            print("== Batch backfill of offsets [10, 15) of broker-a/0:")
            backfill = (
                spark.read.format("rocketmq")
                .option("nameServer", mq.name_server)
                .option("topic", TOPIC)
                .option("startingOffsets", json.dumps(start))
                .option("endingOffsets", json.dumps(end))
                .load()
            )
            for r in backfill.select("queueOffset", "tags", "keys", "body").collect():
                print(f"   offset {r['queueOffset']}: tag {r['tags']:<8} keys {r['keys']} {bytes(r['body']).decode()}")

            print(f"== The same topic through the gRPC transport (option endpoint={mq.gateway}, the v2 pull gateway):")
            over_grpc = spark.read.format("rocketmq").option("endpoint", mq.gateway).option("topic", TOPIC).load()
            over_remoting = (
                spark.read.format("rocketmq").option("nameServer", mq.name_server).option("topic", TOPIC).load()
            )
            n_grpc, differ = over_grpc.count(), over_grpc.exceptAll(over_remoting).count()
            print(
                f"   {n_grpc} rows; {differ} of them differ from the rows read over remoting -> "
                + ("identical." if differ == 0 and n_grpc == total else "MISMATCH!")
            )
            spark.stop()
        print("== Done: RocketMQ stopped, temporary files removed.")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rmq_spark_testing.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--batches", type=int, default=5, help="micro-batches in each streaming run")
    args = parser.parse_args(argv)
    try:
        run(args.batches)
    except RocketMQError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
