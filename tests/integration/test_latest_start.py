"""startingOffsets=latest (a stream's default) on the real RocketMQ when a broker group is away at the query's start:
its queues enter when it is back at what latest meant when the query started, never at their first offset, also
after a restart from the checkpoint while the group was still away."""

from __future__ import annotations

import time

from tests.integration.streaming import Collect, start_query, wait_for

BROKERS = ("broker-a", "broker-b")


def test_a_group_away_at_the_start_of_a_latest_query_enters_at_the_query_start(spark, rocketmq, topic, tmp_path):
    rocketmq.produce(topic, [{"body": f"old{i}", "broker": b, "queueId": 0} for b in BROKERS for i in range(5)])
    sink, checkpoint = Collect(), tmp_path / "c"
    options = {"startingOffsets": "latest", "pollNameServerIntervalMs": "300"}
    rocketmq.stop_broker("broker-b")
    try:
        q = start_query(spark, rocketmq, "remoting", topic, sink, checkpoint, **options)
        try:
            wait_for(lambda: q.lastProgress is not None, 120, "the first batch", q)
            rocketmq.produce(topic, [{"body": f"a{i}", "broker": "broker-a", "queueId": 0} for i in range(2)])
            wait_for(lambda: len(sink) == 2, 120, "the messages sent after the start", q)
            # the batch in Spark's commit log before the stop: a stop inside it would replay it into the sink again
            q.processAllAvailable()
        finally:
            q.stop()
        # a restart while broker-b is still away: what latest meant comes from the checkpoint, not from this run
        time.sleep(1)
        q = start_query(spark, rocketmq, "remoting", topic, sink, checkpoint, **options)
    finally:
        rocketmq.start_broker("broker-b")
    try:
        rocketmq.produce(topic, [{"body": f"b{i}", "broker": "broker-b", "queueId": 0} for i in range(3)])
        wait_for(lambda: len(sink) >= 5, 120, "the messages broker-b stored after it came back", q)
        time.sleep(1)  # nothing more may arrive
    finally:
        q.stop()
    assert sorted(sink.keys) == [("broker-a", 0, 5), ("broker-a", 0, 6)] + [("broker-b", 0, o) for o in (5, 6, 7)]
