"""An embedded cluster holding one small topic, for the module fixtures of tests that need only a few messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rmq_spark_testing.embedded import EmbeddedRocketMQ
from tests.conftest import running


def seeded_cluster(topic: str, *, queues: int, count: int, prefix: str, **cluster: Any) -> Iterator[EmbeddedRocketMQ]:
    """Yield a one-broker cluster (``cluster`` passed to EmbeddedRocketMQ) whose ``topic`` has ``queues`` queues
    and ``count`` messages ``{prefix}0``, ``{prefix}1``, ... on broker-a queue 0; closed after the yield."""
    with running(1, **cluster) as mq:
        mq.create_topic(topic, queues=queues)
        mq.produce(topic, [{"body": f"{prefix}{i}", "broker": "broker-a", "queueId": 0} for i in range(count)])
        yield mq
