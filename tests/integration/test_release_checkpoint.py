"""A streaming checkpoint written by a released rmq-spark (tests/fixtures/checkpoints/, made by
release_checkpoint.py on that release's checkout) restarts under the current code: the query goes on from the
offsets the release committed, reading every later message once and none before; a batch the release planned but
did not commit is replayed from the offsets it logged (batch 0 from the start its end recorded). Its rows are the
current release's: the properties map only with includeProperties=true (0.1.0 always had it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import Row

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


def _restart(spark, rocketmq, topic: str, checkpoint: Path, **options: str) -> list[Row]:
    """The rows of a Trigger.AvailableNow query of ``topic`` restarted from ``checkpoint``, once it has finished."""
    rows: list[Row] = []
    reader = spark.readStream.format("rocketmq").option("nameServer", rocketmq.name_server).option("topic", topic)
    df = reader.option("startingOffsets", "earliest").options(**options).load()
    query = (
        df.writeStream.foreachBatch(lambda d, _: rows.extend(d.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the restarted query did not finish"
    assert query.exception() is None
    return rows


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
    rows = _restart(spark, rocketmq, filled, checkpoint)
    got = sorted(bytes(r["body"]).decode() for r in rows)
    end = release.FIRST + release.SECOND + LATER
    assert got == sorted(f"{b}/{q}@{o}" for b, q in release.queues() for o in range(done, end))
    assert logged(checkpoint, "commits")[-1] >= max(committed, 1)
    assert committed_offsets(checkpoint).get(filled) == {f"{b}/{q}": end for b, q in release.queues()}


@pytest.mark.parametrize("saved", RELEASES, ids=lambda p: p.name)
def test_a_restarted_stream_has_the_properties_map_only_when_asked(spark, rocketmq, filled, saved, tmp_path):
    """The offsets JSON carries no columns: a checkpoint of any release restarts with the current default row, and
    includeProperties=true brings the properties map back."""
    end = release.FIRST + release.SECOND + LATER
    for options, has_map in (({}, False), ({"includeProperties": "true"}, True)):
        checkpoint = tmp_path / f"checkpoint-{has_map}"
        shutil.copytree(saved, checkpoint)
        rows = _restart(spark, rocketmq, filled, checkpoint, **options)
        assert len(rows) == LATER * len(release.queues())
        assert ("properties" in rows[0].asDict()) is has_map
        assert all(not has_map or r["properties"]["UNIQ_KEY"] == r["msgId"] for r in rows)
        assert committed_offsets(checkpoint).get(filled) == {f"{b}/{q}": end for b, q in release.queues()}
