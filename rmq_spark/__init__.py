"""rmq-spark: the Apache RocketMQ connector for Apache Spark."""
__version__ = "0.1.0"


def register(spark) -> None:
    """Register ``format("rocketmq")`` with a SparkSession (needed once per session unless the
    ``pyspark_rocketmq`` module is installed, which Spark 4 discovers by itself)."""
    from rmq_spark.datasource import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)
