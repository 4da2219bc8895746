"""Smoke tests of the connector on stock RocketMQ (a name server and two broker groups, each its own JVM): a batch read,
a stream with its offsets mirrored to a consumer group, a stream whose driver is SIGKILLed, a timestamp start and an
exactly-once streaming write read back by RocketMQ's Java consumer, and the recovery of one cut by a driver crash; on
4.x also the refusal of timer rows and ACL 1.0 (a second cluster). One cluster per version for the module, a topic per
test; the versions are RMQ_SPARK_STOCK_SMOKE (comma separated, default 4.9.7: the 4.x paths of the client), e.g.
4.9.7,5.5.0."""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from rmq_spark.client.model import Credentials, OutgoingMessage
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.sink.writers import RocketMQStreamWriter
from tests.integration import kill_job
from tests.integration.streaming import Collect, assert_exactly_once, remove_torn_first_write, start_query, wait_for
from tests.integration.test_kills import KillJob
from tests.integration.test_sink_recovery import BODIES, _crash_inside_commit, _replay, _settled, _tasks, _visible
from tests.integration.test_sink_recovery import _options as _sink_options
from tests.stock.loads import send_numbered
from tests.support.checkpoints import logged
from tests.support.spark_deaths import SPARE_DRIVERS, SparkDeath, run_to_end
from tests.support.stock_cluster import StockCluster
from tests.support.waiting import wait_until

VERSIONS = [v.strip() for v in os.environ.get("RMQ_SPARK_STOCK_SMOKE", "4.9.7").split(",") if v.strip()]
PER_QUEUE = 5


@pytest.fixture(scope="module", params=VERSIONS)
def stock(request, tmp_path_factory) -> Iterator[StockCluster]:
    """A stock cluster of one version, shared by the module's tests."""
    with StockCluster(tmp_path_factory.mktemp(f"rocketmq-{request.param}"), version=request.param) as cluster:
        yield cluster


@pytest.fixture
def smoke_topic(stock, request) -> str:
    """A new topic with 2 queues on each broker group."""
    name = request.node.originalname.replace("test_", "")[:60]
    stock.create_topic(name, queues=2)
    return name


def _read(spark, stock: StockCluster, topic: str, **options: str):
    reader = spark.read.format("rocketmq").option("nameServer", stock.name_server).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_a_batch_read_returns_what_the_java_consumer_reads(spark, stock, smoke_topic):
    sent = send_numbered(stock.name_server, smoke_topic, PER_QUEUE)
    rows = _read(spark, stock, smoke_topic, includeProperties="true")
    rows = rows.select("brokerName", "queueId", "queueOffset", "properties").collect()
    java = sorted((m["brokerName"], m["queueId"], m["queueOffset"]) for m in stock.consume(smoke_topic))
    assert len(rows) == sent == 20
    assert sorted((r[0], r[1], r[2]) for r in rows) == java
    assert Counter(r[3]["n"] for r in rows) == Counter(str(n) for n in range(sent))


def test_tag_filters_read_the_tagged_messages_and_sql92_needs_the_brokers_property_filter(spark, stock, smoke_topic):
    with RemotingClient(stock.name_server) as client:
        for mq in client.queues(smoke_topic, refresh=True):
            client.send(mq, [OutgoingMessage(body=f"{tag}{i}".encode(), tags=tag) for i in range(2) for tag in "AB"])
    tagged = _read(spark, stock, smoke_topic, subExpression="B || C").select("body", "tags").collect()
    assert sorted(r[1] for r in tagged) == ["B"] * 8 and all(r[0].startswith(b"B") for r in tagged)
    with pytest.raises(Exception, match="enablePropertyFilter=true"):  # off by default on 4.x and 5.x alike
        _read(spark, stock, smoke_topic, subExpression="a = 1", expressionType="SQL92").count()


def test_starting_timestamp_reads_only_what_was_stored_at_or_after_it(spark, stock, smoke_topic):
    """4.x's SEARCH_OFFSET_BY_TIMESTAMP answers the offset whose store time is nearest, on either side."""
    send_numbered(stock.name_server, smoke_topic, PER_QUEUE)
    time.sleep(0.3)
    since = int(time.time() * 1000)
    time.sleep(0.3)
    with RemotingClient(stock.name_server) as client:
        ends = client.max_offsets(client.queues(smoke_topic, refresh=True))
    send_numbered(stock.name_server, smoke_topic, PER_QUEUE)
    rows = (
        _read(spark, stock, smoke_topic, startingTimestamp=str(since))
        .select("brokerName", "queueId", "queueOffset", "storeTimestamp")
        .collect()
    )
    assert sorted((r[0], r[1], r[2]) for r in rows) == sorted(
        (mq.broker_name, mq.queue_id, ends[mq] + i) for mq in ends for i in range(PER_QUEUE)
    )
    # a timestamp past every message starts at the end (strategy latest), not at the last message
    later = _read(
        spark,
        stock,
        smoke_topic,
        startingTimestamp=str(int(time.time() * 1000) + 60_000),
        startingOffsetsByTimestampStrategy="latest",
    ).count()
    assert later == 0


