"""The local SparkSession of the tests, and of the jobs they run in processes of their own (kill_job, sink_job).

Its driver JVM runs with the JVM flags of the test brokers (jvm-shim/jvm-flags.txt): the quick JIT (C1 only) and
the serial collector. The tests' queries are small and short, so a JVM that compiles less leaves the CPU to the
brokers and to Python workers, which must connect back to the JVM within Spark's fixed 10 s; on two cores it
halved the Spark JVM's CPU time of the batch and stream tests. The benchmarks run Spark with its full JIT."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq_spark_testing.embedded import jvm_flags

# the driver's (and the deploy tests' Spark daemons' and executors') JVM options
JVM_OPTIONS = " ".join(jvm_flags())

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def local_session(app: str, master: str = "local[2]", **conf: str) -> SparkSession:
    """A local SparkSession named ``app`` without UI, two shuffle partitions, and ``conf`` (Spark's keys)."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
