"""Slave-acting-master mode on the real broker (name server supportActingMaster, brokers enableSlaveActingMaster, slaves
with RocketMQ's default slaveReadEnable=false): once broker-a's master stops, the route lists its slave at brokerId 0.
The stream driver must take it for the slave it is: its queues wait (unavailable), no pull is held on it, no consumer
offset is mirrored to it (nor by the pull gateway), and a streaming query goes on with broker-b; when the master is
back, its queues are held and read there again, every message once. One master outage serves every check (a stop and a
start cost seconds)."""

from __future__ import annotations

from rmq_spark.client import RemotingClient
from rmq_spark.options import parse_options
from rmq_spark.source.queue_watch import QueueWatch
from tests.conftest import new_client, running, unique_topic
from tests.integration.streaming import stream_around_a_master_outage
from tests.support.waiting import wait_until

MIRROR = "acting-mirror"  # a group whose offsets the slave would take


def _stands_in(client: RemotingClient, topic: str, master: str) -> bool:
    """Whether ``topic``'s route lists another node than ``master`` at broker-a's brokerId 0."""
    broker = client.route(topic, refresh=True).broker("broker-a")
    return broker is not None and broker.addresses.get(0, master) != master


def test_a_slave_acting_for_its_master_is_a_slave_and_the_stream_goes_on_with_the_other_group(spark, tmp_path, request):
    topic = unique_topic(request)
    with (
        running(2, slaves=1, slave_read=False, acting_master=True) as acting,
        RemotingClient(acting.name_server) as client,
    ):
        acting.create_topic(topic, queues=2)
        acting.produce_bulk(topic, 400, 50)  # returns once the slaves have it too
        watch = QueueWatch(client, parse_options({"nameServer": acting.name_server, "topic": topic}))
        try:
            watch.poll(force=True)
            on_a = [q for q in watch.queues() if q.broker_name == "broker-a"]
            wait_until(lambda: all(q in watch._holds for q in on_a), 10, "the master to hold broker-a's queues")
            master = client.route(topic).broker("broker-a").master_address
            client.update_consumer_offsets(MIRROR, {q: 1 for q in on_a})  # the group is on the master ...
            acting.create_topic(f"{topic}-sync", 1, broker="broker-a")  # ... and its slave copies it (and the topic)

            acting.stop_broker("broker-a")
            wait_until(lambda: _stands_in(client, topic, master), 30, "the name server to list the slave at brokerId 0")
            watch.poll(force=True)
            assert watch.silent == set(on_a) and watch.replica == set(on_a)  # the slave refuses pulls: they wait
            assert not any(q in watch._holds for q in on_a)  # nothing held on the slave
            stored = client.update_consumer_offsets(MIRROR, {q: 2 for q in on_a}, partial=True)
            assert set(stored.failed) == set(on_a)  # no offset mirrored to a node that is not the master
            with new_client(acting, "grpc") as through_gateway:  # nor by the pull gateway
                stored = through_gateway.update_consumer_offsets(MIRROR, {q: 2 for q in on_a}, partial=True)
            assert set(stored.failed) == set(on_a)

            stream_around_a_master_outage(spark, acting, topic, tmp_path / "c", 400)

            wait_until(
                lambda: (watch.poll(force=True), all(q in watch._holds for q in on_a))[1],
                30,
                "the master to hold broker-a's queues again",
            )
            assert watch.silent == set() and watch.replica == set()
        finally:
            watch.close()
