"""df.write / writeStream.format("rocketmq") against the real embedded RocketMQ, read back with the official Java
consumer (jvm-shim) field by field."""

from __future__ import annotations

import base64
import collections
import os
import time

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, MapType, StringType, StructField, StructType

from rmq_spark.sink.routing import java_string_hash
from tests.conftest import unique_topic

ROW_SCHEMA = StructType(
    [
        StructField("body", BinaryType()),
        StructField("tags", StringType()),
        StructField("keys", ArrayType(StringType())),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("flag", IntegerType()),
    ]
)


def _write(df, rocketmq, topic=None, **options):
    w = df.write.format("rocketmq").mode("append").option("nameServer", rocketmq.name_server)
    if topic is not None:
        w = w.option("topic", topic)
    # a broker that stops answering fails the write in a minute, not after the default ten
    for k, v in {"brokerRetryTimeoutMs": "60000", **options}.items():
        w = w.option(k, v)
    w.save()


def _body(m) -> bytes:
    return base64.b64decode(m["bodyBase64"])


def test_a_batch_write_of_every_column_is_what_the_java_consumer_reads(spark, rocketmq, topic):
    big = os.urandom(3000) * 4  # over 4 KiB: compressed as the Java producer does, inflated by the Java consumer
    rows = [
        (
            f"b{i}".encode() if i != 7 else big,
            f"Tag{i % 3}" if i % 4 else None,
            [f"k{i}", "common"] if i % 2 else [],
            {"n": str(i), "UNIQ_KEY": "dropped", "CLUSTER": "dropped"} if i % 3 else None,
            i,
        )
        for i in range(40)
    ]
    _write(spark.createDataFrame(rows, ROW_SCHEMA).repartition(3), rocketmq, topic)

    java = rocketmq.consume(topic)
    assert len(java) == len(rows)
    by_body = {_body(m): m for m in java}
    for body, tags, keys, props, flag in rows:
        m = by_body[body]
        assert m["tags"] == tags
        assert (m["keys"] or "").split() == keys
        assert m["flag"] == flag
        user = {k: v for k, v in m["properties"].items() if k == "n"}
        assert user == ({"n": props["n"]} if props else {})
        assert m["properties"]["UNIQ_KEY"] == m["msgId"] != "dropped"
        assert m["properties"].get("CLUSTER") != "dropped"
    # stored zlib-compressed (sysFlag compression type 3; the Java consumer clears the compressed bit once it has
    # inflated the body, which matched above)
    assert by_body[big]["sysFlag"] & 0x700 == 0x300
    assert all(m["sysFlag"] & 0x700 == 0 for b, m in by_body.items() if b != big)
    assert len({(m["brokerName"], m["queueId"]) for m in java}) == 8, "rows without a key spread over the queues"


def test_string_bodies_topic_column_and_explicit_queues(spark, rocketmq, topic, request):
    other = unique_topic(request) + "o"
    rocketmq.create_topic(other, queues=2)
    df = spark.createDataFrame(
        [("s0", topic, "broker-b", 3), ("s1", other, "broker-a", 1), ("s2", topic, "broker-a", 0)],
        "body STRING, topic STRING, brokerName STRING, queueId INT",
    )
    _write(df, rocketmq)
    got = [(_body(m), m["topic"], m["brokerName"], m["queueId"]) for t in (topic, other) for m in rocketmq.consume(t)]
    assert sorted(got) == [(b"s0", topic, "broker-b", 3), (b"s1", other, "broker-a", 1), (b"s2", topic, "broker-a", 0)]


def test_rows_of_a_sharding_key_land_in_its_queue_in_order(spark, rocketmq, topic):
    keys = [f"order-{k}" for k in range(12)]
    rows = [(f"{key}:{seq}", key) for seq in range(50) for key in keys]
    _write(spark.createDataFrame(rows, "body STRING, shardingKey STRING").coalesce(1), rocketmq, topic)

    queues = sorted((m["brokerName"], m["queueId"]) for m in rocketmq.offsets(topic))
    per_key = collections.defaultdict(list)
    for m in sorted(rocketmq.consume(topic), key=lambda m: (m["brokerName"], m["queueId"], m["queueOffset"])):
        key, seq = _body(m).decode().split(":")
        per_key[key].append(((m["brokerName"], m["queueId"]), int(seq)))
    for key in keys:
        placed = per_key[key]
        # the queue the Java producer's SelectMessageQueueByHash picks for the key
        assert {q for q, _ in placed} == {queues[abs(java_string_hash(key)) % len(queues)]}
        assert [s for _, s in placed] == list(range(50))


