"""The consumer group a streaming query mirrors its offsets to (docs/DESIGN.md §10): a group another application
consumes with is refused, a group's offsets are never moved back, and nothing is mirrored before a batch commits.
Checked against the real broker and the official Java consumer and admin tool."""

from __future__ import annotations

import time

import pytest

from rmq_spark.source.offset_store import OffsetStore
from tests.conftest import new_client, unique_topic
from tests.integration.streaming import Collect, start_query, wait_for


def test_a_group_with_a_live_java_consumer_is_refused(spark, rocketmq, topic, tmp_path):
    group = f"shared-{topic}"[:100]
    client_id = rocketmq.start_consumer(group, topic)
    try:
        q = start_query(spark, rocketmq, "remoting", topic, Collect(), tmp_path / "c1", consumerGroup=group)
        with pytest.raises(
            Exception,
            match=rf"consumer group '{group}' has 1 online consumer\(s\) \({client_id}\).*"
            "consumerGroup of its own.*allowSharedConsumerGroup=true",
        ):
            q.awaitTermination(120)
            raise AssertionError("the query was not refused")
        # the explicit override lets it run
        sink = Collect()
        q = start_query(
            spark,
            rocketmq,
            "remoting",
            topic,
            sink,
            tmp_path / "c2",
            consumerGroup=group,
            allowSharedConsumerGroup="true",
        )
        try:
            rocketmq.produce(topic, [{"body": f"m{i}", "broker": "broker-a", "queueId": 0} for i in range(5)])
            wait_for(lambda: len(sink) == 5, 120, "the messages", q)
        finally:
            q.stop()
    finally:
        rocketmq.stop_consumer(group)
    # the override still mirrors the query's offsets to the group (no Java consumer left to write them)
    sink = Collect()
    q = start_query(
        spark, rocketmq, "remoting", topic, sink, tmp_path / "c3", consumerGroup=group, allowSharedConsumerGroup="true"
    )
    try:
        wait_for(lambda: q.lastProgress is not None, 120, "the query to start", q)
        rocketmq.produce(topic, [{"body": f"n{i}", "broker": "broker-a", "queueId": 0} for i in range(5)])
        wait_for(lambda: len(sink) == 5, 120, "the new messages", q)
        wait_for(
            lambda: rocketmq.query_consumer_offset(group, topic, "broker-a", 0) == 10,
            60,
            "the group's offset mirrored to 10",
            q,
        )
    finally:
        q.stop()


def test_the_mirror_never_rewinds_a_group_nor_mirrors_unread_starting_offsets(spark, rocketmq, topic, tmp_path):
    group = f"mirror-{topic}"[:100]

    def stored():
        return rocketmq.query_consumer_offset(group, topic, "broker-a", 0)

    rocketmq.produce(topic, [{"body": f"m{i}", "broker": "broker-a", "queueId": 0} for i in range(5)])
    # a query that has committed no batch mirrors nothing, not even its starting offsets
    q = start_query(
        spark, rocketmq, "remoting", topic, Collect(), tmp_path / "c1", startingOffsets="latest", consumerGroup=group
    )
    try:
        wait_for(lambda: q.lastProgress is not None, 120, "the query to start", q)
        time.sleep(1)
    finally:
        q.stop()
    assert stored() == -1

    # another application's progress (15 of 20) is not moved back by a query that reads from the start
    rocketmq.produce(topic, [{"body": f"n{i}", "broker": "broker-a", "queueId": 0} for i in range(15)])
    rocketmq.update_consumer_offset(group, topic, "broker-a", 0, 15)
    sink = Collect()
    q = start_query(
        spark, rocketmq, "remoting", topic, sink, tmp_path / "c2", consumerGroup=group, maxMessagesPerTrigger="2"
    )
    try:
        wait_for(lambda: len(sink) >= 8, 120, "the first batches", q)
        value, delivered = stored(), len(sink)
        assert delivered >= 14 or value == 15, f"the group was moved back to {value} after {delivered} messages"
        wait_for(lambda: len(sink) == 20 and stored() == 20, 120, "the mirror to pass the group's offset", q)
    finally:
        q.stop()


def test_the_first_offsets_a_group_stores_for_a_topic_are_all_kept(rocketmq, request):
    """A broker makes a group's offset table of a topic with a get and a put (ConsumerOffsetManager.commitOffset), so
    two first updates of one table at once could keep only one, though both were acknowledged: 4 of 300 fresh groups
    lost an offset so before the store sent a table's first offset alone (a stream's mirror lost one, now and then,
    in test_namespaces). Groups that exist on the brokers already, as a stream's held pulls make them; a topic of 16
    queues a broker, all stored at once; the race is rare, so many groups."""
    topic, elsewhere = unique_topic(request), unique_topic(request)
    rocketmq.create_topic(topic, queues=16)
    rocketmq.create_topic(elsewhere, queues=1)
    with new_client(rocketmq, "remoting") as client:
        queues = client.queues(topic)
        for i in range(120):
            group = f"g{i}-{topic}"[:100]
            client.update_consumer_offsets(group, {mq: 0 for mq in client.queues(elsewhere)})  # makes the group
            store = OffsetStore(client, group)
            store.update_all({mq: mq.queue_id + 1 for mq in queues})
            assert store.persist_all()
            kept = {mq: rocketmq.query_consumer_offset(group, topic, mq.broker_name, mq.queue_id) for mq in queues}
            lost = {str(mq): offset for mq, offset in kept.items() if offset != mq.queue_id + 1}
            assert not lost, f"the brokers acknowledged every offset of group {group} but do not have these: {lost}"
