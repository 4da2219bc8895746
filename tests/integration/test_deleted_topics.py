"""A topic deleted from a broker group on the real RocketMQ while a stream reads it: the driver's verdict on the
group's queues (docs/DESIGN.md §10) comes from the newest route, never from how old the client's cached routes are."""

from __future__ import annotations

import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from rmq_spark.client import RemotingClient
from rmq_spark.client.base import BaseClient
from rmq_spark.client.model import MessageQueue
from rmq_spark.client.remoting.frame import RemotingCommand
from rmq_spark.client.remoting.status import check
from rmq_spark.options import parse_options
from rmq_spark.source.stream import RocketMQStreamReader

DELETE_TOPIC_IN_BROKER, DELETE_TOPIC_IN_NAMESRV = 215, 216  # RocketMQ's RequestCode, as mqadmin deleteTopic sends
CLUSTER = "DefaultCluster"  # the embedded cluster's one cluster
BROKERS = ("broker-a", "broker-b")


def delete_topic(rocketmq, topic: str, broker: str) -> None:
    """Delete ``topic`` from broker group ``broker`` (its consume queues are dropped) and from the name server,
    which deletes a topic per cluster: the topic has no route until a group that still has it registers it again."""
    with RemotingClient(rocketmq.name_server) as client:
        address = client.master_address(MessageQueue(topic, broker, 0))
        answer = client._pool.request(
            address, RemotingCommand(code=DELETE_TOPIC_IN_BROKER, ext_fields={"topic": topic}), 5
        )
        check(answer, f"delete topic {topic} on {broker}", address)
        answer = client._pool.request(
            rocketmq.name_server,
            RemotingCommand(code=DELETE_TOPIC_IN_NAMESRV, ext_fields={"topic": topic, "clusterName": CLUSTER}),
            5,
        )
        check(answer, f"delete topic {topic} on the name server", rocketmq.name_server)


def age_routes(client: BaseClient, seconds: float) -> None:
    """Make the client's cached routes ``seconds`` older (past its 30 s TTL: looked up again at their next use)."""
    cache = client._route_cache
    with cache._lock:
        cache._routes = {topic: (at - seconds, route) for topic, (at, route) in cache._routes.items()}


@pytest.mark.parametrize("cache", ["fresh", "older than its TTL"])
def test_a_group_the_topic_was_deleted_from_waits_whatever_the_age_of_the_cached_route(rocketmq, topic, cache):
    """Broker-b, up and registered, no longer has the topic; the name server has no route for it until broker-a
    registers it again. Neither group is in the newest route, so neither is asked: their queues wait with their
    offsets carried (broker-b's answer about a queue it no longer has, an end of 0, would prove nothing), and
    broker-a's are read on once the route has them again."""
    rocketmq.produce(topic, [{"body": f"m{i}", "broker": b, "queueId": 0} for b in BROKERS for i in range(3)])
    options = {"nameServer": rocketmq.name_server, "topic": topic, "startingOffsets": "earliest"}
    reader = RocketMQStreamReader(parse_options({**options, "pollNameServerIntervalMs": "200"}, streaming=True))
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        assert {k: end[topic][k] for k in ("broker-a/0", "broker-b/0")} == {"broker-a/0": 3, "broker-b/0": 3}
        delete_topic(rocketmq, topic, "broker-b")
        while reader.watch.queue_set:  # until a route poll finds no route (the client keeps the last one it read)
            reader.watch.poll(force=True)
        if cache != "fresh":
            age_routes(reader.client, 31)
        began = time.monotonic()
        while time.monotonic() < began + 2:  # several route polls without the topic
            assert reader.latestOffset(end, ReadAllAvailable()) == end
            time.sleep(0.1)
        rocketmq.create_topic(topic, queues=4, broker="broker-a")  # registered again by broker-a alone
        rocketmq.produce(topic, [{"body": "n", "broker": "broker-a", "queueId": 0}])
        began = time.monotonic()
        while (later := reader.latestOffset(end, ReadAllAvailable())) == end and time.monotonic() < began + 10:
            time.sleep(0.1)
        assert later[topic]["broker-a/0"] == 4, later
        assert later[topic]["broker-b/0"] == 3, "broker-b's queue must wait with its offset carried"
    finally:
        reader.stop()
