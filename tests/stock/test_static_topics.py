"""A static topic made and remapped by RocketMQ's own mqadmin (updateStaticTopic, remappingStaticTopic) on stock
5.x processes: the client and the planner read every message by logic queue and logic offset, as RocketMQ's Java
consumer sees them, across the remapping (its gap of logic offsets planned around, not lost)."""

from __future__ import annotations

import base64
import uuid

import pytest

from rmq_spark.client import RemotingClient
from rmq_spark.client.model import OutgoingMessage
from rmq_spark.source.planning import plan_ranges
from tests.support.stock_cluster import CLUSTER
from tests.support.waiting import wait_until


def _read_all(client, topic: str) -> list[tuple[str, int, int, bytes]]:
    queues = client.queues(topic, refresh=True)
    firsts, ends = client.min_offsets(queues), client.max_offsets(queues)
    ranges = plan_ranges(firsts, ends, firsts, fail_on_data_loss=True, gaps=client.remapping_gaps(queues))
    return sorted(
        (m.broker_name, m.queue_id, m.queue_offset, m.body)
        for r in ranges
        for m in client.read_range(r.queue, r.start, r.end)
    )


def _forwards(client, topic: str) -> bool:
    queues = client.queues(topic, refresh=True)
    return not client.min_offsets(queues, partial=True).failed


def _send(client, topic: str, prefix: str) -> None:
    for i, mq in enumerate(client.route(topic, refresh=True).write_queues() * 2):
        client.send(mq, OutgoingMessage(f"{prefix}{i}".encode()))


def test_a_static_topic_is_read_by_logic_queue_across_a_remapping(stock_cluster, stock_version):
    if stock_version.startswith("4."):
        pytest.skip("static topics came with RocketMQ 5")
    topic = f"Static-{uuid.uuid4().hex[:8]}"
    stock_cluster.mqadmin("updateStaticTopic", "-t", topic, "-qn", "4", "-c", CLUSTER)
    with RemotingClient(stock_cluster.name_server) as client:
        wait_until(lambda: client.route(topic, refresh=True).logic_queues, 30, "the static topic's route")
        _send(client, topic, "s")
        stock_cluster.mqadmin("remappingStaticTopic", "-t", topic, "-b", "broker-b")
        wait_until(
            lambda: set(client.route(topic, refresh=True).logic_leaders.values()) == {"broker-b"},
            30,
            "the route after the remapping",
        )
        _send(client, topic, "t")
        # a 5.x broker learns the others' addresses every few seconds: until then a leader cannot forward to the
        # group that holds a queue's older items, and answers "cannot find addr" (a retryable outage)
        wait_until(lambda: _forwards(client, topic), 30, "the leaders to reach the older items' broker groups")
        got = _read_all(client, topic)
    java = sorted(
        (m["brokerName"], m["queueId"], m["queueOffset"], base64.b64decode(m["bodyBase64"]))
        for m in stock_cluster.consume(topic)
    )
    assert len(got) == 16 and got == java
    assert max(offset for _, _, offset, _ in got) >= 10000  # a moved queue goes on at the next block
