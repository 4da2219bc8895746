"""Option namespace, against the real embedded RocketMQ with RocketMQ's own Java client (its setNamespace) as the
reference: topics and groups go to the brokers as ``ns%name``; columns, offsets JSON and errors show them without
the prefix; a name given with the prefix is not prefixed twice. A topic of the same name outside the namespace is
never read or written. Batch and streaming reads, committed offsets and the sink, through both transports."""

from __future__ import annotations

import base64
import uuid

import pytest

from tests.conftest import TRANSPORTS, transport_options
from tests.integration.streaming import Collect, start_query, wait_for
from tests.support.checkpoints import committed_offsets

NS = "tenant-a"


@pytest.fixture(params=TRANSPORTS)
def transport(request) -> str:
    return request.param


@pytest.fixture
def pair(rocketmq) -> str:
    """A topic name that exists in the namespace and outside it, with other messages in each."""
    name = f"Orders-{uuid.uuid4().hex[:8]}"
    rocketmq.create_topic(f"{NS}%{name}", queues=2)
    rocketmq.create_topic(name, queues=2)
    rocketmq.produce(name, [{"body": f"outside-{i}"} for i in range(5)])
    return name


def _bodies(messages) -> list[str]:
    return sorted(base64.b64decode(m["bodyBase64"]).decode() for m in messages)


def _options(rocketmq, transport, **more) -> dict[str, str]:
    return {**transport_options(rocketmq, transport), "namespace": NS, **more}


@pytest.mark.parametrize("named", ["plain", "prefixed"])
def test_a_batch_read_takes_the_namespace_topic_and_shows_it_without_the_prefix(
    spark, rocketmq, pair, transport, named
):
    sent = rocketmq.produce(pair, [{"body": f"in-{i}"} for i in range(12)], namespace=NS)
    topic = pair if named == "plain" else f"{NS}%{pair}"
    rows = spark.read.format("rocketmq").options(**_options(rocketmq, transport, topic=topic)).load().collect()
    assert sorted(r["body"].decode() for r in rows) == _bodies(rocketmq.consume(pair, namespace=NS))
    assert len(rows) == len(sent) == 12 and {r["topic"] for r in rows} == {pair}
    assert sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows) == sorted(
        (s["brokerName"], s["queueId"], s["queueOffset"]) for s in sent
    )


def test_topic_pattern_lists_only_the_namespace_topics(spark, rocketmq, pair):
    rocketmq.produce(pair, [{"body": "in"}], namespace=NS)
    rows = (
        spark.read.format("rocketmq")
        .options(**_options(rocketmq, "remoting", topicPattern=f"{pair}.*"))
        .load()
        .collect()
    )
    assert [(r["topic"], r["body"]) for r in rows] == [(pair, b"in")]


def test_an_unknown_topic_is_named_without_the_prefix(spark, rocketmq, transport):
    df = spark.read.format("rocketmq").options(**_options(rocketmq, transport, topic="NoSuchTopic")).load()
    with pytest.raises(Exception, match="topic 'NoSuchTopic'"):
        df.collect()


def test_a_stream_commits_offsets_to_the_namespace_group(spark, rocketmq, pair, transport, tmp_path):
    rocketmq.produce(pair, [{"body": f"in-{i}"} for i in range(10)], namespace=NS)
    group = f"g-{uuid.uuid4().hex[:8]}"
    sink = Collect()
    query = start_query(
        spark, rocketmq, transport, pair, sink, tmp_path, **_options(rocketmq, transport, consumerGroup=group)
    )
    try:
        wait_for(lambda: len(sink) == 10, 60, "the namespace topic's 10 messages", query)
        wait_for(
            lambda: sum(sum(q.values()) for t, q in committed_offsets(tmp_path).items() if t == pair) == 10,
            30,
            "a committed batch that ends after the 10 messages",
            query,
        )
        ends = {k: v for k, v in committed_offsets(tmp_path).items() if not k.startswith("$")}
        assert list(ends) == [pair]  # offsets JSON names the topic without the namespace
        wire = f"{NS}%{pair}"
        # Spark commits a batch's offsets to its source when the next batch starts: one more message starts it
        rocketmq.produce(pair, [{"body": "in-10"}], namespace=NS)
        wait_for(lambda: len(sink) == 11, 60, "the eleventh message", query)

        def mirrored() -> bool:
            """The group's offsets are the last committed end, the eleventh message's included (the mirror follows
            every commit: an end taken before the eleventh message's batch is passed as soon as that batch commits)."""
            last = committed_offsets(tmp_path)[pair]
            return sum(last.values()) == 11 and all(
                rocketmq.query_consumer_offset(f"{NS}%{group}", wire, key.split("/")[0], int(key.split("/")[1])) == end
                for key, end in last.items()
            )

        wait_for(mirrored, 60, "the offsets mirrored to ns%group", query)
    finally:
        query.stop()
    assert sorted(sink.keys) == sorted(
        (m["brokerName"], m["queueId"], m["queueOffset"]) for m in rocketmq.consume(pair, namespace=NS)
    )


def test_the_sink_writes_into_the_namespace(spark, rocketmq, pair, transport):
    df = spark.createDataFrame([(f"w-{i}", f"k{i % 3}") for i in range(9)], "body STRING, shardingKey STRING")
    (df.write.format("rocketmq").mode("append").options(**_options(rocketmq, transport, topic=pair)).save())
    assert _bodies(rocketmq.consume(pair, namespace=NS)) == sorted(f"w-{i}" for i in range(9))
    assert _bodies(rocketmq.consume(pair)) == sorted(f"outside-{i}" for i in range(5))


def test_an_exactly_once_write_in_a_namespace(spark, rocketmq, pair):
    df = spark.createDataFrame([(f"e-{i}",) for i in range(6)], "body STRING")
    (
        df.write.format("rocketmq")
        .mode("append")
        .options(
            **_options(rocketmq, "remoting", topic=pair, deliveryGuarantee="exactly_once", producerGroup=f"pg-{pair}")
        )
        .save()
    )
    assert _bodies(rocketmq.consume(pair, namespace=NS)) == sorted(f"e-{i}" for i in range(6))


def test_a_namespace_that_is_not_one_is_refused(spark, rocketmq):
    df = spark.read.format("rocketmq").options(nameServer=rocketmq.name_server, topic="T", namespace="a%b").load()
    with pytest.raises(Exception, match="option namespace 'a%b' is not a namespace"):
        df.collect()
