"""The Python client against the real embedded RocketMQ, checked against the official Java client, through both
transports: remoting (name server and brokers) and gRPC (the v2 pull gateway of jvm-shim)."""

from __future__ import annotations

import base64
import time

import pytest

from rmq_spark.client import (
    ConnectionLostError,
    FilterExpression,
    MessageQueue,
    OutgoingMessage,
    PullStatus,
    RemotingClient,
    TopicNotFoundError,
)
from rmq_spark.client.grpc.client import GrpcClient
from rmq_spark.client.model import Boundary
from tests.conftest import TRANSPORTS, new_client

# Properties the Java consumer adds on its side after a pull; they are not stored with the message.
JAVA_CLIENT_SIDE_PROPERTIES = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}


@pytest.fixture(params=TRANSPORTS)
def client(rocketmq, request):
    with new_client(rocketmq, request.param) as c:
        yield c


def _remoting(client) -> bool:
    return isinstance(client, RemotingClient)


def _read_all(client, topic, **kw):
    out = []
    for mq in client.queues(topic):
        lo, hi = client.min_offset(mq), client.max_offset(mq)
        out.extend(client.read_range(mq, lo, hi, **kw))
    return out


def _sample_messages():
    big = ("0123456789abcdef" * 400).encode()  # 6.4 KiB: the Java producer compresses bodies above 4 KiB
    return [
        {"body": "plain", "tags": "TagA", "keys": ["k1", "k2"], "properties": {"color": "red", "n": "1"}},
        {"body": "ünïcødé ✓ 中文", "tags": "TagB", "keys": ["ключ"], "properties": {"emoji": "🙂", "x": "ü"}},
        {"bodyBase64": base64.b64encode(big).decode(), "tags": "TagC", "keys": ["big"]},
        {"body": "x", "tags": "TagA"},
        {"body": "no tags, no keys"},
    ]


def test_route_spans_both_brokers(rocketmq, client, topic):
    route = client.route(topic)
    expected = rocketmq.brokers if _remoting(client) else {b: rocketmq.gateway for b in rocketmq.brokers}
    assert {b.broker_name: b.master_address for b in route.brokers} == expected
    assert client.queues(topic) == [MessageQueue(topic, b, q) for b in ("broker-a", "broker-b") for q in range(4)]
    if _remoting(client):
        assert topic in client.topics()
    else:
        with pytest.raises(Exception, match="has no topic list.*topicPattern"):
            client.topics()


def test_every_field_matches_the_java_consumer(rocketmq, client, topic):
    for broker in ("broker-a", "broker-b"):
        rocketmq.produce(topic, [{**m, "broker": broker, "queueId": 1} for m in _sample_messages()])
    batch = [
        {"body": f"batch-{i}", "tags": "TagBatch", "keys": [f"b{i}"], "properties": {"i": str(i)}} for i in range(10)
    ]
    rocketmq.produce(topic, [{**m, "broker": "broker-b", "queueId": 3} for m in batch], batch=True)

    java = {(m["brokerName"], m["queueId"], m["queueOffset"]): m for m in rocketmq.consume(topic)}
    ours = {(m.broker_name, m.queue_id, m.queue_offset): m for m in _read_all(client, topic)}
    assert len(java) == 2 * 5 + 10
    assert sorted(ours) == sorted(java)
    for key, j in java.items():
        m = ours[key]
        assert m.topic == j["topic"] == topic
        assert m.body == base64.b64decode(j["bodyBase64"]), key
        assert m.msg_id == j["msgId"], key
        assert m.tags == j.get("tags"), key
        assert " ".join(m.keys) == (j.get("keys") or ""), key
        assert m.born_timestamp == j["bornTimestamp"] and m.store_timestamp == j["storeTimestamp"], key
        assert m.born_host == j["bornHost"] and m.store_host == j["storeHost"], key
        assert m.reconsume_times == j["reconsumeTimes"] and m.flag == j["flag"], key
        if _remoting(client):  # store-level fields: the v2 Message does not carry them
            assert m.commit_log_offset == j["commitLogOffset"] and m.body_crc == j["bodyCRC"], key
            assert m.sys_flag == j["sysFlag"], key
        java_props = {k: v for k, v in j["properties"].items() if k not in JAVA_CLIENT_SIDE_PROPERTIES}
        assert m.properties == java_props, key
    if not _remoting(client):
        return
    big = next(m for m in ours.values() if m.tags == "TagC")
    # decompressed bodies keep the compression-type bits (8-10) of sysFlag, as in the Java client
    assert big.sys_flag & 0x700, "the 6.4 KiB body should have been stored compressed by the Java producer"


