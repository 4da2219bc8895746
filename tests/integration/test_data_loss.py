"""Data loss: a broker with tiny store files deletes old data; reads that start below the first available offset
fail clearly by default and skip ahead with failOnDataLoss=false (client and Spark batch source). A consume queue
that still points into a deleted commit-log file is never skipped silently."""

from __future__ import annotations

import re
import threading
import time

import pytest

from rmq_spark.client import DataLossError, MessageQueue, RemotingClient
from rmq_spark.source.progress import query_skipped
from tests.conftest import running, transport_options, unique_topic
from tests.integration.streaming import Collect, start_query, wait_for

TOPIC = "Shrinking"


@pytest.fixture(scope="module")
def shrunk():
    with running(1, commitlog_file_size=64 * 1024, cq_file_entries=50) as mq:
        mq.create_topic(TOPIC, queues=1)
        mq.produce_bulk(TOPIC, 2000, 200)
        mq.delete_old_files("broker-a")
        low = mq.offsets(TOPIC)[0]
        assert low["minOffset"] > 0, "the broker kept its old files; the test cannot show data loss"
        yield mq, low["minOffset"], low["maxOffset"]


def test_client_range_below_min_offset(shrunk):
    mq, low, high = shrunk
    with RemotingClient(mq.name_server) as client:
        queue = MessageQueue(TOPIC, "broker-a", 0)
        assert client.min_offset(queue) == low
        with pytest.raises(DataLossError, match=f"first available offset is {low}.*failOnDataLoss=false"):
            list(client.read_range(queue, 0, high))
        got = [m.queue_offset for m in client.read_range(queue, 0, high, fail_on_data_loss=False)]
        assert got == list(range(low, high))


def _read(spark, mq, topic=TOPIC, transport="remoting", **options):
    reader = (
        spark.read.format("rocketmq")
        .option("topic", topic)
        .option("startingOffsets", f'{{"{topic}": {{"broker-a/0": 0}}}}')
    )
    for k, v in {**transport_options(mq, transport), **options}.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_source_fails_or_skips(spark, shrunk):
    mq, low, high = shrunk
    with pytest.raises(Exception, match=f"offset 0 was requested but the broker's first available offset is {low}"):
        _read(spark, mq).collect()
    rows = _read(spark, mq, failOnDataLoss="false").select("queueOffset").collect()
    assert sorted(r[0] for r in rows) == list(range(low, high))


def test_a_stream_reports_the_messages_it_skipped_in_its_progress(spark, shrunk, tmp_path):
    mq, low, high = shrunk
    # two batches: [0, low), skipped at planning, and [low, high), whose progress reports the first one's count
    query = (
        spark.readStream.format("rocketmq")
        .option("nameServer", mq.name_server)
        .option("topic", TOPIC)
        .option("startingOffsets", f'{{"{TOPIC}": {{"broker-a/0": 0}}}}')
        .option("failOnDataLoss", "false")
        .option("maxMessagesPerTrigger", str(low))
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120) and query.exception() is None
    progress = query.recentProgress
    assert sum(p.numInputRows for p in progress) == high - low
    assert query_skipped(progress[-1].json) == [low]


def test_a_stream_task_names_the_loss_as_planning_did(spark, shrunk, tmp_path):
    """A micro-batch is planned without GET_MIN_OFFSET: its task finds the loss when it pulls, and
    its error names what planning's did (the queue, the offsets gone, the first one held, failOnDataLoss);
    failOnDataLoss=false skips to the first held offset."""
    mq, low, high = shrunk
    start = {"startingOffsets": f'{{"{TOPIC}": {{"broker-a/0": 0}}}}'}
    q = start_query(spark, mq, "remoting", TOPIC, Collect(), tmp_path / "fail", **start)
    try:
        with pytest.raises(Exception) as failed:
            q.awaitTermination(120)
            raise AssertionError("the stream read past the lost messages")
    finally:
        q.stop()
    text = str(failed.value)
    assert "planPartitions" not in text and "partition_reader.py" in text, f"not raised by the task: {text[:2000]}"
    assert re.search(
        rf"{TOPIC}:broker-a/0: messages \[0, \d+\) are gone from the broker \(its first available "
        rf"offset is {low}\); they were deleted before they were read\. Set failOnDataLoss=false",
        text,
    ), text
    sink = Collect()
    q = start_query(spark, mq, "remoting", TOPIC, sink, tmp_path / "skip", failOnDataLoss="false", **start)
    try:
        wait_for(lambda: len(sink) >= high - low, 120, "the messages still held", q)
    finally:
        q.stop()
    assert sorted(o for _, _, o in sink.keys) == list(range(low, high))


