"""Spark's own failures that end a query now and then on two busy cores, in no code of ours, and what the tests do
about them: a query so ended is started again from its checkpoint, as a supervisor restarts a failed driver, at
most SPARE_DRIVERS times. Restarting from the checkpoint is what the source and the sink promise to survive, so a
test that asserts exactly-once asserts it across the restart too.

- ``Task serialization failed: ... Illegal size``: the DAG scheduler serialized a task binary while a Scala
  collection in it changed size.
- ``Python worker failed to connect back``: a Python worker took more than the 10 s Spark allows it to connect back
  (a constant in PythonWorkerFactory; no setting changes it). Importing pyspark takes about 1 s on an idle core."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.streaming import DataStreamWriter

SPARK_DEATHS = (
    "Task serialization failed: java.lang.IllegalStateException: Illegal size",
    "Python worker failed to connect back",
)
SPARE_DRIVERS = 3


def spark_death(text: str) -> str | None:
    """The one of SPARK_DEATHS that ``text`` (an error or a driver's log) names, if any."""
    return next((cause for cause in SPARK_DEATHS if cause in text), None)


class SparkDeath(AssertionError):
    """A driver process ended by one of SPARK_DEATHS."""

    def __init__(self, cause: str, message: str):
        super().__init__(message)
        self.cause = cause


def run_to_end(writer: DataStreamWriter, timeout: float = 300) -> None:
    """Run ``writer``'s query available-now to its end in this session, again from its checkpoint where one of
    SPARK_DEATHS ended it (at most SPARE_DRIVERS times)."""
    run_all_to_end([writer], timeout)


def run_all_to_end(writers: Sequence[DataStreamWriter], timeout: float = 300) -> None:
    """``run_to_end`` for each of ``writers``, their queries side by side (each waits less on the others'
    start-up and commits than one after the other)."""
    queries = [writer.trigger(availableNow=True).start() for writer in writers]
    for writer, query in zip(writers, queries, strict=True):
        for spare in range(SPARE_DRIVERS, -1, -1):
            assert query.awaitTermination(timeout), "the available-now run did not end"
            error = query.exception()
            if error is None:
                break
            if not spare or spark_death(str(error)) is None:
                raise AssertionError(error)
            print(f"running the query again from its checkpoint: Spark's own failure: {spark_death(str(error))}")
            query = writer.trigger(availableNow=True).start()
