"""Found by Spark's automatic discovery of Python data sources (top-level modules named ``pyspark_*``):
makes ``format("rocketmq")`` available in every session with no registration call."""

from rmq_spark.datasource import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
