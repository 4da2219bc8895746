"""The stream driver's verdicts on queues that leave the route, against a scripted cluster (the real broker cannot
stage a route read that finishes late): only the newest route shows which queues left (docs/DESIGN.md §10)."""
from __future__ import annotations

import logging
from concurrent.futures import Future

from rmq_spark.client.base import Answers
from rmq_spark.client.errors import BrokerUnavailableError, UnsupportedError
from rmq_spark.client.model import BrokerData, MessageQueue, QueueData, TopicRoute
from rmq_spark.client.outages import OutageLog
from rmq_spark.options import parse_options
from rmq_spark.queue_watch import QueueWatch

TOPIC = "T"
A, B = "broker-a", "broker-b"
PERM_RW = 6


def mq(queue_id: int, broker: str = A) -> MessageQueue:
    return MessageQueue(TOPIC, broker, queue_id)


class _Cluster:
    """Name servers and brokers as a test scripts them: the readable queues of each broker group in the route, the
    end offset each master answers, and, while ``slave_ends`` is set, a slave answering instead of the masters (or,
    for a queue missing from it, nobody)."""

    def __init__(self, queues: dict[str, int], ends: dict[MessageQueue, int]) -> None:
        self.queues_of = dict(queues)
        self.ends = dict(ends)
        self.slave_ends: dict[MessageQueue, int] | None = None
        self.committed: dict[MessageQueue, int] = {}
        self.outages = OutageLog(logging.getLogger("test"))

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        brokers = sorted(self.queues_of)
        return TopicRoute(topic, tuple(BrokerData(b, {0: f"127.0.0.1:{10 + i}"}) for i, b in enumerate(brokers)),
                          tuple(QueueData(b, self.queues_of[b], self.queues_of[b], PERM_RW) for b in brokers))

    def queues(self, topic: str, refresh: bool = False) -> list[MessageQueue]:
        return self.route(topic).read_queues()

    def live_brokers(self) -> set[str]:
        return set(self.queues_of)

    def is_compacted(self, topic: str) -> bool:
        return False

    def hold_async(self, mq, offset, *, group, hold_ms):
        raise UnsupportedError("no holds here")

    def serves_reads(self, mq, offset, group) -> bool:
        return True

    def max_offsets(self, mqs, partial=False) -> Answers:
        mqs = list(mqs)
        if self.slave_ends is None:
            return Answers({m: self.ends.get(m, 0) for m in mqs})
        return Answers({m: self.slave_ends[m] for m in mqs if m in self.slave_ends},
                       {m: BrokerUnavailableError("no answer") for m in mqs if m not in self.slave_ends},
                       replica=[m for m in mqs if m in self.slave_ends])

    def min_offsets(self, mqs, partial=False) -> Answers:
        return Answers({m: 0 for m in mqs})

    def query_consumer_offsets(self, group, mqs, partial=False) -> Answers:
        return Answers({m: self.committed.get(m) for m in mqs})


def test_a_route_read_in_the_background_is_not_applied_over_a_newer_one():
    cluster = _Cluster({A: 2}, {mq(i): 5 for i in range(4)})
    watch = QueueWatch(cluster, parse_options({"nameServer": "127.0.0.1:9876", "topic": TOPIC}))
    watch.poll()
    older = Future()  # a background read that saw the topic with 2 queues and came back late
    older.set_result(watch._read_routes())
    watch._reading = older
    cluster.queues_of[A] = 4
    watch.poll(force=True)  # the newer route: 4 queues
    assert watch.queue_set == {mq(i) for i in range(4)}
    assert watch.classify({mq(3): 5}) == (set(), set())