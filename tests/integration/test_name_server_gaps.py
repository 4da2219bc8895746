"""Several name servers that disagree: a name server restarted during a rolling restart has no routes until the
brokers register with it again (every 30 s), so it answers TOPIC_NOT_EXIST for a topic the others know. Such a name
server is a fresh NamesrvStartup of RocketMQ's own jars with no broker registered."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq_spark.client.errors import TopicNotFoundError
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark_testing.embedded import ensure_jar
from tests.support.ports import server_port
from tests.support.processes import kill_group
from tests.support.stock_cluster import NAMESRV_MAIN
from tests.support.stock_release import java


@pytest.fixture(scope="module")
def empty_name_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a running name server that no broker has registered with."""
    home: Path = tmp_path_factory.mktemp("empty-namesrv")
    port = server_port()
    conf = home / "namesrv.conf"
    conf.write_text(f"listenPort={port}\n")
    cmd = java(str(ensure_jar()), NAMESRV_MAIN, "-c", str(conf), heap="128m", home=home, rocketmq_home=home)
    with open(home / "console.log", "a") as console:
        proc = subprocess.Popen(cmd, cwd=home, stdout=console, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        with RemotingClient(address, request_timeout=2, connect_timeout=1) as probe:
            deadline = time.monotonic() + 60
            while True:
                try:
                    probe.live_brokers()
                    break
                except Exception:  # noqa: BLE001 - not up yet; the deadline below names the failure
                    assert proc.poll() is None, (home / "console.log").read_text()
                    assert time.monotonic() < deadline, f"name server {address} did not answer in 60 s"
                    time.sleep(0.2)
        yield address
    finally:
        kill_group(proc)


@pytest.mark.parametrize("together", [False, True], ids=["one topic", "all topics in one write"])
def test_a_route_is_asked_of_the_other_name_servers_when_one_does_not_know_the_topic(
    rocketmq, topic, empty_name_server, together
):
    """The empty name server is asked first; the stream driver's route poll asks all its topics in one write."""
    with RemotingClient(f"{empty_name_server};{rocketmq.name_server}", request_timeout=5) as client:
        route = client.refresh_routes([topic])[topic] if together else client.route(topic)
        assert not isinstance(route, Exception), route
        assert len(route.read_queues()) == 8


def test_a_topic_no_name_server_knows_is_not_found_naming_each_of_them(rocketmq, empty_name_server):
    with RemotingClient(f"{empty_name_server};{rocketmq.name_server}", request_timeout=5) as client:
        with pytest.raises(TopicNotFoundError, match="no-such-topic-xyz") as raised:
            client.route("no-such-topic-xyz")
        assert empty_name_server in str(raised.value) and rocketmq.name_server in str(raised.value)
        missing = client.refresh_routes(["no-such-topic-xyz"])["no-such-topic-xyz"]
        assert isinstance(missing, TopicNotFoundError) and rocketmq.name_server in str(missing)
