"""Slave-acting-master mode on the real broker (name server supportActingMaster, brokers enableSlaveActingMaster,
slaves with RocketMQ's default slaveReadEnable=false): once broker-a's master stops, the route lists its slave at
brokerId 0. The stream driver must take it for the slave it is: its queues wait (unavailable), no pull is held on
it, no consumer offset is mirrored to it, and a streaming query goes on with broker-b; when the master is back, its
queues are held and read there again."""
from __future__ import annotations

import pytest

from rmq_spark.client import RemotingClient
from rmq_spark.embedded import EmbeddedRocketMQ
from rmq_spark.options import parse_options
from rmq_spark.queue_watch import QueueWatch
from tests.conftest import unique_topic
from tests.integration.streaming import Collect, assert_exactly_once, start_query, wait_for
from tests.support.waiting import wait_until

TOPIC = "Acting"


@pytest.fixture(scope="module")
def acting():
    with EmbeddedRocketMQ(2, slaves=1, slave_read=False, acting_master=True, gateway=False) as mq:
        mq.create_topic(TOPIC, 2, broker="broker-a")
        mq.produce(TOPIC, [{"body": f"m{i}", "broker": "broker-a", "queueId": i % 2} for i in range(4)])
        yield mq


def _stands_in(client: RemotingClient, topic: str, master: str) -> bool:
    """Whether ``topic``'s route lists another node than ``master`` at broker-a's brokerId 0."""
    broker = client.route(topic, refresh=True).broker("broker-a")
    return broker is not None and broker.addresses.get(0, master) != master


def test_a_slave_acting_as_master_is_a_slave_to_the_stream_driver(acting):
    with RemotingClient(acting.name_server) as client:
        watch = QueueWatch(client, parse_options({"nameServer": acting.name_server, "topic": TOPIC}))
        try:
            watch.poll(force=True)
            queues = watch.queues()
            assert len(queues) == 2 and watch.readable() == queues
            wait_until(lambda: len(watch._holds) == 2, 10, "the master to hold both queues")
            master = client.route(TOPIC).broker("broker-a").master_address

            acting.stop_broker("broker-a")
            wait_until(lambda: _stands_in(client, TOPIC, master), 30, "the name server to list the slave at brokerId 0")
            watch.poll(force=True)
            assert watch.readable() == [] and watch.silent == set(queues)  # the slave refuses pulls: they wait
            assert watch.replica == set(queues) and len(watch._holds) == 0  # nothing held on the slave
            stored = client.update_consumer_offsets("acting-mirror", {q: 1 for q in queues}, partial=True)
            assert set(stored.failed) == set(queues)  # no offset mirrored to a node that is not the master

            acting.start_broker("broker-a")
            wait_until(lambda: not _stands_in(client, TOPIC, master), 30, "the master to register again")
            wait_until(lambda: (watch.poll(force=True), len(watch._holds) == 2)[1], 30,
                       "the master to hold both queues again")
            assert watch.readable() == queues and watch.replica == set()
        finally:
            watch.close()


def test_a_stream_goes_on_with_the_other_group_while_a_slave_acts_for_its_master(spark, acting, tmp_path, request):
    topic = unique_topic(request)
    acting.create_topic(topic, queues=2)
    acting.produce_bulk(topic, 400, 50)  # returns once the slaves have it too
    with RemotingClient(acting.name_server) as client:
        master = client.route(topic).broker("broker-a").master_address
        acting.stop_broker("broker-a")
        wait_until(lambda: _stands_in(client, topic, master), 30, "the name server to list the slave at brokerId 0")
    sink = Collect()
    q = start_query(spark, acting, "remoting", topic, sink, tmp_path / "c", brokerRetryTimeoutMs="120000",
                    pollNameServerIntervalMs="300")
    try:
        try:
            held_b = sum(o["maxOffset"] for o in acting.offsets(topic) if o["brokerName"] == "broker-b")
            wait_for(lambda: len(sink) == held_b, 60, "broker-b's messages while a slave acts for broker-a's master", q)
            assert {b for b, _, _ in sink.keys} == {"broker-b"}
        finally:
            acting.start_broker("broker-a")
        wait_for(lambda: len(sink) == 400, 120, "broker-a's messages once its master is back", q)
    finally:
        q.stop()
    assert_exactly_once(sink, acting, topic)
