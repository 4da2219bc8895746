"""The connector behind RocketMQ 5's proxy, started as operators start it (ProxyStartup in cluster mode, a plain
rmq-proxy.json, its own JVM) in front of a stock cluster, with option nameServer set to the proxy's remoting port: a
batch read and a timestamp start, a stream across a restart with its offsets mirrored to the group (read back by
mqadmin), an at-least-once write read back by RocketMQ's Java consumer, and exactly-once refused naming the proxy.
One cluster per version for the module; the versions are RMQ_SPARK_STOCK_PROXY (comma separated, default 5.5.0),
e.g. 5.3.3,5.5.0."""

from __future__ import annotations

import base64
import os
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.model import OutgoingMessage
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.client.remoting.native_holds import NativeHolds
from rmq_spark.compiled import PullStatus
from tests.integration.streaming import Collect, assert_exactly_once, start_query, wait_for
from tests.stock.loads import send_numbered
from tests.support.stock_cluster import CLUSTER, StockCluster
from tests.support.waiting import wait_until

VERSIONS = [v.strip() for v in os.environ.get("RMQ_SPARK_STOCK_PROXY", "5.5.0").split(",") if v.strip()]
PER_QUEUE = 5


@pytest.fixture(scope="module", params=VERSIONS)
def stock(request, tmp_path_factory) -> Iterator[StockCluster]:
    """A stock cluster of one version with its proxy, shared by the module's tests."""
    root = tmp_path_factory.mktemp(f"rocketmq-{request.param}-proxy")
    with StockCluster(root, version=request.param, proxy=True) as cluster:
        yield cluster


@pytest.fixture
def proxy_topic(stock, request) -> str:
    """A new topic with 2 queues on each broker group (created on the brokers: the proxy creates no topic)."""
    name = "proxy_" + request.node.originalname.replace("test_", "")[:50]
    stock.create_topic(name, queues=2)
    return name


def _read(spark, stock: StockCluster, topic: str, **options: str):
    reader = spark.read.format("rocketmq").option("nameServer", stock.proxy_address).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _committed(stock: StockCluster, group: str, topic: str) -> dict[tuple[str, int], int]:
    """The group's offsets on ``topic`` as RocketMQ's own tool reports them (mqadmin consumerProgress, asked of the
    brokers through the name server, not the proxy)."""
    offsets, output = {}, stock.mqadmin("consumerProgress", "-g", group, "-t", topic)
    for line in output.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0] == topic and fields[2].isdigit():
            offsets[(fields[1], int(fields[2]))] = int(fields[4])
    assert offsets, f"mqadmin consumerProgress showed no offset of group {group} on {topic}:\n{output}"
    return offsets


