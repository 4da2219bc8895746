"""Route reads while the name servers take requests and never answer: the client's cached route
past its TTL is looked up in the background, and a caller waits at most ROUTE_WAIT_S; the stream driver's forced
poll and its lookups for a queue missing from the route wait no longer either, and its consumer-group check takes
the topics the watch read."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from rmq_spark.client import routes
from rmq_spark.client.base import Answers, BaseClient
from rmq_spark.client.errors import RequestTimeoutError
from rmq_spark.client.model import BrokerData, MessageQueue, QueueData, TopicRoute
from rmq_spark.client.outages import OutageLog
from rmq_spark.options import parse_options
from rmq_spark.source.queue_watch import QueueWatch
from rmq_spark.source.stream import RocketMQStreamReader
from tests.support.calls import refresh_each

HANG_S = 3.0


def _route(broker: str) -> TopicRoute:
    return TopicRoute("T", (BrokerData(broker, {0: "127.0.0.1:10"}),), (QueueData(broker, 1, 1, 6),))


class _SlowNameServer(BaseClient):
    """Answers the first lookup at once; later ones only once ``answer`` is set, else time out after HANG_S."""

    def __init__(self) -> None:
        super().__init__(route_ttl=0.1)
        self.answer = threading.Event()
        self.lookups = 0

    def _fetch_route(self, topic: str) -> TopicRoute:
        self.lookups += 1
        if self.lookups == 1:
            return _route("broker-a")
        if not self.answer.wait(HANG_S):
            raise RequestTimeoutError("no answer")
        return _route("broker-b")


def test_a_stale_route_does_not_wait_for_a_silent_name_server():
    client = _SlowNameServer()
    try:
        assert client.route("T").brokers[0].broker_name == "broker-a"
        time.sleep(0.2)  # past the TTL
        began = time.monotonic()
        assert client.route("T").brokers[0].broker_name == "broker-a"  # the cached route, after ROUTE_WAIT_S
        assert client.route("T").brokers[0].broker_name == "broker-a"  # a lookup is under way: no wait at all
        assert time.monotonic() - began < routes.ROUTE_WAIT_S + 0.3 < HANG_S
        client.answer.set()
        deadline = time.monotonic() + 2
        while client.cached_route("T").brokers[0].broker_name != "broker-b":  # the background answer lands
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert client.route("T", refresh=True).brokers[0].broker_name == "broker-b"  # refresh: waited for
    finally:
        client.close()


class _SilentAfterFirst:
    """A driver's client whose name servers answer the first route read, then take every request and answer none
    for HANG_S; brokers answer offsets."""

    burst = staticmethod(contextlib.nullcontext)  # BaseClient's: no transport here to write together

    def __init__(self) -> None:
        self.outages = OutageLog(logging.getLogger("test"))
        self.reads = 0

    refresh_routes = refresh_each

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        self.reads += 1
        if self.reads > 1:
            time.sleep(HANG_S)
        return _route("broker-a")

    def live_brokers(self) -> set[str]:
        time.sleep(HANG_S)
        return {"broker-a"}

    def max_offsets(self, mqs, partial=False):
        return Answers({mq: 0 for mq in mqs})

    def is_compacted(self, topic: str) -> bool:
        return False

    def topic_message_type(self, topic: str):
        return None  # no message.type attribute


def test_a_forced_poll_and_a_classification_do_not_wait_for_silent_name_servers():
    client = _SilentAfterFirst()
    watch = QueueWatch(client, parse_options({"nameServer": "127.0.0.1:9876", "topic": "T"}, streaming=True))
    watch._holds.arm = lambda mq, offset: None
    try:
        watch.poll(force=True)  # the first read is waited for
        began = time.monotonic()
        watch.poll(force=True)  # as prepareForTriggerAvailableNow asks
        unavailable, vanished = watch.classify([MessageQueue("T", "broker-b", 0)])  # a broker not in the route
        assert time.monotonic() - began < 2 * routes.ROUTE_WAIT_S + 0.5 < HANG_S
        assert unavailable == {MessageQueue("T", "broker-b", 0)} and vanished == set()  # cannot tell: it waits
        assert watch.queues() == [MessageQueue("T", "broker-a", 0)]
    finally:
        watch.close()


class _GroupCheck:
    """A client whose name servers must not be asked (they never answer); it lists the group's consumers."""

    def __init__(self) -> None:
        self.outages = OutageLog(logging.getLogger("test"))
        self.asked: list[list[str]] = []

    def topics(self) -> list[str]:
        raise AssertionError("Spark's thread asked the name servers for the topic list")

    def online_consumers(self, group: str, topics) -> list[str]:
        self.asked.append(list(topics))
        return []


def test_the_group_check_after_the_start_takes_the_watched_topics():
    options = parse_options(
        {"nameServer": "127.0.0.1:9876", "topicPattern": "T.*", "consumerGroup": "g"}, streaming=True
    )
    reader = RocketMQStreamReader(options)
    reader._client = client = _GroupCheck()
    reader._watch = watch = QueueWatch(client, options)
    watch._routes, watch._listed = {"T1": _route("broker-a")}, True  # the watch has read its routes
    reader.group_check.check()  # as _mirror() asks it while the first check has not succeeded
    assert client.asked == [["T1"]]
