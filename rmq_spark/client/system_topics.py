"""Topics that hold no user data, which a topicPattern never matches: RocketMQ's system topics (the broker's
TopicValidator set and its ``rmq_sys_`` prefix, the ``RMQ_SYS_`` topics of newer brokers, retry, dead-letter and
light message queue topics, and the topics each broker creates under its cluster's and its own name) and this
connector's own topics (``RECORDS_TOPIC_PREFIX``: the exactly-once sink's commit records). Any other topic is a
user's, whatever its name (``rmq_spark_orders`` too). A topic named explicitly (option topic or topics) is read
whatever it is."""

from __future__ import annotations

# TopicValidator.SYSTEM_TOPIC_SET: the system topics every client knows by name
ROCKETMQ_SYSTEM_TOPICS = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "CHECKPOINT_TOPIC",
    }
)
ROCKETMQ_SYSTEM_PREFIX = "rmq_sys_"  # TopicValidator.SYSTEM_TOPIC_PREFIX: timer, revive, trace, broker sync topics
CONNECTOR_TOPIC_PREFIX = "rmq_spark_"
# The only topics this connector keeps for itself: the exactly-once sink's commit records, + producerGroup
RECORDS_TOPIC_PREFIX = CONNECTOR_TOPIC_PREFIX + "commits_"
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"  # MixAll: a group's retry and dead-letter topics
# RMQ_SYS_ topics outside TopicValidator's set (5.5's RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC), MixAll's light message queues
_INTERNAL_PREFIXES = (ROCKETMQ_SYSTEM_PREFIX, "RMQ_SYS_", RETRY_PREFIX, DLQ_PREFIX, "%LMQ%", RECORDS_TOPIC_PREFIX)
REPLY_TOPIC_SUFFIX = (
    "_REPLY_TOPIC"  # MixAll.REPLY_TOPIC_POSTFIX: a cluster's request-reply topic is <cluster>_REPLY_TOPIC
)


def is_rocketmq_system_topic(topic: str) -> bool:
    """What RocketMQ's clients call a system topic (TopicValidator.isSystemTopic without a broker's additions)."""
    return topic in ROCKETMQ_SYSTEM_TOPICS or topic.startswith(ROCKETMQ_SYSTEM_PREFIX)


def is_internal_topic(topic: str) -> bool:
    """Whether ``topic``'s name alone marks it as a system or connector topic (see the module)."""
    return topic in ROCKETMQ_SYSTEM_TOPICS or topic.startswith(_INTERNAL_PREFIXES)


def cluster_topics(clusters: dict[str, set[str]]) -> set[str]:
    """The topics every broker creates for its cluster and itself (TopicConfigManager), from the name servers'
    ``{cluster: broker names}``: each cluster's name and reply topic, each broker's name."""
    out = {name for brokers in clusters.values() for name in brokers}
    for cluster in clusters:
        out |= {cluster, cluster + REPLY_TOPIC_SUFFIX}
    return out