def test_a_group_without_offsets_starts_committed_reads_at_the_fallback(spark, stock, smoke_topic):
    """A 4.x broker answers offset 0, not "not found", for a group it has no offset of."""
    send_numbered(stock.name_server, smoke_topic, PER_QUEUE)
    rows = _read(
        spark,
        stock,
        smoke_topic,
        startingOffsets="committed",
        consumerGroup=f"new-{smoke_topic}",
        startingOffsetsFallback="latest",
    )
    assert rows.count() == 0


def test_a_stream_delivers_each_message_once_and_mirrors_its_offsets(spark, stock, smoke_topic, tmp_path):
    group = f"g-{smoke_topic}"
    sink = Collect()
    query = start_query(spark, stock, "remoting", smoke_topic, sink, tmp_path / "checkpoint", consumerGroup=group)
    with RemotingClient(stock.name_server) as client:
        try:
            sent = send_numbered(stock.name_server, smoke_topic, PER_QUEUE)
            wait_for(lambda: len(sink) >= sent, 60, f"{sent} messages", query)
            sent += send_numbered(stock.name_server, smoke_topic, PER_QUEUE)
            wait_for(lambda: len(sink) >= sent, 60, f"{sent} messages", query)
            # the offsets of committed batches reach the group on the brokers (the last batch's only at the next
            # one's planning: one more message makes one more batch)
            ends = client.max_offsets(client.queues(smoke_topic))
            sent += send_numbered(stock.name_server, smoke_topic, 1)
            wait_for(
                lambda: all((client.query_consumer_offset(group, mq) or 0) >= end for mq, end in ends.items()),
                60,
                f"group {group}'s offsets to reach {ends}",
                query,
            )
            wait_for(lambda: len(sink) >= sent, 60, f"{sent} messages", query)
        finally:
            query.stop()
    assert_exactly_once(sink, stock, smoke_topic)


def test_a_stream_killed_with_sigkill_restarts_and_delivers_each_message_once(spark, stock, smoke_topic, tmp_path):
    """The query's driver process group (its Spark JVM and Python workers) SIGKILLed after a committed batch, then
    run to the end from its checkpoint: the Parquet copy holds every message the Java consumer reads, once."""
    sent = send_numbered(stock.name_server, smoke_topic, 150)  # 600: two batches of the job's 400
    out, checkpoint, group = tmp_path / "out", tmp_path / "checkpoint", f"g-{smoke_topic}"
    for spare in range(SPARE_DRIVERS, -1, -1):  # a driver ended by Spark's own failure is replaced
        job = KillJob(stock, tmp_path / f"job-{spare}.log", smoke_topic, group, out, checkpoint)
        try:
            wait_until(lambda: len(logged(checkpoint, "commits")) >= 1, 180, "a committed batch", job.alive)
            break
        except SparkDeath:
            if not spare:
                raise
        finally:
            job.kill()
            remove_torn_first_write(checkpoint)
    sent += send_numbered(stock.name_server, smoke_topic, PER_QUEUE)
    run_to_end(
        kill_job.copy_writer(
            spark, "-", smoke_topic, group, str(out), str(checkpoint), limit=10_000, name_server=stock.name_server
        )
    )
    keys = [(r["brokerName"], r["queueId"], r["queueOffset"]) for r in spark.read.parquet(str(out)).collect()]
    assert len(keys) == len(set(keys)) == sent, "a message was delivered twice or not at all"
    assert set(keys) == {(m["brokerName"], m["queueId"], m["queueOffset"]) for m in stock.consume(smoke_topic)}