def test_a_timer_message_is_delivered_at_its_time(spark, rocketmq, topic):
    at = int(time.time() * 1000) + 5000
    _write(spark.createDataFrame([("later", at), ("now", None)], "body STRING, deliverTimeMs BIGINT"), rocketmq, topic)
    assert [_body(m) for m in rocketmq.consume(topic)] == [b"now"]
    deadline = time.monotonic() + 30
    while len(rocketmq.consume(topic)) < 2:
        assert time.monotonic() < deadline, "the timer message never arrived"
        time.sleep(0.5)
    later = next(m for m in rocketmq.consume(topic) if _body(m) == b"later")
    assert later["storeTimestamp"] >= at - 1000  # the timer wheel's precision is one second


def test_exactly_once_batch_write_commits_all_or_nothing(spark, rocketmq, topic):
    df = spark.range(0, 300, numPartitions=3).select(F.col("id").cast("string").alias("body"))
    _write(df, rocketmq, topic, deliveryGuarantee="exactly_once", producerGroup=f"pg-{topic}"[:60])
    assert sorted(int(_body(m)) for m in rocketmq.consume(topic)) == list(range(300))

    # one task fails after the others stored their halves: the job aborts and nothing becomes visible
    @F.udf("string")
    def fail_on(v):
        if v == "250":
            raise ValueError("boom")
        return v

    bad = spark.range(300, 600, numPartitions=3).select(F.col("id").cast("string").alias("body"))
    bad = bad.select(fail_on(F.when(F.col("body") == "550", "250").otherwise(F.col("body"))).alias("body"))
    with pytest.raises(Exception, match="boom"):
        _write(bad, rocketmq, topic, deliveryGuarantee="exactly_once", producerGroup=f"pg-{topic}"[:60])
    time.sleep(1)
    assert len(rocketmq.consume(topic)) == 300


def test_a_streaming_exactly_once_write_keys_each_row_by_its_micro_batch(spark, rocketmq, topic, request, tmp_path):
    source = unique_topic(request) + "s"
    rocketmq.create_topic(source, queues=1, broker="broker-a")
    rocketmq.produce(source, [{"body": "same", "broker": "broker-a", "queueId": 0} for _ in range(6)])
    group = f"pg-{topic}"[:60]
    rows = (
        spark.readStream.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "2")
        .load()
        .select("body")
    )
    query = (
        rows.writeStream.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly_once")
        .option("producerGroup", group)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120) and query.exception() is None
    keys = [m["properties"]["rmqSparkRow"] for m in rocketmq.consume(topic)]
    # identical rows of three micro-batches: a recovery of one batch must never take another's rows for its own;
    # the two identical rows of one batch share a key (a recovery counts them)
    assert len(keys) == 6 and sorted(collections.Counter(keys).values()) == [2, 2, 2]
    # group/query/batch/content: the query's tag is one for the three batches
    assert sorted({k.split("/")[2] for k in keys}) == ["0", "1", "2"] and len({k.split("/")[1] for k in keys}) == 1
    assert all(k.startswith(group + "/") for k in keys)


@pytest.mark.parametrize(
    "columns, error",
    [
        ("body STRING, whatever STRING", r"\[ROCKETMQ_INVALID_OPTION\] the rocketmq sink has no column 'whatever'"),
        ("body STRING, queueOffset BIGINT", "column 'queueOffset' describes a message the broker stored"),
        ("body STRING, Tags STRING", "did you mean 'tags'"),
        ("body INT", "column 'body' is INT"),
        ("tags STRING", "needs a column body"),
        ("body STRING, brokerName STRING", "brokerName and queueId go together"),
    ],
)
def test_bad_columns_are_named(spark, rocketmq, topic, columns, error):
    df = spark.createDataFrame([], columns)
    with pytest.raises(Exception, match=error):
        _write(df, rocketmq, topic)


