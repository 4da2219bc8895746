"""rmq-spark: the Apache RocketMQ connector for Apache Spark."""

import os as _os
from importlib.metadata import version as _version

__version__ = _version("rmq-spark")  # set in native/Cargo.toml, the one place

# gRPC core's fork handlers, on by default since grpcio 1.81, can crash the child of a fork before it execs
# (grpc/grpc#43055): PySpark starts its JVM that way, and in a full test run one such start failed. This package's
# gRPC channels never cross a fork. Read once, when grpc is imported: set here, before any module of ours imports
# it; a process that sets the variable itself keeps its value.
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


def register(spark) -> None:
    """Register ``format("rocketmq")`` with a SparkSession (needed once per session unless the
    ``pyspark_rocketmq`` module is installed, which Spark 4 discovers by itself)."""
    from rmq_spark.datasource import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)
