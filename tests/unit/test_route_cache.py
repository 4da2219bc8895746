"""The client's route cache (issue 34 item 12): past its TTL a route is looked up in the background, and a caller
waits at most ROUTE_WAIT_S for a name server that takes the request and never answers."""
from __future__ import annotations

import threading
import time

from rmq_spark.client import base
from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import RequestTimeoutError
from rmq_spark.client.model import BrokerData, QueueData, TopicRoute

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
        assert time.monotonic() - began < base.ROUTE_WAIT_S + 0.3 < HANG_S
        client.answer.set()
        deadline = time.monotonic() + 2
        while client.cached_route("T").brokers[0].broker_name != "broker-b":  # the background answer lands
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert client.route("T", refresh=True).brokers[0].broker_name == "broker-b"  # refresh: waited for
    finally:
        client.close()
