"""The stream driver's view of brokers that are away: QueueWatch.classify (a queue missing from a route read before
its broker registered again is not a vanished queue: a race a full test run hit when a broker restarted between the
route poll and the live-broker lookup), and the offset mirror's pace while a master is away."""

from __future__ import annotations

import contextlib
import logging

from rmq_spark.client import outages
from rmq_spark.client.base import Answers, BaseClient
from rmq_spark.client.errors import BrokerError, BrokerUnavailableError, UnsupportedError
from rmq_spark.client.model import BrokerData, MessageQueue, QueueData, TopicRoute
from rmq_spark.client.outages import OutageLog
from rmq_spark.options import parse_options
from rmq_spark.source.offset_store import OffsetStore
from rmq_spark.source.queue_watch import QueueWatch
from tests.support.calls import refresh_each

TOPIC = "T"
PERM_RW = 6


def _route(*brokers: str) -> TopicRoute:
    return TopicRoute(
        TOPIC,
        tuple(BrokerData(b, {0: f"127.0.0.1:{10 + i}"}) for i, b in enumerate(brokers)),
        tuple(QueueData(b, 2, 2, PERM_RW) for b in brokers),
    )


class _NameServer:
    """Routes as a name server answers them while broker-b registers again: the first read lacks broker-b, every
    later one has it; broker-b is registered throughout the lookup of live brokers."""

    def __init__(self, later: TopicRoute | None) -> None:
        self.answers = [_route("broker-a"), later]
        self.refreshes = 0
        self.outages = OutageLog(logging.getLogger("test"))

    refresh_routes = refresh_each

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


class _AwayMaster:
    """Offset calls as brokers answer them while broker-b's master is away: broker-a stores, broker-b fails."""

    burst = staticmethod(contextlib.nullcontext)  # BaseClient's: no transport here to write together

    def __init__(self) -> None:
        self.outages = OutageLog(logging.getLogger("test"))
        self.asked: list[str] = []

    def _answer(self, mqs, value):
        self.asked += [mq.broker_name for mq in mqs]
        return Answers(
            {mq: value(mq) for mq in mqs if mq.broker_name == "broker-a"},
            {mq: BrokerUnavailableError("away") for mq in mqs if mq.broker_name == "broker-b"},
        )

    def query_consumer_offsets(self, group, mqs, partial=False):
        return self._answer(mqs, lambda mq: None)

    def update_consumer_offsets(self, group, offsets, partial=False):
        return self._answer(list(offsets), lambda mq: True)


def test_the_mirror_retries_a_master_that_is_away_on_a_clock_not_at_every_call(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(outages.time, "monotonic", lambda: now[0])
    client = _AwayMaster()
    store = OffsetStore(client, "g")
    a, b = MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-b", 0)
    for i in range(1, 101):  # Spark asks for the latest offsets every few milliseconds
        store.load([a, b])
        store.update_all({a: i, b: i})
        store.persist_all()
        now[0] += 0.01
    # broker-a is mirrored at every call; broker-b is asked once to load and once to store in the first second
    assert client.asked.count("broker-a") == 1 + 100
    assert client.asked.count("broker-b") == 2
    now[0] += outages.RETRY_DOWN_S
    store.persist_all()
    assert client.asked.count("broker-b") == 3


def test_an_outage_report_logs_each_broker_down_once_and_back_up(caplog):
    log = OutageLog(logging.getLogger("test.outages"))
    name = "the master of broker {}".format
    with caplog.at_level(logging.WARNING, "test.outages"):
        log.report(["b", "a", "b"], {"b": "refused"}, name, "kept for later")
        log.report(["a", "b"], {"b": "refused"}, name, "kept for later")
        log.report(["b"], {}, name, "kept for later")
    assert [r.getMessage() for r in caplog.records] == [
        "the master of broker b did not answer (refused); kept for later",
        caplog.records[1].getMessage(),
    ]
    assert caplog.records[1].getMessage().startswith("the master of broker b answers again after ")


class _ShrunkTopic:
    """A topic that went from 4 queues on broker-a to 2 after the watch read its route: the offsets of queues 2 and
    3 are refused (as the gRPC gateway refuses a queue outside the route)."""

    burst = staticmethod(contextlib.nullcontext)  # BaseClient's: no transport here to write together

    def __init__(self) -> None:
        self.outages = OutageLog(logging.getLogger("test"))
        self.route_reads = 0

    refresh_routes = refresh_each

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        self.route_reads += 1
        return TopicRoute(
            TOPIC, (BrokerData("broker-a", {0: "127.0.0.1:10"}),), (QueueData("broker-a", 2, 2, PERM_RW),)
        )

    def live_brokers(self) -> set[str]:
        return {"broker-a"}

    def max_offsets(self, mqs, partial=False):
        mqs = list(mqs)
        if any(mq.queue_id >= 2 for mq in mqs):
            raise BrokerError("BAD_REQUEST: queue id out of range")
        return Answers({mq: 7 for mq in mqs})

    def hold_async(self, mq, offset, *, group, hold_ms):
        raise UnsupportedError("no holds here")

    holds = BaseClient.holds


def test_offsets_refused_for_queues_that_left_the_route_send_the_watch_to_the_routes_not_to_an_error():
    client = _ShrunkTopic()
    watch = QueueWatch(client, parse_options({"nameServer": "127.0.0.1:9876", "topic": TOPIC}))
    watch._routes = {
        TOPIC: TopicRoute(
            TOPIC, (BrokerData("broker-a", {0: "127.0.0.1:10"}),), (QueueData("broker-a", 4, 4, PERM_RW),)
        )
    }
    watch._routes_at = 0.0  # read before the topic shrank
    gone = [MessageQueue(TOPIC, "broker-a", 2), MessageQueue(TOPIC, "broker-a", 3)]
    watch._poll_offsets(watch.queues())
    assert client.route_reads >= 1
    assert watch.latest == {MessageQueue(TOPIC, "broker-a", 0): 7, MessageQueue(TOPIC, "broker-a", 1): 7}
    unavailable, vanished = watch.classify([MessageQueue(TOPIC, "broker-a", 0), *gone])
    assert vanished == set(gone) and unavailable == set()


class _SlaveWithoutTheGroup:
    """broker-a's master is away, so its slave answers the offsets; the probe pull gets an answer no retry cures
    (the slave has not copied the group from its master yet)."""

    burst = staticmethod(contextlib.nullcontext)  # BaseClient's: no transport here to write together

    def __init__(self) -> None:
        self.outages = OutageLog(logging.getLogger("test"))
        self.probes = 0

    def max_offsets(self, mqs, partial=False):
        mqs = list(mqs)
        return Answers({mq: 7 for mq in mqs}, replica=mqs)

    def serves_reads(self, mq, offset, group):
        self.probes += 1
        raise BrokerError("subscription group not exist", code=26)


def test_a_slave_probe_answered_with_an_error_counts_the_broker_as_refusing_not_as_a_failed_query():
    client = _SlaveWithoutTheGroup()
    watch = QueueWatch(client, parse_options({"nameServer": "127.0.0.1:9876", "topic": TOPIC}))
    watch._routes = {
        TOPIC: TopicRoute(
            TOPIC, (BrokerData("broker-a", {1: "127.0.0.1:11"}),), (QueueData("broker-a", 2, 2, PERM_RW),)
        )
    }
    watch._poll_offsets(watch.queues())
    assert client.probes == 1
    assert watch.readable() == [] and watch.silent == set(watch.queues())  # unavailable until the master is back
    watch._poll_offsets(watch.queues())
    assert client.probes == 1  # asked again on the outage clock, not at every poll
