"""rmq-spark: the Apache RocketMQ connector for Apache Spark."""
__version__ = "0.1.0"
