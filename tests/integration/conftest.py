from collections.abc import Iterator

import pytest

from rmq_spark_testing.embedded import EmbeddedRocketMQ
from tests.conftest import running

_PAIR_USERS: list[str] = []  # node ids of the tests that use replicated_pair, in run order
_PAIRS: list[EmbeddedRocketMQ] = []


def pytest_collection_modifyitems(items):
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
    # The tests of the replicated cluster run one after the other, and it stops after the last of them: its four
    # brokers left running under the rest of the suite slowed the kill test's drivers past Spark's 10 s for a Python
    # worker to connect back.
    users = [item for item in items if "replicated_pair" in getattr(item, "fixturenames", ())]
    if users:
        first = items.index(users[0])
        rest = [item for item in items if item not in users]
        items[:] = rest[:first] + users + rest[first:]
        _PAIR_USERS[:] = [item.nodeid for item in users]


def pytest_runtest_teardown(item, nextitem):
    if _PAIR_USERS and item.nodeid == _PAIR_USERS[-1]:
        for mq in _PAIRS:
            mq.close(wait=False)  # it stops while the next tests run


@pytest.fixture(scope="session")
def replicated_pair() -> Iterator[EmbeddedRocketMQ]:
    """broker-a and broker-b, each with a slave that refuses pulls (slaveReadEnable=false, RocketMQ's default
    deployment): for the tests that stop masters (read fail-over, sink recovery). Stopped after its last test."""
    with running(brokers=2, slaves=1, slave_read=False) as mq:
        _PAIRS.append(mq)
        yield mq
