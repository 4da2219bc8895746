"""The permissions of the README's ACL 2.0 table, on stock RocketMQ 5.5.0 with ACL 2.0 on as operators turn it on
(broker.conf: authentication and authorization with the local metadata providers, an initial SUPER user; users and
policies made with ``mqadmin createUser`` / ``createAcl``, the tools signing with ``conf/tools.yml``). Each user holds
only what its row says; one cluster (one broker group) for the module."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rmq_spark.client.model import Credentials, OutgoingMessage
from rmq_spark.client.remoting.client import RemotingClient
from tests.integration.streaming import Collect, wait_for
from tests.support.stock_cluster import CLUSTER, StockCluster

VERSION = "5.5.0"
ADMIN = Credentials("rmqadmin", "admin-secret-0123")
SECRET = "user-secret-0123"
PER_QUEUE = 5
QUEUES = 2

# ACL 2.0 as operators turn it on in broker.conf (RocketMQ's AuthConfig): the initial user is made a SUPER user, and
# the broker's own clients sign with the inner credentials.
PROVIDERS = "org.apache.rocketmq.auth.{0}.provider.{1}"
ACL2_BROKER: dict[str, str] = {
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "authenticationProvider": PROVIDERS.format("authentication", "DefaultAuthenticationProvider"),
    "authenticationMetadataProvider": PROVIDERS.format("authentication", "LocalAuthenticationMetadataProvider"),
    "authorizationProvider": PROVIDERS.format("authorization", "DefaultAuthorizationProvider"),
    "authorizationMetadataProvider": PROVIDERS.format("authorization", "LocalAuthorizationMetadataProvider"),
    "initAuthenticationUser": json.dumps({"username": ADMIN.access_key, "password": ADMIN.secret_key}),
    "innerClientAuthenticationCredentials": json.dumps({"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key}),
}

PRODUCER_GROUP = "pg-eo"
# each user's Allow policies (resources, actions): what its row of the README's table says, no more
POLICIES: dict[str, list[tuple[str, str]]] = {
    "reader": [("Topic:Reads,Group:readers", "Sub")],
    "getter": [("Topic:Reads,Group:readers", "Sub,Get")],
    "writer": [("Topic:Writes", "Pub")],
    "eo": [
        ("Topic:EoWrites", "Pub,Sub"),
        (f"Group:rmq_spark_reader,Group:{PRODUCER_GROUP}_commit_home", "Sub"),
        (f"Topic:rmq_spark_commits_{PRODUCER_GROUP}", "Create,Pub,Sub"),
    ],
}


@pytest.fixture(scope="module")
def acl2(tmp_path_factory) -> Iterator[StockCluster]:
    """A 5.5.0 cluster with ACL 2.0 on and topics Reads (with messages), Writes and EoWrites; mqadmin signs as the
    SUPER user (conf/tools.yml)."""
    root = tmp_path_factory.mktemp("rocketmq-acl2")
    conf = root / "rocketmq-home" / "conf"
    conf.mkdir(parents=True)
    (conf / "tools.yml").write_text(f"accessKey: {ADMIN.access_key}\nsecretKey: {ADMIN.secret_key}\n")
    with StockCluster(root, version=VERSION, brokers=("broker-a",), broker_config=ACL2_BROKER) as cluster:
        with RemotingClient(cluster.name_server, credentials=ADMIN) as admin:
            for topic in ("Reads", "Writes", "EoWrites"):
                admin.create_topic(topic, QUEUES, seed_topic="broker-a")
                cluster.wait_topic(topic, QUEUES)
            for mq in admin.queues("Reads", refresh=True):
                admin.send(mq, [OutgoingMessage(body=f"{mq.queue_id}/{i}".encode()) for i in range(PER_QUEUE)])
        yield cluster


@pytest.fixture(scope="module")
def user(acl2) -> Callable[[str], str]:
    """Makes a user of POLICIES as operators do (mqadmin createUser, then createAcl per policy), once per module, in
    the first test that needs it (each mqadmin is a JVM's start: tens of seconds on a busy machine); its name."""
    made: set[str] = set()

    def make(name: str) -> str:
        if name not in made:
            _mqadmin(acl2, "createUser", "-c", CLUSTER, "-u", name, "-p", SECRET)
            for resources, actions in POLICIES[name]:
                _mqadmin(
                    acl2,
                    "createAcl",
                    "-c",
                    CLUSTER,
                    "-s",
                    f"User:{name}",
                    "-r",
                    resources,
                    "-a",
                    actions,
                    "-d",
                    "Allow",
                )
            made.add(name)
        return name

    return make


def _mqadmin(cluster: StockCluster, *args: str) -> None:
    """Run an mqadmin command, again when it timed out (its requests time out in 3 s, which a busy machine
    exceeds); a user made by an attempt that timed out late is there already."""
    for _ in range(3):
        out = cluster.mqadmin(*args)
        if "success" in out or "already exist" in out.lower():
            return
    raise AssertionError(f"mqadmin {' '.join(args)} failed:\n{out[-3000:]}")


def _options(cluster: StockCluster, user: str, **options: str) -> dict[str, str]:
    return {"nameServer": cluster.name_server, "accessKey": user, "secretKey": SECRET, **options}


def _read(spark, cluster: StockCluster, user: str, topic: str, **options: str):
    reader = spark.read.format("rocketmq")
    for k, v in _options(cluster, user, topic=topic, **options).items():
        reader = reader.option(k, v)
    return reader.load()


def test_sub_on_the_topic_and_the_group_reads_from_the_first_offset(spark, acl2, user):
    rows = _read(spark, acl2, user("reader"), "Reads", consumerGroup="readers").select("body").collect()
    assert sorted(r[0] for r in rows) == sorted(f"{q}/{i}".encode() for q in range(QUEUES) for i in range(PER_QUEUE))


def test_a_timestamp_start_needs_get_and_says_so(spark, acl2, user):
    since = str(int(time.time() * 1000) - 3_600_000)
    with pytest.raises(Exception, match=r"`Get` on `Topic:Reads`") as refused:
        _read(spark, acl2, user("reader"), "Reads", consumerGroup="readers", startingTimestamp=since).count()
    assert "mqadmin" in str(refused.value)
    assert _read(spark, acl2, user("getter"), "Reads", consumerGroup="readers", startingTimestamp=since).count() == 10


def test_sub_streams_from_committed_offsets_and_mirrors_them_to_the_group(spark, acl2, user, tmp_path: Path):
    """A stream of a Sub-only user: started at the group's committed offsets (earliest without them), its ends
    learnt without GET_MAX_OFFSET, its offsets stored on the brokers for the group."""
    sink = Collect()
    reader = spark.readStream.format("rocketmq")
    for k, v in _options(
        acl2, user("reader"), topic="Reads", consumerGroup="readers", startingOffsets="committed"
    ).items():
        reader = reader.option(k, v)
    query = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: len(sink) >= QUEUES * PER_QUEUE, 90, "the topic's messages", query)
        with RemotingClient(acl2.name_server, credentials=ADMIN) as admin:
            for mq in admin.queues("Reads", refresh=True):
                admin.send(mq, OutgoingMessage(body=b"one more"))
            wait_for(lambda: len(sink) >= QUEUES * (PER_QUEUE + 1), 60, "the messages sent since", query)
            queues = admin.queues("Reads")
            wait_for(
                lambda: all((admin.query_consumer_offset("readers", mq) or 0) >= PER_QUEUE for mq in queues),
                60,
                "the group's offsets on the brokers",
                query,
            )
    finally:
        query.stop()
    assert len(set(sink.keys)) == len(sink.keys) == QUEUES * (PER_QUEUE + 1)


