"""Reading a streaming query's checkpoint from outside its driver: the batches in Spark's offset and commit logs,
and the source offsets of the newest committed batch."""

from __future__ import annotations

import json
from pathlib import Path


def logged(checkpoint: Path, log: str) -> list[int]:
    """The batch ids in ``log`` (``offsets``: planned; ``commits``: committed), in order."""
    d = checkpoint / log
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []


def committed_offsets(checkpoint: Path) -> dict:
    """The source offsets (topic -> "broker/queue" -> offset) that end the newest committed batch, from Spark's
    offset log; empty before the first commit."""
    commits = logged(checkpoint, "commits")
    if not commits:
        return {}
    return json.loads((checkpoint / "offsets" / str(commits[-1])).read_text().strip().splitlines()[-1])
