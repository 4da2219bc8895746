"""A streaming query run as its own process by the sink's delivery tests, so that they can SIGKILL it.

usage: python sink_job.py NAME_SERVER SOURCE_TOPIC (TARGET_TOPIC GUARANTEE PRODUCER_GROUP CHECKPOINT_DIR)...
For each target, one query reads SOURCE_TOPIC from the earliest offsets in small micro-batches and writes each
message to TARGET_TOPIC through the rocketmq sink with deliveryGuarantee GUARANTEE, marked with its source position
in property ``src``. Runs until killed.
"""
from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def writer(spark, name_server: str, source: str, target: str, guarantee: str, group: str, checkpoint: str):
    """The query, up to its trigger (the tests run its last, available-now part in their own session)."""
    df = (spark.readStream.format("rocketmq").option("nameServer", name_server).option("topic", source)
          .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "600").load())
    out = df.select(F.col("body"), F.create_map(F.lit("src"), F.concat_ws("/", "brokerName", "queueId",
                                                                            "queueOffset")).alias("properties"))
    return (out.writeStream.format("rocketmq").option("nameServer", name_server).option("topic", target)
            .option("deliveryGuarantee", guarantee).option("producerGroup", group)
            .option("checkpointLocation", checkpoint))


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder.master("local[2]").appName("rmq-spark-sink-delivery")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    name_server, source, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
    for i in range(0, len(targets), 4):
        writer(spark, name_server, source, *targets[i:i + 4]).trigger(processingTime="100 milliseconds").start()
    print("STARTED", flush=True)
    spark.streams.awaitAnyTermination()

if __name__ == "__main__":
    main()