def _bodies(cluster: StockCluster, topic: str) -> list[bytes]:
    """Every message body of ``topic``, read by the admin."""
    with RemotingClient(cluster.name_server, credentials=ADMIN) as admin:
        queues = admin.queues(topic, refresh=True)
        return sorted(m.body for mq in queues for m in admin.read_range(mq, 0, admin.max_offset(mq)))


def test_pub_writes_at_least_once(spark, acl2, user):
    rows = spark.createDataFrame([(f"w{i}",) for i in range(4)], "body STRING")
    writer = rows.write.format("rocketmq").mode("append")
    for k, v in _options(acl2, user("writer"), topic="Writes").items():
        writer = writer.option(k, v)
    writer.save()
    assert _bodies(acl2, "Writes") == [f"w{i}".encode() for i in range(4)]


def test_exactly_once_needs_pub_and_sub_and_its_records_topic_and_home_group(spark, acl2, user, tmp_path: Path):
    reader = spark.readStream.format("rocketmq")
    for k, v in _options(
        acl2, user("reader"), topic="Reads", consumerGroup="readers", startingOffsets="earliest"
    ).items():
        reader = reader.option(k, v)
    writer = reader.load().select("body").writeStream.format("rocketmq")
    for k, v in _options(
        acl2, user("eo"), topic="EoWrites", deliveryGuarantee="exactly_once", producerGroup=PRODUCER_GROUP
    ).items():
        writer = writer.option(k, v)
    query = writer.option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    assert query.awaitTermination(180) and query.exception() is None, query.exception()
    assert _bodies(acl2, "EoWrites") == _bodies(acl2, "Reads")
