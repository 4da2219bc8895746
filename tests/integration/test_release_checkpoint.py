"""A streaming checkpoint written by a released rmq-spark (tests/fixtures/checkpoints/, made by
release_checkpoint.py on that release's checkout) restarts under the current code: the query goes on from the
offsets the release committed, reading every later message once and none before; a batch the release planned but
did not commit is replayed from the offsets it logged (batch 0 from the start its end recorded)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fixtures.checkpoints import release_checkpoint as release
from tests.support.checkpoints import committed_offsets, logged

RELEASES = sorted(p for p in (Path(release.__file__).parent).iterdir() if p.is_dir() and not p.name.startswith("_"))
LATER = 3


@pytest.fixture(scope="module")
def filled(rocketmq) -> str:
    """The release checkpoint's topic, holding what the release read and LATER messages more per queue."""
    rocketmq.create_topic(release.TOPIC, queues=release.QUEUES)
    release.fill(rocketmq, 0, release.FIRST + release.SECOND)
    release.fill(rocketmq, release.FIRST + release.SECOND, LATER)
    return release.TOPIC


@pytest.mark.parametrize("saved", RELEASES, ids=lambda p: p.name)
@pytest.mark.parametrize("committed", [2, 1, 0], ids=["both-committed", "batch-1-planned", "batch-0-planned"])
def test_a_release_checkpoint_restarts_where_it_committed(spark, rocketmq, filled, saved, committed, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(saved, checkpoint)
    for batch in range(committed, 2):  # the release crashed after it planned batch `committed`, before its commit
        (checkpoint / "commits" / str(batch)).unlink()
        if batch > committed:
            (checkpoint / "offsets" / str(batch)).unlink()
    done = (0, release.FIRST, release.FIRST + release.SECOND)[committed]
    assert committed_offsets(checkpoint).get(filled) == (
        {f"{b}/{q}": done for b, q in release.queues()} if committed else None
    )
    rows = []
    df = (
        spark.readStream.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .option("topic", filled)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        df.writeStream.foreachBatch(lambda d, _: rows.extend(d.select("body", "queueOffset").collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the restarted query did not finish"
    assert query.exception() is None
    got = sorted(bytes(r["body"]).decode() for r in rows)
    end = release.FIRST + release.SECOND + LATER
    assert got == sorted(f"{b}/{q}@{o}" for b, q in release.queues() for o in range(done, end))
    assert logged(checkpoint, "commits")[-1] >= max(committed, 1)
    assert committed_offsets(checkpoint).get(filled) == {f"{b}/{q}": end for b, q in release.queues()}
