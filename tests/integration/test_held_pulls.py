"""The stream driver's discovery of new messages on the real broker: held pulls ring when a message arrives, and an
idle watch asks no broker for offsets on a clock (issue 28)."""

from __future__ import annotations

import time

from rmq_spark.client import RemotingClient
from rmq_spark.client.remoting import codes
from rmq_spark.options import parse_options
from rmq_spark.source.queue_watch import QueueWatch
from tests.support.waiting import wait_until


def _watch(rocketmq, topic: str) -> tuple[QueueWatch, RemotingClient]:
    client = RemotingClient(rocketmq.name_server)
    return QueueWatch(
        client, parse_options({"nameServer": rocketmq.name_server, "topic": topic}, streaming=True)
    ), client


def test_an_idle_watch_asks_no_offsets_and_a_message_rings_its_queue(rocketmq, topic):
    watch, client = _watch(rocketmq, topic)
    try:
        watch.poll(force=True)
        queues = watch.queues()
        assert len(queues) == 8 and all(watch.latest[mq] == 0 for mq in queues)
        before = rocketmq.request_counts()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # as Spark's idle loop asks
            watch.poll()
            time.sleep(0.01)
        after = rocketmq.request_counts()
        asked = after.get(codes.GET_MAX_OFFSET, 0) - before.get(codes.GET_MAX_OFFSET, 0)
        assert asked == 0, f"an idle watch asked {asked} max offsets"

        rocketmq.produce(topic, [{"body": "x", "broker": "broker-b", "queueId": 2}])
        target = next(mq for mq in queues if mq.broker_name == "broker-b" and mq.queue_id == 2)

        def seen() -> bool:
            watch.poll()
            return watch.latest[target] == 1

        wait_until(seen, 10, "the new message's offset")
        assert all(watch.latest[mq] == 0 for mq in queues if mq != target)
    finally:
        watch.close()
        client.close()
