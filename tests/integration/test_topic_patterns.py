"""topicPattern on the real RocketMQ: a pattern never reads the cluster's system topics
(uncommitted transactional halves among them), nor this connector's internal ones."""

from __future__ import annotations

import re
import time
import uuid

from rmq_spark.client import MessageQueue, OutgoingMessage, RemotingClient
from rmq_spark.options import parse_options
from rmq_spark.source.planning import resolve_queues
from tests.integration.streaming import Collect, assert_exactly_once, start_query, wait_for

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
# what the embedded cluster's name server lists besides users' topics (RocketMQ 5.5.0, two brokers)
SYSTEM = {
    "BenchmarkTest",
    "DefaultCluster",
    "DefaultCluster_REPLY_TOPIC",
    "OFFSET_MOVED_EVENT",
    HALF_TOPIC,
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "SCHEDULE_TOPIC_XXXX",
    "SELF_TEST_TOPIC",
    "TBW102",
    "broker-a",
    "broker-b",
}
INTERNAL = re.compile(r"(rmq_sys_|RMQ_SYS_|%RETRY%|%DLQ%|rmq_spark_commits_).*")


def _pending_half(client: RemotingClient, topic: str) -> None:
    """Send a transactional half bound for ``topic`` and leave it open; check that the half topic holds it."""
    client.send_half_async(
        MessageQueue(topic, "broker-a", 0), OutgoingMessage(b"uncommitted"), group=f"halves-{topic}"[:100]
    ).result()
    assert client.max_offset(MessageQueue(HALF_TOPIC, "broker-a", 0)) > 0


def test_a_pattern_plans_no_system_topic(rocketmq, topic):
    internal = f"rmq_spark_commits_{topic}"[:127]
    users = f"rmq_spark_{topic}"[:127]  # a user's topic, for all its name: only the sink's records topics are ours
    rocketmq.create_topic(internal, queues=1)
    rocketmq.create_topic(users, queues=1)
    with RemotingClient(rocketmq.name_server) as client:
        _pending_half(client, topic)
        listed = set(client.topics())
        assert SYSTEM <= listed and internal in listed
        planned = {
            mq.topic
            for mq in resolve_queues(client, parse_options({"nameServer": rocketmq.name_server, "topicPattern": ".*"}))
        }
    assert topic in planned and users in planned
    assert planned.isdisjoint(SYSTEM), sorted(planned & SYSTEM)
    assert not [t for t in planned if INTERNAL.fullmatch(t)]


def test_a_batch_read_by_pattern_returns_no_uncommitted_half(spark, rocketmq, topic):
    rocketmq.produce(topic, [{"body": f"m{i}"} for i in range(5)])
    with RemotingClient(rocketmq.name_server) as client:
        _pending_half(client, topic)
    rows = (
        spark.read.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .option("topicPattern", f"{re.escape(topic)}|RMQ_SYS_.*")
        .load()
        .select("topic", "body")
        .collect()
    )
    assert sorted((r.topic, bytes(r.body)) for r in rows) == [(topic, f"m{i}".encode()) for i in range(5)]


def test_an_explicit_topic_may_name_a_system_topic(rocketmq, topic):
    with RemotingClient(rocketmq.name_server) as client:
        _pending_half(client, topic)
        planned = resolve_queues(client, parse_options({"nameServer": rocketmq.name_server, "topic": HALF_TOPIC}))
    assert {mq.topic for mq in planned} == {HALF_TOPIC}


def test_a_pattern_query_started_before_its_topics_reads_them_after_a_name_server_restart(spark, rocketmq, tmp_path):
    prefix = f"later-{uuid.uuid4().hex[:8]}-"
    sink = Collect()
    q = start_query(
        spark,
        rocketmq,
        "remoting",
        None,
        sink,
        tmp_path / "c",
        topicPattern=f"{prefix}.*",
        pollNameServerIntervalMs="300",
    )
    try:
        wait_for(lambda: q.lastProgress is not None, 60, "the first trigger", q)
        rocketmq.stop_name_server()
        try:
            time.sleep(2)  # several name-server polls
            assert q.isActive and q.exception() is None
        finally:
            rocketmq.start_name_server()
        topic = prefix + "t"
        rocketmq.create_topic(topic, queues=2)
        rocketmq.produce(topic, [{"body": f"m{i}"} for i in range(20)])
        wait_for(lambda: len(sink) == 20, 60, "the new topic's messages", q)
    finally:
        q.stop()
    assert_exactly_once(sink, rocketmq, topic)
