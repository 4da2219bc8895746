"""topicPattern's topics (issue 34 item 6): which names are system or connector topics, and the pattern's match
over a name server's list."""
from __future__ import annotations

from rmq_spark.client.system_topics import CONNECTOR_TOPIC_PREFIX, cluster_topics, is_internal_topic
from rmq_spark.options import parse_options
from rmq_spark.planning import query_topics


def test_system_retry_dead_letter_and_connector_topics_are_internal():
    for name in ("RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC", "rmq_sys_wheel_timer", "TBW102",
                 "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "%RETRY%g",
                 "%DLQ%g", "%LMQ%x", f"{CONNECTOR_TOPIC_PREFIX}commits_g"):
        assert is_internal_topic(name), name
    for name in ("Orders", "rmq_sparkling", "RMQ_SYSTEMS", "Benchmark"):
        assert not is_internal_topic(name), name


def test_the_cluster_and_broker_topics():
    assert cluster_topics({"DefaultCluster": {"broker-a", "broker-b"}}) == {
        "DefaultCluster", "DefaultCluster_REPLY_TOPIC", "broker-a", "broker-b"}


class _Listing:
    def topics(self) -> list[str]:
        return ["DefaultCluster", "DefaultCluster_REPLY_TOPIC", "Orders", "OrdersEU", "RMQ_SYS_TRANS_HALF_TOPIC",
                "%RETRY%orders", "broker-a", "rmq_spark_commits_orders"]

    def cluster_topics(self) -> set[str]:
        return {"DefaultCluster", "DefaultCluster_REPLY_TOPIC", "broker-a"}


def test_a_pattern_matches_only_user_topics_and_a_topic_option_names_any():
    def topics(**kw):
        return query_topics(_Listing(), parse_options({"nameServer": "127.0.0.1:9876", **kw}))
    assert topics(topicPattern=".*") == ["Orders", "OrdersEU"]
    assert topics(topicPattern=".*orders.*|broker-.*") == []
    assert topics(topics="%RETRY%orders,RMQ_SYS_TRANS_HALF_TOPIC") == ["%RETRY%orders", "RMQ_SYS_TRANS_HALF_TOPIC"]
