"""A streaming query run as its own process by the exactly-once tests, so that they can SIGKILL it.

usage: python stream_job.py SOURCE TOPIC GROUP OUT_DIR CHECKPOINT_DIR
SOURCE is nameServer=HOST:PORT (remoting) or endpoint=HOST:PORT (the gRPC pull gateway).
Reads TOPIC from the earliest offsets in small micro-batches into a Parquet sink with a checkpoint, until killed.
"""
from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def writer(spark, source_option: str, address: str, topic: str, group: str, out_dir: str, checkpoint: str,
           starting: str = "earliest"):
    """The query, up to its trigger (the tests run its last, available-now part in their own session)."""
    df = (spark.readStream.format("rocketmq").option(source_option, address).option("topic", topic)
          .option("startingOffsets", starting).option("consumerGroup", group)
          .option("maxMessagesPerTrigger", "400").load())
    return (df.select("brokerName", "queueId", "queueOffset", "body", "msgId").writeStream.format("parquet")
            .option("path", out_dir).option("checkpointLocation", checkpoint))


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    source, topic, group, out_dir, checkpoint = sys.argv[1:6]
    source_option, _, address = source.partition("=")
    spark = (SparkSession.builder.master("local[2,4]").appName("rmq-spark-exactly-once")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print("STARTED", flush=True)
    (writer(spark, source_option, address, topic, group, out_dir, checkpoint)
     .trigger(processingTime="100 milliseconds").start().awaitTermination())

if __name__ == "__main__":
    main()
