"""An exactly-once streaming copy run available-now as a process of its own, so that a test can SIGKILL its driver
(the Python driver, its Spark JVM and the JVM's Python workers) in the middle of a commit.

usage: python sink_job.py NAME_SERVER SOURCE TARGET PRODUCER_GROUP CHECKPOINT LIMIT RETRY_MS
The copy is kill_job's sink query (each row marked with its source position) into TARGET, at most LIMIT messages a
batch, with brokerRetryTimeoutMs RETRY_MS. Exit 0 when the query finished; 1 when it failed, with a line that starts
with FAILED on stdout (the causes are in the stack traces Spark printed above it). The commit's test hook
(rmq_spark/sink/pause_points.py) is set by the environment the job is started with.
"""

from __future__ import annotations

import os
import sys

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter

from tests.integration.kill_job import sink_writer
from tests.support.sessions import local_session

FAILED = "the query failed:"  # the line that starts the job's report of a failed query


def exactly_once_copy(
    spark: SparkSession,
    name_server: str,
    source: str,
    target: str,
    producer_group: str,
    checkpoint: str,
    limit: int,
    retry_ms: int,
) -> DataStreamWriter:
    """The copy, up to its trigger: the job and a test's restart in its own session run the same query."""
    writer = sink_writer(spark, name_server, source, target, "exactly_once", producer_group, checkpoint, limit)
    return writer.option("brokerRetryTimeoutMs", str(retry_ms))


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    name_server, source, target, group, checkpoint, limit, retry_ms = sys.argv[1:]
    spark = local_session("rmq-spark-sink-job")
    copy = exactly_once_copy(spark, name_server, source, target, group, checkpoint, int(limit), int(retry_ms))
    query = copy.trigger(availableNow=True).start()
    try:
        query.awaitTermination()
    except StreamingQueryException as e:
        print(FAILED, str(e).splitlines()[0], flush=True)
        os._exit(1)  # at once, as a supervisor that restarts drivers would see it
    print("the query finished", flush=True)


if __name__ == "__main__":
    main()