def test_an_exactly_once_streaming_write_is_read_back_by_the_java_consumer(spark, stock, smoke_topic, tmp_path):
    source = smoke_topic + "_src"
    stock.create_topic(source, queues=2)
    sent = send_numbered(stock.name_server, source, PER_QUEUE)
    rows = (
        spark.readStream.format("rocketmq")
        .option("nameServer", stock.name_server)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "8")
        .option("includeProperties", "true")
        .load()
        .selectExpr("body", "properties['n'] AS tags")
    )
    query = (
        rows.writeStream.format("rocketmq")
        .option("nameServer", stock.name_server)
        .option("topic", smoke_topic)
        .option("deliveryGuarantee", "exactly_once")
        .option("producerGroup", f"pg-{smoke_topic}")
        .option("brokerRetryTimeoutMs", "10000")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120) and query.exception() is None, query.exception()
    written = stock.consume(smoke_topic)
    assert Counter(m["properties"]["TAGS"] for m in written) == Counter(str(n) for n in range(sent))


def test_timer_rows_are_refused_at_planning_where_the_brokers_have_no_timers(spark, stock, smoke_topic):
    if not stock.version.startswith("4."):
        pytest.skip("RocketMQ 5 brokers have timer messages")
    rows = spark.createDataFrame([("later", int(time.time() * 1000) + 3_600_000)], "body STRING, deliverTimeMs BIGINT")
    with pytest.raises(Exception, match=rf"RocketMQ {re.escape(stock.version)} .*no timer messages.*deliverTimeMs"):
        (
            rows.write.format("rocketmq")
            .option("nameServer", stock.name_server)
            .option("topic", smoke_topic)
            .mode("append")
            .save()
        )
    assert stock.consume(smoke_topic) == []  # a 4.x broker would have delivered it at once


def test_an_exactly_once_commit_cut_by_a_driver_crash_is_completed_once_on_replay(stock, smoke_topic):
    """The recovery of the commit records: the started record read back, the rows committed before the cut found in
    the queues, only the others committed."""
    options = _sink_options(stock, smoke_topic)
    RocketMQStreamWriter(options).commit(_tasks(options, 0, ["r0", "r1", "r2"]), 0)
    _crash_inside_commit(options, 1, commits=3)
    _settled(stock, smoke_topic)
    assert sum(_visible(stock, smoke_topic).values()) == 3 + 3  # batch 0, and the 3 COMMITs before the cut
    _replay(options, 1)
    assert _visible(stock, smoke_topic) == Counter(["r0", "r1", "r2", *BODIES])


# ACL 1.0 of RocketMQ 4.x: an admin, and a reader with the subscribe right on topic Secured only (what RocketMQ's
# consumers need: ACL 1.0 checks no right of the offset requests)
PLAIN_ACL = """globalWhiteRemoteAddresses:
accounts:
  - accessKey: rmqadmin
    secretKey: admin-secret
    admin: true
  - accessKey: rmqreader
    secretKey: reader-secret
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - Secured=SUB
"""


@pytest.fixture(scope="module")
def acl_cluster(stock, tmp_path_factory) -> Iterator[StockCluster]:
    """A cluster of the module's 4.x release with ACL 1.0 on (aclEnable, conf/plain_acl.yml)."""
    if not stock.version.startswith("4."):
        pytest.skip("ACL 1.0 (plain_acl.yml) is checked on 4.x; RocketMQ 5.3+ has ACL 2.0")
    root = tmp_path_factory.mktemp(f"rocketmq-acl-{stock.version}")
    (root / "rocketmq-home" / "conf").mkdir(parents=True)
    (root / "rocketmq-home" / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    with StockCluster(root, version=stock.version, broker_config={"aclEnable": "true"}) as cluster:
        yield cluster


def test_acl_1_signatures_are_accepted_and_a_refusal_names_the_keys(spark, acl_cluster):
    with RemotingClient(acl_cluster.name_server, credentials=Credentials("rmqadmin", "admin-secret")) as admin:
        admin.create_topic("Secured", 2, seed_topic="DefaultCluster")
        for mq in admin.queues("Secured", refresh=True):
            admin.send(mq, [OutgoingMessage(body=f"{mq.broker_name}/{mq.queue_id}/{i}".encode()) for i in range(3)])
    signed = _read(spark, acl_cluster, "Secured", accessKey="rmqreader", secretKey="reader-secret")
    assert sorted(r[0] for r in signed.select("body").collect()) == sorted(
        f"{b}/{q}/{i}".encode() for b in ("broker-a", "broker-b") for q in range(2) for i in range(3)
    )
    with pytest.raises(Exception, match="No accessKey is configured") as unsigned:
        _read(spark, acl_cluster, "Secured").count()
    assert "check accessKey/secretKey and the user's permissions" in str(unsigned.value)
