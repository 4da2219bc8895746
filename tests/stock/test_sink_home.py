"""Where an exactly-once query's commit records live when every broker process was killed before it wrote its
consumer offsets to disk: the fingerprints of the home (consumer offsets) are gone, and the name servers, which write
their KV config to disk at each put, still name it."""

from __future__ import annotations

import base64
import collections

import pyarrow as pa
import pytest

from rmq_spark.client_pool import shared_client
from rmq_spark.errors import CommitError
from rmq_spark.options import SinkOptions, parse_sink_options
from rmq_spark.sink.writers import MicroBatch, RocketMQStreamWriter, write_task

# Consumer offsets reach the disk every flushConsumerOffsetInterval (5 s by default): five minutes puts every kill of
# this test inside the window, whatever the machine's speed.
BROKER_CONFIG = {"flushConsumerOffsetInterval": "300000"}
QUERY = "5a1e0c3b-query-of-this-test"
BODIES = [f"r{i}" for i in range(20)]


def _run_batch(options: SinkOptions, batch_id: int) -> None:
    """Batch ``batch_id`` of BODIES as one task over today's write route, then the stream writer's commit (a
    driver's whole batch)."""
    with shared_client(options) as client:
        client.route(options.topic, refresh=True)
    task = write_task(options, iter([pa.RecordBatch.from_pydict({"body": BODIES})]), MicroBatch(QUERY, batch_id))
    RocketMQStreamWriter(options).commit([task], batch_id)


def test_a_replay_after_every_broker_was_killed_waits_for_the_home(start_stock_cluster):
    cluster = start_stock_cluster(broker_config=BROKER_CONFIG)
    cluster.create_topic("HomeTarget", queues=2)
    options = parse_sink_options(
        {
            "nameServer": cluster.name_server,
            "topic": "HomeTarget",
            "deliveryGuarantee": "exactly_once",
            "producerGroup": "home-test",
            "brokerRetryTimeoutMs": "3000",
        }
    )
    _run_batch(options, 0)  # done(0) on broker-a, the home; the driver dies before Spark logs the batch
    cluster.kill("broker-a")
    cluster.kill("broker-b")
    cluster.restart("broker-b")  # the replay can only write to broker-b, which forgot every fingerprint
    with pytest.raises(CommitError, match=r"keeps the commit records .*recorded by .*the name servers.* not in the"):
        _run_batch(options, 0)
    cluster.restart("broker-a")
    _run_batch(options, 0)  # done(0): the replay's halves are rolled back
    read = cluster.consume("HomeTarget")
    bodies = collections.Counter(base64.b64decode(m["bodyBase64"]).decode() for m in read)
    assert bodies == collections.Counter(BODIES)
