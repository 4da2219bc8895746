"""A driver of streaming queries run as its own process by test_kills, so that it can be SIGKILLed.

usage: python kill_job.py NAME_SERVER ENDPOINT SOURCE_TOPIC GROUP OUT_DIR CHECKPOINT (TARGET GUARANTEE
       PRODUCER_GROUP CHECKPOINT)...
One query reads SOURCE_TOPIC through the gRPC gateway ENDPOINT (or the name server when ENDPOINT is "-") into
Parquet files in OUT_DIR, mirroring its offsets
to consumer group GROUP. For each target, one more query reads SOURCE_TOPIC through the name server and writes
each message to TARGET through the rocketmq sink with deliveryGuarantee GUARANTEE, marked with its source position
in property ``src``. Every query reads from the earliest offsets in small micro-batches, until killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback

from pyspark.sql import functions as F

from tests.support.sessions import local_session


def copy_writer(
    spark,
    endpoint: str,
    topic: str,
    group: str,
    out_dir: str,
    checkpoint: str,
    starting: str = "earliest",
    limit: int = 400,
    name_server: str | None = None,
):
    """The Parquet query, up to its trigger, at most ``limit`` messages a batch (the test runs its last,
    available-now part in its own session); through ``name_server`` when ``endpoint`` is "-"."""
    reader = spark.readStream.format("rocketmq")
    reader = reader.option("nameServer", name_server) if endpoint == "-" else reader.option("endpoint", endpoint)
    df = (
        reader.option("topic", topic)
        .option("startingOffsets", starting)
        .option("consumerGroup", group)
        .option("maxMessagesPerTrigger", str(limit))
        .load()
    )
    return (
        df.select("brokerName", "queueId", "queueOffset", "body", "msgId")
        .writeStream.format("parquet")
        .option("path", out_dir)
        .option("checkpointLocation", checkpoint)
    )


def sink_writer(
    spark, name_server: str, source: str, target: str, guarantee: str, group: str, checkpoint: str, limit: int = 600
):
    """A sink query, up to its trigger, at most ``limit`` messages a batch."""
    df = (
        spark.readStream.format("rocketmq")
        .option("nameServer", name_server)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", str(limit))
        .load()
    )
    out = df.select(
        F.col("body"),
        F.create_map(F.lit("src"), F.concat_ws("/", "brokerName", "queueId", "queueOffset")).alias("properties"),
    )
    return (
        out.writeStream.format("rocketmq")
        .option("nameServer", name_server)
        .option("topic", target)
        .option("deliveryGuarantee", guarantee)
        .option("producerGroup", group)
        .option("checkpointLocation", checkpoint)
    )


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    name_server, endpoint, source, group, out_dir, checkpoint, *targets = sys.argv[1:]
    spark = local_session("rmq-spark-kills", "local[2,4]")
    queries = [copy_writer(spark, endpoint, source, group, out_dir, checkpoint, name_server=name_server)]
    queries += [sink_writer(spark, name_server, source, *targets[i : i + 4]) for i in range(0, len(targets), 4)]
    for query in queries:
        query.trigger(processingTime="100 milliseconds").start()
    try:
        spark.streams.awaitAnyTermination()
    finally:  # a failed query ends the driver at once, as a supervisor that restarts drivers would see it
        traceback.print_exc()
        _print_load()
        sys.stdout.flush()
        os._exit(1)


def _print_load() -> None:
    """The machine's load when the job failed, and the processes that used the most CPU: Spark's own deaths (a
    Python worker that did not connect back within its fixed 10 s) come from a starved machine."""
    print(f"load average at the failure: {os.getloadavg()}")
    try:
        top = subprocess.run(
            ["ps", "-eo", "pid,pgid,pcpu,etimes,rss,args", "--sort=-pcpu"], capture_output=True, text=True, timeout=10
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError) as e:
        top = [f"ps failed: {e}"]
    print("\n".join(line[:220] for line in top[:15]))


if __name__ == "__main__":
    main()
