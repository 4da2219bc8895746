"""An exactly-once streaming copy keeps "every message once" when the broker process that holds its
commit records is SIGKILLed inside a commit and restarted."""

from __future__ import annotations

import contextlib
import time

from pyspark.errors import StreamingQueryException

from rmq_spark.client.remoting.client import RemotingClient
from tests.integration.kill_job import sink_writer
from tests.stock.elections import assert_every_row_once
from tests.stock.loads import send_numbered

PER_QUEUE = 500  # 2,000 rows in one micro-batch; each queue's 500 halves are committed one at a time, in parallel
# over the target's 4 queues: a commit lasts long enough for the test to see it under way and kill broker-a.

# The broker writes consumer offsets to disk every flushConsumerOffsetInterval (5 s by default); a kill inside that
# window loses those written since. Five minutes puts every kill of this test inside it, whatever the machine's
# speed: a design that keeps the records where a process crash cannot lose them passes regardless.
BROKER_CONFIG = {"flushConsumerOffsetInterval": "300000"}


def _query(spark, cluster, checkpoint, rows: int):
    writer = sink_writer(
        spark,
        cluster.name_server,
        "CrashSource",
        "CrashTarget",
        "exactly_once",
        "crash-copy",
        str(checkpoint),
        limit=rows,
    )
    return writer.option("brokerRetryTimeoutMs", "3000").trigger(availableNow=True).start()


def _kill_inside_the_commit(cluster, query, broker: str, rows: int) -> int:
    """SIGKILL ``broker`` once a quarter of the rows is in the target (the commit is ending halves), and return how
    many the target held just before."""
    with RemotingClient(cluster.name_server) as client:
        queues = client.queues("CrashTarget", refresh=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and query.isActive:
            total = sum(client.max_offsets(queues).values())
            if total >= rows // 4:
                cluster.kill(broker)
                return total
            time.sleep(0.01)
    raise AssertionError(f"the commit never began (query active: {query.isActive}, error: {query.exception()})")


def test_a_broker_killed_inside_an_exactly_once_commit_leaves_every_row_once(spark, start_stock_cluster, tmp_path):
    cluster = start_stock_cluster(broker_config=BROKER_CONFIG)
    cluster.create_topic("CrashSource", queues=2)
    cluster.create_topic("CrashTarget", queues=2)  # broker-a, first by name, is the home of the commit marker
    rows = send_numbered(cluster.name_server, "CrashSource", PER_QUEUE)
    checkpoint = tmp_path / "checkpoint"

    queries = []
    try:
        first = _query(spark, cluster, checkpoint, rows)
        queries.append(first)
        before_kill = _kill_inside_the_commit(cluster, first, "broker-a", rows)
        assert 0 < before_kill < rows, f"the kill did not land inside the commit: {before_kill} of {rows} rows were in"
        with contextlib.suppress(StreamingQueryException):  # the commit cannot end without broker-a: the query fails
            first.awaitTermination(60)
        first.stop()  # should it wait still, the restart must not meet it on the checkpoint

        cluster.restart("broker-a")
        second = _query(spark, cluster, checkpoint, rows)  # replays the cut batch
        queries.append(second)
        assert second.awaitTermination(120), "the restarted query did not finish its batch within 120 s"
    finally:  # none may outlive the test in the shared Spark session
        for query in queries:
            query.stop()

    read = cluster.consume("CrashSource", "CrashTarget")
    assert_every_row_once(
        read,
        rows,
        f"the kill came when {before_kill} rows were committed; the first query ended with: {first.exception()}",
        "CrashSource",
        "CrashTarget",
    )
