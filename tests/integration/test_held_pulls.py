"""The stream driver's discovery of new messages on the real broker: held pulls ring when a message arrives, and an
idle watch asks no broker for offsets on a clock (issue 28)."""

from __future__ import annotations

import threading
import time
import uuid

from rmq_spark.client import RemotingClient
from rmq_spark.client.remoting import codes
from rmq_spark.compiled import PullStatus
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


def test_the_logic_queues_of_a_static_topic_are_held_at_their_leaders(rocketmq):
    topic = f"Static-held-{uuid.uuid4().hex[:8]}"
    rocketmq.create_static_topic(topic, queues=4)
    watch, client = _watch(rocketmq, topic)
    try:
        watch.poll(force=True)
        queues = watch.queues()
        assert len(queues) == 4 and all(mq.logic and watch.latest[mq] == 0 for mq in queues)
        before = rocketmq.request_counts()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            watch.poll()
            time.sleep(0.01)
        after = rocketmq.request_counts()
        assert after.get(codes.GET_MAX_OFFSET, 0) == before.get(codes.GET_MAX_OFFSET, 0), "an unheld queue was polled"
        rocketmq.produce(topic, [{"body": "x"}])

        def seen() -> bool:
            watch.poll()
            return sum(watch.latest[mq] for mq in queues) == 1

        wait_until(seen, 10, "the new message's logic offset")
    finally:
        watch.close()
        client.close()


def test_a_held_pull_over_plain_tcp_is_answered_on_the_polled_line_not_on_a_reader_thread(rocketmq, topic):
    """A thousand trickling queues must not wake a connection's reader thread per message: the answer of a hold is
    read by the polling thread of the held pulls' lines (issue 37 item 7)."""
    client = RemotingClient(rocketmq.name_server)
    try:
        mq = next(q for q in client.queues(topic) if q.broker_name == "broker-a" and q.queue_id == 1)
        call = client.hold_async(mq, 0, group=f"g-{uuid.uuid4().hex[:8]}", hold_ms=20_000)
        ended = threading.Event()
        threads: list[str] = []
        call.add_done_callback(lambda: (threads.append(threading.current_thread().name), ended.set()))
        rocketmq.produce(topic, [{"body": "x", "broker": "broker-a", "queueId": 1}])
        assert ended.wait(15), "the hold was not answered"
        assert threads[0] == "rmq-polled"
        result = call.result()
        assert (result.status, result.max_offset) == (PullStatus.FOUND, 1)
    finally:
        client.close()
