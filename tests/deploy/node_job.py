"""A Spark job run from a node's virtualenv, which holds the release wheel and no checkout (tests/deploy). Its last
line of output is one JSON object.

usage: python node_job.py local  read-write NAME_SERVER SOURCE TARGET PRODUCER_GROUP
       spark-submit node_job.py cluster read-write NAME_SERVER SOURCE TARGET PRODUCER_GROUP
       spark-submit node_job.py cluster stream NAME_SERVER SOURCE OUT_DIR CHECKPOINT STOP_FILE

read-write: a batch read of SOURCE (its keys, each (broker, queue, offset)), then an exactly-once batch write of
every message to TARGET, marked with its source position in property ``src``.
stream: an exactly-once streaming read of SOURCE into Parquet files in OUT_DIR, in small micro-batches, until
STOP_FILE exists.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def _where_rmq_spark_loads(_) -> list[str]:
    import rmq_spark
    import rmq_spark._native

    return [rmq_spark.__file__, rmq_spark._native.__file__, sys.executable]


def placement(spark) -> dict:
    """Where the driver and the executors import rmq-spark and its compiled core from."""
    tasks = spark.sparkContext.defaultParallelism
    executors = spark.sparkContext.parallelize(range(tasks), tasks).map(_where_rmq_spark_loads).collect()
    import rmq_spark

    return {"driver": _where_rmq_spark_loads(None), "executors": sorted(set(map(tuple, executors))),
            "version": rmq_spark.__version__, "cargo": shutil.which("cargo")}


def read_write(spark, name_server: str, source: str, target: str, group: str) -> dict:
    df = spark.read.format("rocketmq").option("nameServer", name_server).option("topic", source).load()
    keys = [[r.brokerName, r.queueId, r.queueOffset] for r in df.select("brokerName", "queueId", "queueOffset")
            .collect()]
    out = df.select("body", F.create_map(F.lit("src"), F.concat_ws("/", "brokerName", "queueId", "queueOffset"))
                    .alias("properties"))
    (out.write.format("rocketmq").mode("append").option("nameServer", name_server).option("topic", target)
     .option("deliveryGuarantee", "exactly_once").option("producerGroup", group).save())
    return {"keys": keys}


def stream(spark, name_server: str, source: str, out_dir: str, checkpoint: str, stop_file: str) -> dict:
    df = (spark.readStream.format("rocketmq").option("nameServer", name_server).option("topic", source)
          .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "100").load())
    query = (df.select("brokerName", "queueId", "queueOffset", "body").writeStream.format("parquet")
             .option("path", out_dir).option("checkpointLocation", checkpoint)
             .trigger(processingTime="200 milliseconds").start())
    while not os.path.exists(stop_file):
        if query.exception() is not None:
            raise query.exception()
        time.sleep(0.2)
    query.stop()
    return {"batches": query.lastProgress["batchId"] if query.lastProgress else None}


def main() -> None:
    where, job, *args = sys.argv[1:]
    builder = SparkSession.builder.appName(f"rmq-spark-node-{job}").config("spark.ui.enabled", "false")
    if where == "local":
        builder = builder.master("local[2]")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    result = placement(spark)
    result.update({"read-write": read_write, "stream": stream}[job](spark, *args))
    spark.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
