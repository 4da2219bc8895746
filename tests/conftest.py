"""Shared fixtures: one real embedded RocketMQ (2 brokers) for the whole session, a fresh topic per test."""
from __future__ import annotations

import re
import uuid

import pytest

from rmq_spark.embedded import EmbeddedRocketMQ


@pytest.fixture(scope="session")
def rocketmq():
    """A running name server with brokers broker-a and broker-b on 127.0.0.1."""
    with EmbeddedRocketMQ(brokers=2) as mq:
        yield mq


def unique_topic(request: pytest.FixtureRequest) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[:80]
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def topic(rocketmq, request) -> str:
    """A new topic with 4 queues on each broker."""
    name = unique_topic(request)
    rocketmq.create_topic(name, queues=4)
    return name
