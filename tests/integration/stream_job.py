"""A streaming query run as its own process by the exactly-once tests, so that they can SIGKILL it.

usage: python stream_job.py SOURCE TOPIC GROUP OUT_DIR CHECKPOINT_DIR (forever|available-now) [STARTING]
SOURCE is nameServer=HOST:PORT (remoting) or endpoint=HOST:PORT (the gRPC pull gateway).
Reads TOPIC from STARTING (default earliest) offsets in small micro-batches into a Parquet sink with a checkpoint. ``forever`` runs until
killed; ``available-now`` reads what is there and exits 0.
"""
from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    source, topic, group, out_dir, checkpoint, mode = sys.argv[1:7]
    source_option, _, address = source.partition("=")
    starting = sys.argv[7] if len(sys.argv) > 7 else "earliest"
    spark = (SparkSession.builder.master("local[2,4]").appName("rmq-spark-exactly-once")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.format("rocketmq").option(source_option, address).option("topic", topic)
          .option("startingOffsets", starting).option("consumerGroup", group)
          .option("maxMessagesPerTrigger", "400").load())
    writer = (df.select("brokerName", "queueId", "queueOffset", "body", "msgId").writeStream.format("parquet")
              .option("path", out_dir).option("checkpointLocation", checkpoint))
    if mode == "available-now":
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        print("STARTED", flush=True)
        writer.trigger(processingTime="100 milliseconds").start().awaitTermination()


if __name__ == "__main__":
    main()
