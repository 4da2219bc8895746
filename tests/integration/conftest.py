from typing import Iterator

import pytest

from rmq_spark.embedded import EmbeddedRocketMQ


def pytest_collection_modifyitems(items):
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def replicated_pair() -> Iterator[EmbeddedRocketMQ]:
    """broker-a and broker-b, each with a slave that refuses pulls (slaveReadEnable=false, RocketMQ's default
    deployment): for the tests that stop masters (read fail-over, sink recovery)."""
    with EmbeddedRocketMQ(brokers=2, slaves=1, slave_read=False) as mq:
        yield mq
