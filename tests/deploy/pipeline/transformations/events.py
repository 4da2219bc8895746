"""A Spark Declarative Pipeline over a RocketMQ topic (tests/deploy/test_pipelines.py runs it with spark-pipelines):
a streaming table that appends each message once, and a materialized view that counts them by tag. The pipeline
spec's configuration names the cluster and the topic."""

from pyspark import pipelines as dp
from pyspark.sql import SparkSession

spark = SparkSession.active()


@dp.table(name="events", comment="every message of the topic, once")
def events():
    return (
        spark.readStream.format("rocketmq")
        .option("nameServer", spark.conf.get("rocketmq.nameServer"))
        .option("topic", spark.conf.get("rocketmq.topic"))
        .option("startingOffsets", "earliest")
        .load()
    )


@dp.materialized_view(name="events_by_tag")
def events_by_tag():
    return spark.read.table("events").groupBy("tags").count()