def test_bad_rows_fail_the_write_naming_their_spark_partition_and_count(spark, rocketmq, topic):
    # ids 5..9 are partition 1: two of its rows have no body
    df = spark.range(0, 10, numPartitions=2).select(
        F.when(F.col("id").isin(6, 8), None).otherwise(F.col("id").cast("string")).alias("body")
    )
    with pytest.raises(Exception, match=r"\[ROCKETMQ_INVALID_ROW\] 2 rows of Spark partition 1 have a null body"):
        _write(df, rocketmq, topic)


def test_bad_options_and_targets_are_named(spark, rocketmq, topic):
    df = spark.createDataFrame([("x",)], "body STRING")
    with pytest.raises(Exception, match="option startingOffsets is an option of the rocketmq source"):
        _write(df, rocketmq, topic, startingOffsets="earliest")
    with pytest.raises(Exception, match="unknown option 'linger' for the rocketmq sink"):
        _write(df, rocketmq, topic, linger="5")
    with pytest.raises(Exception, match="set option topic, or give the rows a topic column"):
        _write(df, rocketmq)
    with pytest.raises(Exception, match="deliveryGuarantee must be one of"):
        _write(df, rocketmq, topic, deliveryGuarantee="twice")
    with pytest.raises(Exception, match="append-only"):
        df.write.format("rocketmq").mode("overwrite").option("nameServer", rocketmq.name_server).option(
            "topic", topic
        ).save()
    with pytest.raises(Exception, match="cannot write to topic 'no-such-topic-x'"):
        _write(df, rocketmq, "no-such-topic-x")
    huge = spark.createDataFrame([(os.urandom(5 << 20),)], "body BINARY")
    with pytest.raises(Exception, match=f"{topic}.*maxMessageSize"):
        _write(huge, rocketmq, topic)
    assert rocketmq.consume(topic) == []


def test_a_write_through_the_grpc_gateway_sends_bodies_as_they_are(spark, rocketmq, topic):
    bodies = [b"small", os.urandom(2500) * 4]  # the large one is not compressed: no sysFlag travels over v2
    df = spark.createDataFrame([(b,) for b in bodies], "body BINARY")
    df.write.format("rocketmq").mode("append").option("endpoint", rocketmq.gateway).option("topic", topic).save()
    assert sorted(_body(m) for m in rocketmq.consume(topic)) == sorted(bodies)


def _copy(spark, rocketmq, source: str, target: str, group: str, checkpoint):
    """An exactly-once streaming copy of ``source`` into ``target`` under producer group ``group``, to its end."""
    return (
        spark.readStream.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("body")
        .writeStream.format("rocketmq")
        .option("nameServer", rocketmq.name_server)
        .option("topic", target)
        .option("deliveryGuarantee", "exactly_once")
        .option("producerGroup", group)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def test_a_new_checkpoint_on_a_used_producer_group_is_refused_and_loses_nothing(spark, rocketmq, request, tmp_path):
    # A stream reset: a new checkpoint (a new query id) writes under the producerGroup of a query that finished. Its
    # batch 0 must not be taken for a replay of the old query's batch 0 (whose halves a replay rolls back).
    a, b, target = (unique_topic(request) + suffix for suffix in ("a", "b", "t"))
    for topic in (a, b, target):
        rocketmq.create_topic(topic, queues=2)
    rocketmq.produce(a, [{"body": f"a{i}"} for i in range(50)], batch=True)
    rocketmq.produce(b, [{"body": f"b{i}"} for i in range(50)], batch=True)
    group = f"pg-{target}"[:60]
    first = _copy(spark, rocketmq, a, target, group, tmp_path / "first")
    assert first.awaitTermination(120) and first.exception() is None

    reset = _copy(spark, rocketmq, b, target, group, tmp_path / "reset")
    refused = rf"ROCKETMQ_COMMIT_FAILED\] producer group '{group}' keeps the commit records of another streaming query"
    with pytest.raises(StreamingQueryException, match=refused + ".*a producerGroup of its own"):
        reset.awaitTermination(120)
    time.sleep(1)
    assert sorted(_body(m).decode() for m in rocketmq.consume(target)) == sorted(f"a{i}" for i in range(50))

    # the fix the error names: a producerGroup of its own, on the same checkpoint
    again = _copy(spark, rocketmq, b, target, group + "-2", tmp_path / "reset")
    assert again.awaitTermination(120) and again.exception() is None
    bodies = collections.Counter(_body(m).decode() for m in rocketmq.consume(target))
    assert bodies == collections.Counter([f"a{i}" for i in range(50)] + [f"b{i}" for i in range(50)])
