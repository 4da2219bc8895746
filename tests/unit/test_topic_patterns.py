"""topicPattern's topics: which names are system or connector topics, the pattern's match
over a name server's list, and a listed topic that has no route."""

from __future__ import annotations

import contextlib
import logging

from rmq_spark.client.base import Answers, BaseClient
from rmq_spark.client.errors import TopicNotFoundError
from rmq_spark.client.model import BrokerData, MessageQueue, QueueData, TopicRoute
from rmq_spark.client.outages import OutageLog
from rmq_spark.client.system_topics import RECORDS_TOPIC_PREFIX, cluster_topics, is_internal_topic
from rmq_spark.options import parse_options
from rmq_spark.source.planning import query_topics
from rmq_spark.source.queue_watch import QueueWatch
from tests.support.calls import refresh_each


def test_system_retry_dead_letter_and_connector_topics_are_internal():
    for name in (
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC",
        "rmq_sys_wheel_timer",
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SELF_TEST_TOPIC",
        "%RETRY%g",
        "%DLQ%g",
        "%LMQ%x",
        f"{RECORDS_TOPIC_PREFIX}g",
    ):
        assert is_internal_topic(name), name
    for name in ("Orders", "rmq_sparkling", "RMQ_SYSTEMS", "Benchmark"):
        assert not is_internal_topic(name), name


def test_a_user_topic_named_like_the_connector_is_not_internal():
    """Only the sink's records topics are the connector's own: a user may name a topic rmq_spark_anything."""
    assert is_internal_topic("rmq_spark_commits_orders")
    for name in ("rmq_spark_orders", "rmq_spark_", "rmq_spark_commit", "rmq_spark_commitsorders"):
        assert not is_internal_topic(name), name


def test_the_cluster_and_broker_topics():
    assert cluster_topics({"DefaultCluster": {"broker-a", "broker-b"}}) == {
        "DefaultCluster",
        "DefaultCluster_REPLY_TOPIC",
        "broker-a",
        "broker-b",
    }


class _Listing:
    def topics(self) -> list[str]:
        return [
            "DefaultCluster",
            "DefaultCluster_REPLY_TOPIC",
            "Orders",
            "OrdersEU",
            "RMQ_SYS_TRANS_HALF_TOPIC",
            "%RETRY%orders",
            "broker-a",
            "rmq_spark_commits_orders",
            "rmq_spark_events",
        ]

    def cluster_topics(self) -> set[str]:
        return {"DefaultCluster", "DefaultCluster_REPLY_TOPIC", "broker-a"}


def test_a_pattern_matches_only_user_topics_and_a_topic_option_names_any():
    def topics(**kw):
        return query_topics(_Listing(), parse_options({"nameServer": "127.0.0.1:9876", **kw}))

    assert topics(topicPattern=".*") == ["Orders", "OrdersEU", "rmq_spark_events"]
    assert topics(topicPattern=".*orders.*|broker-.*") == []
    assert topics(topics="%RETRY%orders,RMQ_SYS_TRANS_HALF_TOPIC") == ["%RETRY%orders", "RMQ_SYS_TRANS_HALF_TOPIC"]


class _Deleting:
    """A cluster where topic B is listed but deleted before its route is read (until ``b_back``)."""

    burst = staticmethod(contextlib.nullcontext)  # BaseClient's: no transport here to write together

    def __init__(self) -> None:
        self.outages = OutageLog(logging.getLogger("test"))
        self.b_back = False

    def topics(self) -> list[str]:
        return ["A", "B"]

    def cluster_topics(self) -> set[str]:
        return set()

    refresh_routes = refresh_each

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        if topic == "B" and not self.b_back:
            raise TopicNotFoundError(f"topic {topic!r} does not exist")
        return TopicRoute(topic, (BrokerData("broker-a", {0: "127.0.0.1:10"}),), (QueueData("broker-a", 1, 1, 6),))

    queues = BaseClient.queues

    def max_offsets(self, mqs, partial=False):
        return Answers({mq: 0 for mq in mqs})

    def is_compacted(self, topic: str) -> bool:
        return False

    def topic_message_type(self, topic: str):
        return None  # no message.type attribute


def test_a_listed_topic_deleted_before_its_route_is_read_is_skipped_until_it_has_one():
    client = _Deleting()
    watch = QueueWatch(client, parse_options({"nameServer": "127.0.0.1:9876", "topicPattern": "[AB]"}, streaming=True))
    watch._holds.arm = lambda mq, offset: None
    watch.poll(force=True)
    assert watch.queues() == [MessageQueue("A", "broker-a", 0)]
    client.b_back = True
    watch.poll(force=True)
    assert watch.queues() == [MessageQueue("A", "broker-a", 0), MessageQueue("B", "broker-a", 0)]