def test_pipelined_and_single_pull_reads_are_identical(rocketmq, client, topic):
    rocketmq.produce_bulk(topic, 3000, 100, tags=["TagA", "TagB", "TagC"])
    mq = client.queues(topic)[0]
    end = client.max_offset(mq)
    assert end > 100
    one = [(m.queue_offset, m.body) for m in client.read_range(mq, 0, end, depth=1)]
    many = [(m.queue_offset, m.body) for m in client.read_range(mq, 0, end, depth=16)]
    assert one == many
    assert [o for o, _ in one] == list(range(end))
    # a range that starts and ends inside pulls
    assert [m.queue_offset for m in client.read_range(mq, 7, 77, depth=4)] == list(range(7, 77))


def test_small_range_reads_one_after_another_share_one_connection(rocketmq, topic, monkeypatch):
    """A task of a trickling stream reads thousands of one-message ranges: each must not open (and the broker
    accept) a connection of its own (5,000 queues)."""
    import rmq_spark.client.remoting.connection as connection

    rocketmq.produce(topic, [{"body": f"m{i}", "broker": "broker-a", "queueId": 0} for i in range(20)])
    opened: list[str] = []
    direct = connection.DirectConnection

    class Counted(direct):  # type: ignore[misc, valid-type]
        def __init__(self, address: str, **kw) -> None:
            opened.append(address)
            super().__init__(address, **kw)

    monkeypatch.setattr(connection, "DirectConnection", Counted)
    with RemotingClient(rocketmq.name_server) as remoting:
        mq = next(q for q in remoting.queues(topic) if q.broker_name == "broker-a" and q.queue_id == 0)
        bodies = [m.body for i in range(20) for m in remoting.read_range(mq, i, i + 1)]
    assert bodies == [f"m{i}".encode() for i in range(20)]
    assert len(opened) == 1, f"{len(opened)} connections for 20 ranges"


def test_tag_filter_is_exact_and_rechecked(rocketmq, client, topic):
    rocketmq.produce_bulk(topic, 2000, 50, tags=["TagA", "TagB", "TagC", "TagD"])
    java = [m for m in rocketmq.consume(topic) if m.get("tags") in ("TagA", "TagC")]
    ours = _read_all(client, topic, expression=FilterExpression("TagA || TagC"), depth=8)
    assert sorted((m.broker_name, m.queue_id, m.queue_offset) for m in ours) == sorted(
        (m["brokerName"], m["queueId"], m["queueOffset"]) for m in java
    )
    assert {m.tags for m in ours} == {"TagA", "TagC"}


def test_offsets_by_timestamp_agree_with_the_java_admin_tool(rocketmq, client, topic):
    for _ in range(3):
        rocketmq.produce(topic, [{"body": f"t{i}", "broker": "broker-a", "queueId": 0} for i in range(5)])
        time.sleep(0.05)
    mq = MessageQueue(topic, "broker-a", 0)
    stored = [m.store_timestamp for m in client.read_range(mq, 0, client.max_offset(mq))]
    probes = sorted({stored[0] - 1000, stored[0], stored[7], stored[-1], stored[-1] + 1000})
    for ts in probes:
        for boundary in tuple(Boundary) if _remoting(client) else (Boundary.LOWER,):  # v2 QueryOffset: lower only
            assert client.search_offset(mq, ts, boundary) == rocketmq.search_offset(
                topic, "broker-a", 0, ts, boundary.value
            ), (ts, boundary)
    if not _remoting(client):
        return
    assert client.earliest_store_time(mq) == rocketmq.earliest_store_time(topic, "broker-a", 0) == stored[0]


def test_consumer_offsets_round_trip_with_the_java_admin_tool(rocketmq, client, topic):
    group = f"g-{topic}"[:100]
    mq_a, mq_b = MessageQueue(topic, "broker-a", 2), MessageQueue(topic, "broker-b", 1)
    rocketmq.produce(topic, [{"body": str(i), "broker": "broker-a", "queueId": 2} for i in range(10)])
    rocketmq.produce(topic, [{"body": str(i), "broker": "broker-b", "queueId": 1} for i in range(10)])
    assert client.query_consumer_offset(group, mq_a) is None
    client.update_consumer_offsets(group, {mq_a: 7, mq_b: 3})
    assert rocketmq.query_consumer_offset(group, topic, "broker-a", 2) == 7
    assert rocketmq.query_consumer_offset(group, topic, "broker-b", 1) == 3
    rocketmq.update_consumer_offset(group, topic, "broker-b", 1, 9)
    assert client.query_consumer_offsets(group, [mq_a, mq_b]) == {mq_a: 7, mq_b: 9}


