"""QueueWatch.classify: a queue missing from a route read before its broker registered again is not a vanished
queue (a race a full test run hit when a broker restarted between the route poll and the live-broker lookup)."""
from __future__ import annotations

import logging

from rmq_spark.client.model import BrokerData, MessageQueue, QueueData, TopicRoute
from rmq_spark.client.outages import OutageLog
from rmq_spark.options import parse_options
from rmq_spark.queue_watch import QueueWatch

TOPIC = "T"
PERM_RW = 6


def _route(*brokers: str) -> TopicRoute:
    return TopicRoute(TOPIC, tuple(BrokerData(b, {0: f"127.0.0.1:{10 + i}"}) for i, b in enumerate(brokers)),
                      tuple(QueueData(b, 2, 2, PERM_RW) for b in brokers))


class _NameServer:
    """Routes as a name server answers them while broker-b registers again: the first read lacks broker-b, every
    later one has it; broker-b is registered throughout the lookup of live brokers."""

    def __init__(self, later: TopicRoute | None) -> None:
        self.answers = [_route("broker-a"), later]
        self.refreshes = 0
        self.outages = OutageLog(logging.getLogger("test"))

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        self.refreshes += refresh
        return self.answers[0] if not self.refreshes else self.answers[1]

    def live_brokers(self) -> set[str]:
        return {"broker-a", "broker-b"}


def _watch(client) -> QueueWatch:
    watch = QueueWatch(client, parse_options({"nameServer": "127.0.0.1:9876", "topic": TOPIC}))
    watch._routes = {TOPIC: client.route(TOPIC)}
    return watch


def test_a_broker_back_between_the_route_and_the_live_brokers_is_not_data_loss():
    client = _NameServer(later=_route("broker-a", "broker-b"))
    unavailable, vanished = _watch(client).classify([MessageQueue(TOPIC, "broker-b", 0)])
    assert vanished == set() and unavailable == {MessageQueue(TOPIC, "broker-b", 0)}
    assert client.refreshes == 1


def test_a_registered_broker_without_the_topic_has_lost_its_queues():
    client = _NameServer(later=_route("broker-a"))
    queues = [MessageQueue(TOPIC, "broker-b", 0), MessageQueue(TOPIC, "broker-b", 1)]
    unavailable, vanished = _watch(client).classify(queues)
    assert vanished == set(queues) and unavailable == set()
    assert client.refreshes == 1  # one fresh route per topic and classification
