"""The stock-process harness itself: RocketMQ's own startup classes, mqadmin, a SIGKILL and a restart on the same
store, RocketMQ's Java consumer."""

from __future__ import annotations

from collections import Counter

from rmq_spark.client.remoting.client import RemotingClient
from tests.stock.loads import send_numbered
from tests.support.stock_cluster import CLUSTER


def _brokers_in_route(name_server: str, topic: str) -> set[str]:
    with RemotingClient(name_server) as client:
        return {q.broker_name for q in client.route(topic, refresh=True).queues}


def test_a_killed_broker_leaves_the_route_and_comes_back_with_what_it_stored(stock_cluster):
    stock_cluster.mqadmin("updateTopic", "-c", CLUSTER, "-t", "Harness", "-r", "2", "-w", "2")
    stock_cluster.wait_topic("Harness", queues=2)
    sent = send_numbered(stock_cluster.name_server, "Harness", per_queue=10)

    stock_cluster.kill("broker-a")
    assert _brokers_in_route(stock_cluster.name_server, "Harness") == {"broker-b"}
    assert {m["brokerName"] for m in stock_cluster.consume("Harness")} == {"broker-b"}

    stock_cluster.restart("broker-a")  # recovers its commit log after the crash
    assert _brokers_in_route(stock_cluster.name_server, "Harness") == {"broker-a", "broker-b"}
    numbers = Counter(m["properties"]["n"] for m in stock_cluster.consume("Harness"))
    assert sent == 40
    assert numbers == Counter(str(n) for n in range(sent))