def test_python_sends_are_read_back_by_the_java_consumer(rocketmq, client, topic):
    mq = MessageQueue(topic, "broker-b", 0)
    one = client.send(mq, OutgoingMessage(b"single", tags="TagP", keys=("a", "b"), properties={"p": "1"}))
    client.send(mq, [OutgoingMessage(f"b{i}".encode(), tags="TagQ") for i in range(5)])
    java = rocketmq.consume(topic, broker="broker-b", queueId=0)
    assert [base64.b64decode(m["bodyBase64"]) for m in java] == [b"single"] + [f"b{i}".encode() for i in range(5)]
    assert java[0]["tags"] == "TagP" and java[0]["keys"] == "a b" and java[0]["properties"]["p"] == "1"
    assert java[0]["msgId"] == one.msg_id and one.queue_offset == 0


def test_pull_statuses(rocketmq, client, topic):
    mq = MessageQueue(topic, "broker-a", 3)
    rocketmq.produce(topic, [{"body": "x", "broker": "broker-a", "queueId": 3, "tags": "TagA"}] * 3)
    found = client.pull(mq, 0)
    assert found.status is PullStatus.FOUND and found.next_begin_offset == 3
    assert found.max_offset == (3 if _remoting(client) else -1)  # a v2 pull answer carries no max offset
    assert client.pull(mq, 3).status is PullStatus.NO_NEW_MSG
    nomatch = client.pull(mq, 0, expression=FilterExpression("TagZ"))
    assert nomatch.status is PullStatus.NO_MATCHED_MSG and nomatch.next_begin_offset == 3
    moved = client.pull(mq, 50)
    assert moved.status is PullStatus.OFFSET_ILLEGAL and (moved.min_offset, moved.max_offset) == (0, 3)


def test_unknown_topic_and_unreachable_server(rocketmq, client):
    with pytest.raises(TopicNotFoundError, match="no-such-topic-xyz.*create the topic"):
        client.route("no-such-topic-xyz")
    started = time.monotonic()
    if _remoting(client):
        dead, message = RemotingClient("127.0.0.1:1", connect_timeout=2), "127.0.0.1:1.*check the nameServer option"
    else:
        dead, message = GrpcClient("127.0.0.1:1", connect_timeout=2), "127.0.0.1:1.*check that endpoint is"
    with dead, pytest.raises(ConnectionLostError, match=message):
        dead.route("anything")
    assert time.monotonic() - started < 10


def test_both_transports_read_identical_messages(rocketmq, topic):
    rocketmq.produce_bulk(topic, 1500, 80, tags=["TagA", "TagB"])
    for broker in ("broker-a", "broker-b"):
        rocketmq.produce(topic, [{**m, "broker": broker, "queueId": 2} for m in _sample_messages()])
    store_level = {"sys_flag", "commit_log_offset", "body_crc"}  # not in the v2 Message, nor in the rows
    with new_client(rocketmq, "remoting") as remoting, new_client(rocketmq, "grpc") as grpc_client:
        assert remoting.queues(topic) == grpc_client.queues(topic)
        for kw in ({}, {"expression": FilterExpression("TagB")}, {"expression": FilterExpression("TagA"), "depth": 1}):
            one, two = (_read_all(c, topic, **kw) for c in (remoting, grpc_client))
            assert len(one) > 0 and len(one) == len(two), kw
            for a, b in zip(one, two, strict=True):
                assert {k: v for k, v in vars(a).items() if k not in store_level} == {
                    k: v for k, v in vars(b).items() if k not in store_level
                }, (kw, a.queue_offset)


def test_name_server_failover(rocketmq, topic):
    with RemotingClient(f"127.0.0.1:1;{rocketmq.name_server}", connect_timeout=2) as c:
        assert len(c.queues(topic)) == 8


def test_long_polling_returns_when_a_message_arrives(rocketmq, client, topic):
    import threading

    mq = MessageQueue(topic, "broker-a", 0)
    pending = client.pull_async(mq, 0, suspend_ms=8000)
    threading.Timer(
        0.5, lambda: rocketmq.produce(topic, [{"body": "late", "broker": "broker-a", "queueId": 0}])
    ).start()
    started = time.monotonic()
    result = pending.result()
    assert result.status is PullStatus.FOUND and result.next_begin_offset == 1
    assert time.monotonic() - started < 6, "the broker should answer as soon as the message arrives"
    idle = client.pull_async(MessageQueue(topic, "broker-a", 1), 0, suspend_ms=1000)
    assert idle.result().status is PullStatus.NO_NEW_MSG
