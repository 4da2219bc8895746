"""Shared fixtures: one real embedded RocketMQ (2 brokers) for the whole session, a fresh topic per test."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_spark_testing.embedded import EmbeddedRocketMQ
from tests.support.sessions import local_session
from tests.support.timer_slack import coarsen

# Spark starts its Python workers with PYSPARK_PYTHON (default: python3 on PATH); use this interpreter, which has
# rmq_spark and its dependencies.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # keep Spark on loopback
coarsen()  # before any process or thread starts: all of them inherit it


@contextlib.contextmanager
def running(*args: Any, **kwargs: Any) -> Iterator[EmbeddedRocketMQ]:
    """``EmbeddedRocketMQ(*args, **kwargs)`` started for a fixture; at its end the cluster shuts down while the
    tests go on (its brokers take seconds to stop, and nothing uses them any more)."""
    mq = EmbeddedRocketMQ(*args, **kwargs).start()
    try:
        yield mq
    finally:
        mq.close(wait=False)


@pytest.fixture(scope="session")
def rocketmq():
    """A running name server with brokers broker-a and broker-b on 127.0.0.1."""
    with running(brokers=2) as mq:
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


@pytest.fixture(scope="session")
def spark():
    """A local SparkSession. It does not call rmq_spark.register(): format("rocketmq") must be found by Spark's
    own discovery of the installed pyspark_rocketmq module."""
    session = local_session("rmq-spark-tests", **{"spark.driver.memory": "1g"})
    yield session
    session.stop()


TRANSPORTS = ("remoting", "grpc")


def transport_options(rocketmq, transport: str) -> dict[str, str]:
    """The source options that point at the embedded cluster through ``transport``: its name server (remoting)
    or the pull gateway that jvm-shim runs beside it (gRPC)."""
    return {"nameServer": rocketmq.name_server} if transport == "remoting" else {"endpoint": rocketmq.gateway}


def new_client(rocketmq, transport: str, **kw):
    """A client of the embedded cluster over ``transport``."""
    from rmq_spark.client.grpc.client import GrpcClient
    from rmq_spark.client.remoting.client import RemotingClient

    if transport == "remoting":
        return RemotingClient(rocketmq.name_server, **kw)
    return GrpcClient(rocketmq.gateway, **kw)


def record_error(errors: list, fn, *args):
    """A thread target that calls ``fn(*args)`` and records what it raised (an assertion in a thread is lost)."""

    def run() -> None:
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - recorded for the test's own assertion
            errors.append(e)

    return run
