"""Data loss: a broker with tiny store files deletes old data; reads that start below the first available offset
fail clearly by default and skip ahead with failOnDataLoss=false (client and Spark batch source)."""
from __future__ import annotations

import pytest

from rmq_spark.client import DataLossError, MessageQueue, RemotingClient
from rmq_spark.embedded import EmbeddedRocketMQ

TOPIC = "Shrinking"


@pytest.fixture(scope="module")
def shrunk():
    with EmbeddedRocketMQ(1, commitlog_file_size=64 * 1024, cq_file_entries=50) as mq:
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


def _read(spark, mq, **options):
    reader = (spark.read.format("rocketmq").option("nameServer", mq.name_server).option("topic", TOPIC)
              .option("startingOffsets", f'{{"{TOPIC}": {{"broker-a/0": 0}}}}'))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_source_fails_or_skips(spark, shrunk):
    mq, low, high = shrunk
    with pytest.raises(Exception, match=f"offset 0 was requested but the broker's first available offset is {low}"):
        _read(spark, mq).collect()
    rows = _read(spark, mq, failOnDataLoss="false").select("queueOffset").collect()
    assert sorted(r[0] for r in rows) == list(range(low, high))