@pytest.fixture(scope="module")
def removing():
    with running(1, commitlog_file_size=64 * 1024, cq_file_entries=50) as mq:
        yield mq


@pytest.mark.parametrize("transport, fail", [("remoting", True), ("grpc", False)])
def test_a_consume_queue_into_a_deleted_commit_log_is_no_silent_skip(spark, removing, transport, fail, request):
    """The broker answers pulls there with PULL_RETRY_IMMEDIATELY (MESSAGE_WAS_REMOVING) or with records of another
    file, until its clean-up raises the queue's min offset; only then is the loss proven."""
    topic = unique_topic(request)
    removing.create_topic(topic, queues=1)
    removing.produce_bulk(topic, 2000, 200)
    removing.delete_old_files("broker-a", correct_queues=False)
    assert removing.offsets(topic)[0]["minOffset"] == 0  # the queue still claims its deleted head
    result = {}

    def read():
        try:
            result["offsets"] = sorted(
                r[0]
                for r in _read(spark, removing, topic, transport, failOnDataLoss=str(fail).lower())
                .select("queueOffset")
                .collect()
            )
        except Exception as e:  # noqa: BLE001 - checked below
            result["error"] = str(e)

    reader = threading.Thread(target=read)
    reader.start()
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 120
    while not tracker.getActiveStageIds() and reader.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)  # until the read is planned and its task pulls
    reader.join(3)
    assert reader.is_alive(), f"the read ended while the broker could not serve its range: {result}"
    low = removing.correct_queues("broker-a")[topic][0]["minOffset"]
    assert low > 0
    reader.join(120)
    if fail:
        assert re.search(
            rf"messages \[0, \d+\) are gone from the broker \(its first available offset is {low}\).*"
            "failOnDataLoss=false",
            result.get("error", ""),
        ), result
    else:
        assert result.get("offsets") == list(range(low, 2000)), result.get("error")


def test_compaction_topics_are_read_as_sparse(spark, rocketmq, request):
    """Compaction topics have gaps in their offsets by design: planning recognises them by their cleanup policy
    and their ranges accept gaps (a normal topic's do not). Over remoting: the v2 API has no topic attributes."""
    transport = "remoting"
    from rmq_spark.options import parse_options
    from rmq_spark.source.batch import RocketMQBatchReader

    compacted, normal = unique_topic(request) + "-c", unique_topic(request) + "-n"
    rocketmq.create_topic(compacted, queues=1, broker="broker-a", attributes={"+cleanup.policy": "COMPACTION"})
    rocketmq.create_topic(normal, queues=1, broker="broker-a")
    for t in (compacted, normal):
        rocketmq.produce(
            t, [{"body": f"v{i}", "keys": [f"k{i % 3}"], "broker": "broker-a", "queueId": 0} for i in range(30)]
        )
    plan = RocketMQBatchReader(
        parse_options({**transport_options(rocketmq, transport), "topics": f"{compacted},{normal}"})
    ).plan()
    assert {(r.queue.topic, r.start, r.end, r.sparse) for r in plan} == {
        (compacted, 0, 30, True),
        (normal, 0, 30, False),
    }
    rows = (
        spark.read.format("rocketmq")
        .option("topic", compacted)
        .options(**transport_options(rocketmq, transport))
        .load()
        .select("queueOffset")
        .collect()
    )
    assert sorted(r[0] for r in rows) == list(range(30))
