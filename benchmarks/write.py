"""The sink's benchmark: a Spark batch write of N messages against the official Java producer's batch send, on the
same embedded broker in one run (ratios, not absolute figures, are what compare across runs).

usage: python -m benchmarks.write [--messages 1000000] [--body-size 100] [--queues 4] [--repeat 3]
Lines: java-produce (DefaultMQProducer.send(batch, queue), 64 per batch, 8 in flight: jvm-shim BulkLoad) and
spark-write (df.write.format("rocketmq"), at_least_once, default settings). Each writes into its own fresh topic;
the best of --repeat runs counts. Prints a JSON report.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

from benchmarks.run import BENCH_JVM_FLAGS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.write", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--body-size", type=int, default=100)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spark-master", default="local[*]")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from benchmarks.spark_lines import new_session
    from rmq_spark_testing.embedded import EmbeddedRocketMQ

    n, size = args.messages, args.body_size
    with EmbeddedRocketMQ(brokers=1, jvm_flags=BENCH_JVM_FLAGS) as mq:
        spark = new_session(args.spark_master)

        def fresh() -> str:
            topic = f"write-bench-{uuid.uuid4().hex[:8]}"
            mq.create_topic(topic, queues=args.queues)
            return topic

        def held(topic: str) -> int:
            return sum(o["maxOffset"] - o["minOffset"] for o in mq.offsets(topic))

        def java() -> float:
            topic = fresh()
            t0 = time.perf_counter()
            mq.produce_bulk(topic, n, size, timeout=max(600.0, n / 5000))
            seconds = time.perf_counter() - t0
            assert held(topic) == n
            return seconds

        rows = (
            spark.range(0, n, numPartitions=spark.sparkContext.defaultParallelism)
            .select(F.expr(f"CAST(lpad(CAST(id AS STRING), {size}, 'x') AS BINARY)").alias("body"))
            .cache()
        )
        rows.count()  # build the input once: the line measures the write

        def spark_write() -> float:
            topic = fresh()
            t0 = time.perf_counter()
            (
                rows.write.format("rocketmq")
                .mode("append")
                .option("nameServer", mq.name_server)
                .option("topic", topic)
                .save()
            )
            seconds = time.perf_counter() - t0
            assert held(topic) == n
            return seconds

        results = {}
        for name, fn in (("java-produce", java), ("spark-write", spark_write)):
            fn() if n <= 200_000 else None  # warm-up of a small run's JIT and workers
            times = [fn() for _ in range(args.repeat)]
            results[name] = {"seconds": min(times), "msgs_per_s": round(n / min(times)), "runs": times}
        spark.stop()
    report = {
        "messages": n,
        "body_size": size,
        "queues": args.queues,
        "lines": results,
        "spark_write_vs_java": round(results["spark-write"]["msgs_per_s"] / results["java-produce"]["msgs_per_s"], 3),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
