"""The stream driver's discovery of new messages on the real broker: held pulls ring when a message arrives, and an
idle watch asks no broker for offsets on a clock."""

from __future__ import annotations

import time
import uuid

from rmq_spark.client import RemotingClient
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.native_holds import NativeHolds
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


def test_holds_over_plain_tcp_are_held_again_by_the_compiled_core_at_each_new_end(rocketmq, topic):
    """A thousand trickling queues must cost no Python per message: over plain TCP the hold line
    judges each answer and sends the hold again at the master's new end itself; Python reads one record per end."""
    client = RemotingClient(rocketmq.name_server)
    holds = client.holds(f"g-{uuid.uuid4().hex[:8]}", 20_000)
    try:
        assert isinstance(holds, NativeHolds)
        mq = next(q for q in client.queues(topic) if q.broker_name == "broker-a" and q.queue_id == 1)
        holds.hold(mq, 0)
        seen: list[tuple[int, int | None]] = []

        def ended(count: int) -> bool:
            seen.extend((e.offset, e.next_offset) for e in holds.ended())
            return len(seen) >= count

        for n in (1, 2):
            time.sleep(0.3)  # the hold is on the broker
            rocketmq.produce(topic, [{"body": f"m{n}", "broker": "broker-a", "queueId": 1}])
            wait_until(lambda n=n: ended(n), 15, f"the end of hold {n}")
        assert seen == [(0, 1), (1, 2)]  # the second hold was sent by the core at the first one's end
    finally:
        holds.close()
        client.close()
