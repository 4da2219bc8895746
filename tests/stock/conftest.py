"""The stock-process tier: Apache RocketMQ as operators run it, a name server and each broker group in a JVM of its
own (tests/support/stock_cluster.py), a fresh cluster per test (test_smoke.py: one per version for the module).
RMQ_SPARK_STOCK_VERSION picks the released version (default 5.5.0), e.g. 4.9.7 or 5.3.3; its jars are resolved from
Maven Central on first use."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.stock_cluster import StockCluster


def pytest_collection_modifyitems(items):
    for item in items:
        if "/stock/" in str(item.fspath):
            item.add_marker(pytest.mark.stock)


@pytest.fixture(scope="session")
def stock_version() -> str:
    """The RocketMQ release the stock clusters run."""
    return os.environ.get("RMQ_SPARK_STOCK_VERSION", "5.5.0")


@pytest.fixture
def start_stock_cluster(tmp_path: Path, stock_version: str) -> Iterator[Callable[..., StockCluster]]:
    """Starts a StockCluster of ``stock_version`` under the test's tmp_path with the given StockCluster arguments
    (brokers, broker_config, ...); every cluster it started is killed at teardown, however the test ended."""
    started: list[StockCluster] = []

    def start(**kwargs) -> StockCluster:
        cluster = StockCluster(tmp_path / f"rocketmq-{len(started)}", version=stock_version, **kwargs)
        started.append(cluster)
        return cluster.start()

    yield start
    for cluster in started:
        cluster.close()


@pytest.fixture
def stock_cluster(start_stock_cluster) -> StockCluster:
    """A running stock cluster: a name server, broker-a and broker-b (one master each)."""
    return start_stock_cluster()
