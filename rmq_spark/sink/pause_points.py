"""Named points of a streaming commit at which a test holds the driver, so that it can kill a process exactly there
(the driver, the home's broker, a target's broker). Off unless the environment names a point: then the first commit
to reach it writes the marker file the environment names and sleeps, once per marker file."""

from __future__ import annotations

import enum
import os
import time

PAUSE_AT = "RMQ_SPARK_TEST_COMMIT_PAUSE"  # the value of a CommitPoint
PAUSE_FILE = "RMQ_SPARK_TEST_COMMIT_PAUSE_FILE"  # written when the point is reached: "<point> <batch> <pid>"
PAUSE_SECONDS = "RMQ_SPARK_TEST_COMMIT_PAUSE_SECONDS"  # how long the commit is held there (default 60)


class CommitPoint(enum.Enum):
    """The points between the writes of a streaming commit (docs/DESIGN.md §11 names what each has written)."""

    LOCATED = "located"  # the home found and its last record read; nothing written for this batch
    STARTED = "started"  # started(N) appended (or extended, in a recovery)
    COMMITTING = "committing"  # about half of the batch's half messages committed
    COMMITTED = "committed"  # every half message committed; done(N) not appended
    DONE = "done"  # done(N) appended; Spark has not logged the batch as committed


def reach(point: CommitPoint, batch_id: int) -> None:
    """Hold the commit at ``point`` if a test asked for it."""
    if os.environ.get(PAUSE_AT) != point.value:
        return
    marker = os.environ.get(PAUSE_FILE)
    if not marker or os.path.exists(marker):
        return
    with open(marker, "w") as f:
        f.write(f"{point.value} {batch_id} {os.getpid()}\n")
    time.sleep(float(os.environ.get(PAUSE_SECONDS, "60")))
