"""Spark's own failures that end a query now and then on two busy cores, in no code of ours, and what the tests do
about them: a query so ended is started again from its checkpoint, as a supervisor restarts a failed driver, at
most SPARE_DRIVERS times. Restarting from the checkpoint is what the source and the sink promise to survive, so a
test that asserts exactly-once asserts it across the restart too.

- ``Task serialization failed: ... Illegal size``: the DAG scheduler serialized a task binary while a Scala
  collection in it changed size.
- ``Python worker failed to connect back``: a Python worker took more than the 10 s Spark allows it to connect back
  (a constant in PythonWorkerFactory; no setting changes it). Importing pyspark takes about 1 s on an idle core."""

from __future__ import annotations

SPARK_DEATHS = (
    "Task serialization failed: java.lang.IllegalStateException: Illegal size",
    "Python worker failed to connect back",
)
SPARE_DRIVERS = 2


def spark_death(text: str) -> str | None:
    """The one of SPARK_DEATHS that ``text`` (an error or a driver's log) names, if any."""
    return next((cause for cause in SPARK_DEATHS if cause in text), None)