class _ByBatch(Collect):
    """A foreachBatch sink keyed by batch id, as the README asks of a sink: a batch that ran before a stop but was not
    committed runs again after the restart, and must read exactly what it read the first time."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: dict[int, list[tuple[str, int, int]]] = {}

    def __call__(self, df, batch_id: int) -> None:
        rows = [(r[0], r[1], r[2]) for r in df.select("brokerName", "queueId", "queueOffset").collect()]
        with self._lock:
            first = self.batches.setdefault(batch_id, rows)
            assert first == rows, f"batch {batch_id} read {rows} when replayed, {first} before"
            self.keys = [key for b in sorted(self.batches) for key in self.batches[b]]


def test_a_batch_read_through_the_proxy_returns_what_the_java_consumer_reads(spark, stock, proxy_topic):
    sent = send_numbered(stock.proxy_address, proxy_topic, PER_QUEUE)  # the client's sends through the proxy
    rows = _read(spark, stock, proxy_topic, includeProperties="true")
    rows = rows.select("brokerName", "queueId", "queueOffset", "properties").collect()
    java = sorted((m["brokerName"], m["queueId"], m["queueOffset"]) for m in stock.consume(proxy_topic))
    assert len(rows) == sent == 4 * PER_QUEUE
    assert sorted((r[0], r[1], r[2]) for r in rows) == java
    assert Counter(r[3]["n"] for r in rows) == Counter(str(n) for n in range(sent))
    # a timestamp start: SEARCH_OFFSET_BY_TIMESTAMP through the proxy
    time.sleep(0.3)
    since = int(time.time() * 1000)
    time.sleep(0.3)
    later = send_numbered(stock.proxy_address, proxy_topic, 1)
    assert _read(spark, stock, proxy_topic, startingTimestamp=str(since)).count() == later


def test_a_stream_through_the_proxy_delivers_each_message_once_across_a_restart_and_mirrors_its_offsets(
    spark, stock, proxy_topic, tmp_path
):
    group = f"g-{proxy_topic}"
    sink = _ByBatch()
    options = {"nameServer": stock.proxy_address, "consumerGroup": group}
    sent = send_numbered(stock.proxy_address, proxy_topic, PER_QUEUE)
    query = start_query(spark, stock, "remoting", proxy_topic, sink, tmp_path / "checkpoint", **options)
    try:
        wait_for(lambda: len(sink) >= sent, 120, f"{sent} messages", query)
    finally:
        query.stop()
    sent += send_numbered(stock.proxy_address, proxy_topic, PER_QUEUE)
    query = start_query(spark, stock, "remoting", proxy_topic, sink, tmp_path / "checkpoint", **options)
    with RemotingClient(stock.proxy_address) as client:
        try:
            wait_for(lambda: len(sink) >= sent, 120, f"{sent} messages after the restart", query)  # held pulls
            ends = client.max_offsets(client.queues(proxy_topic))
            sent += send_numbered(stock.proxy_address, proxy_topic, 1)  # one more batch mirrors the last one's ends
            wait_for(
                lambda: all((client.query_consumer_offset(group, mq) or 0) >= end for mq, end in ends.items()),
                60,
                f"group {group}'s offsets to reach {ends}",
                query,
            )
            wait_for(lambda: len(sink) >= sent, 120, f"{sent} messages", query)
        finally:
            query.stop()
    assert_exactly_once(sink, stock, proxy_topic)
    committed = _committed(stock, group, proxy_topic)
    assert all(committed[(mq.broker_name, mq.queue_id)] >= end for mq, end in ends.items()), committed


def test_held_pulls_ring_through_the_proxy_and_are_held_again_by_the_compiled_core(stock, proxy_topic):
    """The stream driver learns of new messages from pulls held at each queue's end: through the proxy the hold
    must be held by the broker behind it and answered when a message comes, not refused or answered at once (a
    watch whose holds fail asks offsets on a clock instead, so the stream test above would pass without them)."""
    with RemotingClient(stock.proxy_address) as client:
        holds = client.holds(f"g-{proxy_topic}", 20_000)
        try:
            assert isinstance(holds, NativeHolds)
            mq = client.queues(proxy_topic)[1]
            began = time.monotonic()
            quiet = client.hold_async(mq, 0, group=f"g-{proxy_topic}", hold_ms=1_500).result()
            waited = time.monotonic() - began
            assert quiet.status is PullStatus.NO_NEW_MSG and waited >= 1.0, (quiet, waited)  # held, not answered
            holds.hold(mq, 0)
            seen: list[tuple[int, int | None, object]] = []

            def ended(count: int) -> bool:
                seen.extend((e.offset, e.next_offset, e.outcome) for e in holds.ended())
                return len(seen) >= count

            time.sleep(1.0)  # longer than an answer that came at once takes
            assert not ended(1), f"a hold through the proxy ended with nothing sent: {seen}"
            for n in (1, 2):
                client.send(mq, [OutgoingMessage(body=f"m{n}".encode())])
                wait_until(lambda n=n: ended(n), 15, f"the end of hold {n} through the proxy")
                time.sleep(0.3)  # the next hold is on the broker
            assert [(offset, next_offset) for offset, next_offset, _ in seen] == [(0, 1), (1, 2)], seen
        finally:
            holds.close()


def test_an_at_least_once_write_through_the_proxy_is_read_back_by_the_java_consumer(spark, stock, proxy_topic):
    rows = spark.createDataFrame([(f"row {i}", f"k{i % 3}") for i in range(24)], "body STRING, keys STRING")
    (
        rows.write.format("rocketmq")
        .option("nameServer", stock.proxy_address)
        .option("topic", proxy_topic)
        .mode("append")
        .save()
    )
    written = stock.consume(proxy_topic)
    assert Counter(m["bodyBase64"] for m in written) == Counter(
        base64.b64encode(f"row {i}".encode()).decode() for i in range(24)
    )


def test_exactly_once_through_the_proxy_is_refused_naming_the_proxy_and_the_fix(spark, stock):
    """The proxy takes half messages for a TRANSACTION topic and answers SUCCESS to END_TRANSACTION, yet commits
    none of them: without the refusal the write would end "successfully" with nothing visible."""
    topic = "proxy_transactions"
    stock.mqadmin("updateTopic", "-c", CLUSTER, "-t", topic, "-r", "2", "-w", "2", "-a", "+message.type=TRANSACTION")
    stock.wait_topic(topic, 2)
    rows = spark.createDataFrame([("once",)], "body STRING")
    with pytest.raises(Exception, match=rf"{stock.proxy_address}.*RocketMQ 5 proxy.*at_least_once"):
        (
            rows.write.format("rocketmq")
            .option("nameServer", stock.proxy_address)
            .option("topic", topic)
            .option("deliveryGuarantee", "exactly_once")
            .option("producerGroup", "pg-proxy")
            .mode("append")
            .save()
        )
    assert stock.consume(topic) == []


def test_a_refusal_at_the_address_the_proxy_advertises_names_the_name_server_given(stock, proxy_topic):
    """The user types the proxy's name (here localhost); its routes name the address it advertises (here
    127.0.0.1): a request the proxy refuses (it serves no GET_TOPIC_CONFIG) names both."""
    given = stock.proxy_address.replace("127.0.0.1", "localhost")
    with RemotingClient(given) as client, pytest.raises(RocketMQError) as refused:
        client.topic_attributes(proxy_topic)
    assert f"failed at {stock.proxy_address}" in str(refused.value)
    assert f"name server {given} (option nameServer)" in str(refused.value)
