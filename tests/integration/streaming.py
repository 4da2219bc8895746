"""Helpers of the streaming tests that run a query in this process: a sink that records every delivered
(broker, queue, offset), starting a query, waiting on it, and the exactly-once check against the Java consumer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from tests.conftest import transport_options
from tests.support.spark_deaths import SPARE_DRIVERS, spark_death
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery


class Collect:
    """A foreachBatch sink on the driver: every (broker, queue, offset) delivered, in order of delivery."""

    def __init__(self) -> None:
        self.keys: list[tuple[str, int, int]] = []
        self._lock = threading.Lock()
        self._open = threading.Event()
        self._open.set()

    def hold(self) -> None:
        """Make the next batches wait (before they read) until ``release``: the query stops advancing."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def __call__(self, df, batch_id: int) -> None:
        self._open.wait()
        rows = df.select("brokerName", "queueId", "queueOffset").collect()
        with self._lock:
            self.keys.extend((r[0], r[1], r[2]) for r in rows)

    def __len__(self) -> int:
        with self._lock:
            return len(self.keys)


class Query:
    """A query started by ``start_query``: its StreamingQuery's attributes, and ``revive`` to start it again from
    its checkpoint when one of Spark's own failures ended it (tests/support/spark_deaths.py)."""

    def __init__(self, start: Callable[[], StreamingQuery]) -> None:
        self._start = start
        self._query = start()
        self.restarts = 0

    def __getattr__(self, name: str):
        return getattr(self._query, name)

    def revive(self) -> bool:
        """Start the query again if Spark's own failure ended it, at most SPARE_DRIVERS times; whether it did."""
        error = self._query.exception()
        death = spark_death(str(error)) if error is not None else None
        if death is None or self.restarts >= SPARE_DRIVERS:
            return False
        self.restarts += 1
        print(f"restarting the query from its checkpoint ({self.restarts}): Spark's own failure: {death}")
        self._query = self._start()
        return True


def start_query(spark, cluster, transport, topic, sink, checkpoint, **options) -> Query:
    """A query of ``topic`` (None: options name the topics) into ``sink``, from the earliest offsets by default."""
    reader = spark.readStream.format("rocketmq")
    if topic is not None:
        reader = reader.option("topic", topic)
    for k, v in {**transport_options(cluster, transport), "startingOffsets": "earliest", **options}.items():
        reader = reader.option(k, v)
    writer = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
    )
    return Query(writer.start)


def wait_for(condition, timeout, what, query):
    """``wait_until`` the condition holds while ``query`` runs (a ``Query`` ended by Spark's own failure is
    started again)."""

    def alive() -> None:
        if query.exception() is not None or not query.isActive:
            if isinstance(query, Query) and query.revive():
                return
            raise AssertionError(f"the query stopped while waiting for {what}: {query.exception()}")

    wait_until(condition, timeout, what, alive)


def assert_exactly_once(sink: Collect, cluster, topic: str) -> None:
    java = sorted((m["brokerName"], m["queueId"], m["queueOffset"]) for m in cluster.consume(topic))
    assert len(set(sink.keys)) == len(sink.keys), "some messages were delivered twice"
    assert sorted(sink.keys) == java, "the delivered messages differ from what the brokers hold"


def stream_around_a_master_outage(spark, cluster, topic: str, checkpoint, total: int, while_away=None) -> None:
    """A remoting stream of ``topic`` started while broker-a's master is away (its queues wait): it reads
    broker-b's messages, then (after ``while_away(sink, query, held_b)``, if given) broker-a's once its master is
    started again, ``total`` in all, every message exactly once."""
    sink = Collect()
    q = start_query(
        spark,
        cluster,
        "remoting",
        topic,
        sink,
        checkpoint,
        brokerRetryTimeoutMs="120000",
        pollNameServerIntervalMs="300",
    )
    try:
        try:
            held_b = sum(o["maxOffset"] for o in cluster.offsets(topic) if o["brokerName"] == "broker-b")
            wait_for(lambda: len(sink) == held_b, 60, "broker-b's messages while broker-a's master is away", q)
            if while_away is not None:
                while_away(sink, q, held_b)
            assert {b for b, _, _ in sink.keys} == {"broker-b"}
        finally:
            cluster.start_broker("broker-a")
        wait_for(lambda: len(sink) == total, 120, "broker-a's messages once its master is back", q)
    finally:
        q.stop()
    assert_exactly_once(sink, cluster, topic)


def remove_torn_first_write(checkpoint) -> list[str]:
    """The step README "Failures and data loss" gives for a driver killed while Spark wrote a query's first
    offset-log entry: remove the temp files of the offset and commit logs when neither holds a batch."""
    logs = [checkpoint / "offsets", checkpoint / "commits"]
    if any(p.name.isdigit() for d in logs if d.is_dir() for p in d.iterdir()):
        return []
    torn = [p for d in logs if d.is_dir() for p in d.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]
    for p in torn:
        p.unlink()
    return [p.name for p in torn]
