"""A Spark job sent with ``spark-submit`` from a node's virtualenv, which holds the release wheel and no checkout
(tests/deploy/test_cluster.py). Its last line of output is one JSON object: where the driver and the executors load
rmq-spark from, and what each part did.

With ``--target``: a batch read of SOURCE (the key (broker, queue, offset) of each message), then an exactly-once
batch write of every message to TARGET, marked with its source position in property ``src``.
With ``--out``: then an exactly-once streaming read of SOURCE into Parquet files in OUT, in small micro-batches,
until STOP_FILE exists.
"""

from __future__ import annotations

import argparse
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
    tasks = 2 * spark.sparkContext.defaultParallelism
    executors = spark.sparkContext.parallelize(range(tasks), tasks).map(_where_rmq_spark_loads).collect()
    import rmq_spark

    return {
        "driver": _where_rmq_spark_loads(None),
        "executors": sorted(set(map(tuple, executors))),
        "version": rmq_spark.__version__,
        "cargo": shutil.which("cargo"),
    }


def read_write(spark, a: argparse.Namespace) -> dict:
    df = spark.read.format("rocketmq").option("nameServer", a.name_server).option("topic", a.source).load()
    keys = [
        [r.brokerName, r.queueId, r.queueOffset] for r in df.select("brokerName", "queueId", "queueOffset").collect()
    ]
    out = df.select(
        "body", F.create_map(F.lit("src"), F.concat_ws("/", "brokerName", "queueId", "queueOffset")).alias("properties")
    )
    (
        out.write.format("rocketmq")
        .mode("append")
        .option("nameServer", a.name_server)
        .option("topic", a.target)
        .option("deliveryGuarantee", "exactly_once")
        .option("producerGroup", a.group)
        .save()
    )
    return {"keys": keys}


def stream(spark, a: argparse.Namespace) -> dict:
    df = (
        spark.readStream.format("rocketmq")
        .option("nameServer", a.name_server)
        .option("topic", a.source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "200")
        .load()
    )
    query = (
        df.select("brokerName", "queueId", "queueOffset", "body")
        .writeStream.format("parquet")
        .option("path", a.out)
        .option("checkpointLocation", a.checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    while not os.path.exists(a.stop_file):
        if query.exception() is not None:
            raise query.exception()
        time.sleep(0.2)
    query.stop()
    return {"last_batch": query.lastProgress["batchId"] if query.lastProgress else None}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--name-server", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--target")
    p.add_argument("--group")
    p.add_argument("--out")
    p.add_argument("--checkpoint")
    p.add_argument("--stop-file")
    a = p.parse_args()
    spark = SparkSession.builder.appName("rmq-spark-node-job").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    result = placement(spark)
    if a.target:
        result.update(read_write(spark, a))
    if a.out:
        result.update(stream(spark, a))
    spark.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
