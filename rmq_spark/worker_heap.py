"""The heap of a reused Spark Python worker: what it holds after its first read is frozen out of the collector's way.

A reused worker (``SPARK_REUSE_WORKER``, Spark's default) runs a full ``gc.collect()`` after every task
(``pyspark.daemon``), which walks every object the process tracks: the interpreter's, pyspark's, pyarrow's and ours,
~100k objects, 10-25 ms a task. Frozen (``gc.freeze``) once the first read has imported what the read path imports
lazily, those long-lived objects are left out of every later collection, which then walks only what later tasks
create. A reference cycle among them that becomes garbage later is never freed: at most what the process held at the
freeze, once.
"""

from __future__ import annotations

import gc
import os

_frozen = False


def freeze_once() -> None:
    """In a reused Spark Python worker, freeze the objects alive now (the first call in the process only)."""
    global _frozen
    if _frozen or not os.environ.get("SPARK_REUSE_WORKER"):
        return
    _frozen = True
    gc.freeze()
