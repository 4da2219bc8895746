"""A streaming query that crashes inside its first batch, before Spark commits it: Spark replays batch 0 from a fresh
initialOffset() call, so the start must come from what Spark logged (the end of batch 0 records it), not from
offsets resolved again after the data or the consumer group moved."""

from __future__ import annotations

import pytest

from tests.conftest import transport_options
from tests.integration.streaming import Collect, remove_torn_first_write

BROKERS = ("broker-a", "broker-b")


class CrashInFirstBatch(Collect):
    """A foreachBatch sink whose first call runs ``during`` (messages arriving, a group moving) and then fails, as
    a driver killed inside batch 0 would leave the checkpoint: batch 0 in the offset log, not in the commit log."""

    def __init__(self, during) -> None:
        super().__init__()
        self.during = during
        self.crashed = False

    def __call__(self, df, batch_id: int) -> None:
        if not self.crashed:
            self.crashed = True
            self.during()
            raise RuntimeError("the driver dies inside batch 0")
        super().__call__(df, batch_id)


def _query(spark, rocketmq, transport, topic, sink, checkpoint, trigger, **options):
    reader = spark.readStream.format("rocketmq").option("topic", topic)
    for k, v in {**transport_options(rocketmq, transport), **options}.items():
        reader = reader.option(k, v)
    return (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def _produce(rocketmq, topic, tag: str, per_queue: int) -> None:
    rocketmq.produce(
        topic,
        [{"body": f"{tag}{i}", "broker": b, "queueId": q} for b in BROKERS for q in range(4) for i in range(per_queue)],
    )


@pytest.mark.parametrize(("transport", "starting"), [("remoting", "latest"), ("grpc", "committed")])
def test_a_first_batch_cut_by_a_crash_is_replayed_from_the_start_it_was_planned_with(
    spark, rocketmq, transport, starting, topic, tmp_path
):
    _produce(rocketmq, topic, "before", 3)
    group = f"first-{topic}"[:100]
    if starting == "committed":  # the query starts one message into each queue
        for b in BROKERS:
            for q in range(4):
                rocketmq.update_consumer_offset(group, topic, b, q, 1)
    start = 1 if starting == "committed" else 3

    def during() -> None:
        # messages keep arriving, and the group moves to the end of batch 0 (another tool, or an operator): a
        # start resolved again now is past the whole of batch 0
        if starting == "committed":
            for o in rocketmq.offsets(topic):
                rocketmq.update_consumer_offset(group, topic, o["brokerName"], o["queueId"], o["maxOffset"])
        _produce(rocketmq, topic, "during", 2)

    crashing = CrashInFirstBatch(during)
    options = {"startingOffsets": starting, "consumerGroup": group, "commitOffsetsToBroker": "false"}
    checkpoint = tmp_path / "checkpoint"
    first = _query(
        spark, rocketmq, transport, topic, crashing, checkpoint, {"processingTime": "200 milliseconds"}, **options
    )
    with pytest.raises(Exception, match="inside batch 0"):
        first.awaitTermination(120)
        raise AssertionError("the first run did not fail")
    assert crashing.crashed
    _produce(rocketmq, topic, "after", 1)

    sink = Collect()
    rerun = _query(spark, rocketmq, transport, topic, sink, checkpoint, {"availableNow": True}, **options)
    assert rerun.awaitTermination(180), "the restart did not end"
    assert rerun.exception() is None, rerun.exception()
    assert len(sink.keys) == len(set(sink.keys)), "some messages were delivered twice"
    assert sorted(sink.keys) == sorted((b, q, o) for b in BROKERS for q in range(4) for o in range(start, 6))


def test_a_driver_killed_while_spark_writes_the_first_offset_entry_restarts_once_its_temp_file_is_removed(
    spark, rocketmq, topic, tmp_path
):
    _produce(rocketmq, topic, "m", 1)
    checkpoint = tmp_path / "checkpoint"
    # what a SIGKILL inside Spark's atomic write of offsets/0 leaves (found by the random kill moments of test_kills)
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / ".0.5f0c2a4e-1b7d-4c1e-9a57-2b1e6c3d9f10.tmp").write_bytes(b"")
    refused = _query(
        spark, rocketmq, "remoting", topic, Collect(), checkpoint, {"availableNow": True}, startingOffsets="earliest"
    )
    with pytest.raises(Exception, match="STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"):
        refused.awaitTermination(120)
        raise AssertionError("Spark accepted the torn checkpoint")
    assert remove_torn_first_write(checkpoint) == [".0.5f0c2a4e-1b7d-4c1e-9a57-2b1e6c3d9f10.tmp"]
    sink = Collect()
    rerun = _query(
        spark, rocketmq, "remoting", topic, sink, checkpoint, {"availableNow": True}, startingOffsets="earliest"
    )
    assert rerun.awaitTermination(120) and rerun.exception() is None, rerun.exception()
    assert sorted(sink.keys) == sorted((b, q, 0) for b in BROKERS for q in range(4))
