"""spark.read.format("rocketmq") against the real embedded RocketMQ, checked against what was sent, through both
transports (option nameServer: remoting; option endpoint: the v2 pull gateway)."""

from __future__ import annotations

import base64
import json
import time

import pytest

from rmq_spark.source.schema import SCHEMA_DDL
from tests.conftest import TRANSPORTS, transport_options

BROKERS = ("broker-a", "broker-b")
TAGS = ("TagA", "TagB", "TagC")


@pytest.fixture(scope="module")
def loaded(rocketmq, request):
    """A topic with 2 rounds of 6 messages on each of its 8 queues; returns (topic, messages as the Java consumer
    sees them, a timestamp between the rounds)."""
    from tests.conftest import unique_topic

    topic = unique_topic(request)
    rocketmq.create_topic(topic, queues=4)

    def round_(r):
        return [
            {
                "body": f"r{r}-{b}-{q}-{i}",
                "tags": TAGS[i % 3],
                "keys": [f"k{i}", "x"],
                "properties": {"n": str(i), "round": str(r)},
                "broker": b,
                "queueId": q,
            }
            for b in BROKERS
            for q in range(4)
            for i in range(6)
        ]

    rocketmq.produce(topic, round_(0))
    time.sleep(0.3)
    between = int(time.time() * 1000)
    time.sleep(0.3)
    rocketmq.produce(topic, round_(1))
    return topic, rocketmq.consume(topic), between


@pytest.fixture(scope="module", params=TRANSPORTS)
def transport(request) -> str:
    return request.param


def _read(spark, rocketmq, transport, topic, *, schema=None, **options):
    reader = spark.read.format("rocketmq").option("topic", topic)
    if schema is not None:
        reader = reader.schema(schema)
    for k, v in {**transport_options(rocketmq, transport), **options}.items():
        reader = reader.option(k, v)
    return reader.load()


def _keys(rows):
    return sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows)


def _java_keys(messages):
    return sorted((m["brokerName"], m["queueId"], m["queueOffset"]) for m in messages)


def test_reads_every_message_with_every_column(spark, rocketmq, transport, loaded):
    topic, java, _ = loaded
    df = _read(spark, rocketmq, transport, topic, includeProperties="true")
    assert df.schema.simpleString() == spark.createDataFrame([], SCHEMA_DDL).schema.simpleString()
    rows = df.collect()
    assert _keys(rows) == _java_keys(java)
    by_key = {(m["brokerName"], m["queueId"], m["queueOffset"]): m for m in java}
    for r in rows:
        j = by_key[(r["brokerName"], r["queueId"], r["queueOffset"])]
        assert bytes(r["body"]) == base64.b64decode(j["bodyBase64"])
        assert r["topic"] == topic and r["msgId"] == j["msgId"] and r["tags"] == j["tags"]
        assert r["keys"] == j["keys"].split(" ")
        assert int(r["storeTimestamp"].timestamp() * 1000) == j["storeTimestamp"]
        assert int(r["bornTimestamp"].timestamp() * 1000) == j["bornTimestamp"]
        assert r["bornHost"] == j["bornHost"] and r["storeHost"] == j["storeHost"]
        assert r["properties"]["n"] == j["properties"]["n"] and r["reconsumeTimes"] == 0 and r["flag"] == 0
    assert df.rdd.getNumPartitions() == 1  # the small ranges of the 8 queues are read by one task
    each = _read(spark, rocketmq, transport, topic, minMessagesPerPartition="0")
    assert each.rdd.getNumPartitions() == 8 and _keys(each.collect()) == _java_keys(java)


def test_the_default_row_leaves_properties_out_as_kafka_leaves_headers(spark, rocketmq, transport, loaded):
    """Without includeProperties=true the row has every column but the properties map; a schema that names it
    reads it without the option."""
    topic, java, _ = loaded
    default = _read(spark, rocketmq, transport, topic)
    full = _read(spark, rocketmq, transport, topic, includeProperties="true")
    assert full.columns == [*default.columns, "properties"]
    assert _keys(default.collect()) == _java_keys(java)
    named = _read(spark, rocketmq, transport, topic, schema="queueOffset BIGINT, properties MAP<STRING, STRING>")
    assert sorted(r["properties"]["n"] for r in named.collect()) == sorted(m["properties"]["n"] for m in java)


def test_json_offsets_select_exact_ranges(spark, rocketmq, transport, loaded):
    topic, java, _ = loaded
    start = {topic: {"broker-a/0": 5, "broker-b/3": -2, "broker-a/1": -1}}
    end = {topic: {"broker-a/0": 9, "broker-b/2": 4}}
    rows = _read(
        spark, rocketmq, transport, topic, startingOffsets=json.dumps(start), endingOffsets=json.dumps(end)
    ).collect()

    def wanted(m):
        lo = {("broker-a", 0): 5, ("broker-a", 1): 12}.get((m["brokerName"], m["queueId"]), 0)
        hi = {("broker-a", 0): 9, ("broker-b", 2): 4}.get((m["brokerName"], m["queueId"]), 12)
        return lo <= m["queueOffset"] < hi

    assert _keys(rows) == _java_keys([m for m in java if wanted(m)])


def test_timestamps_select_by_store_time(spark, rocketmq, transport, loaded):
    topic, java, between = loaded
    later = _read(spark, rocketmq, transport, topic, startingTimestamp=str(between), includeProperties="true")
    later = later.collect()
    assert _keys(later) == _java_keys([m for m in java if m["storeTimestamp"] >= between])
    assert {r["properties"]["round"] for r in later} == {"1"}
    earlier = _read(spark, rocketmq, transport, topic, endingTimestamp=str(between)).collect()
    assert _keys(earlier) == _java_keys([m for m in java if m["storeTimestamp"] < between])
    per_queue = json.dumps({topic: {"broker-b/1": between}})
    mixed = _read(
        spark, rocketmq, transport, topic, startingOffsetsByTimestamp=per_queue, startingTimestamp="0"
    ).collect()
    assert len(mixed) == len(java)  # startingTimestamp takes precedence over startingOffsetsByTimestamp
    only = _read(spark, rocketmq, transport, topic, startingOffsetsByTimestamp=per_queue).collect()
    assert _keys(only) == _java_keys(
        [m for m in java if not (m["brokerName"], m["queueId"]) == ("broker-b", 1) or m["storeTimestamp"] >= between]
    )


def test_a_starting_time_past_the_messages_fails_unless_the_strategy_is_latest(spark, rocketmq, transport, loaded):
    topic, java, _ = loaded
    future = str(max(m["storeTimestamp"] for m in java) + 60_000)
    with pytest.raises(
        Exception,
        match=r"option startingTimestamp: no message is stored at or after the time in "
        r".*startingOffsetsByTimestampStrategy=latest",
    ):
        _read(spark, rocketmq, transport, topic, startingTimestamp=future).collect()
    assert (
        _read(
            spark, rocketmq, transport, topic, startingTimestamp=future, startingOffsetsByTimestampStrategy="latest"
        ).count()
        == 0
    )


def test_committed_offsets_with_fallback(spark, rocketmq, transport, loaded):
    topic, java, _ = loaded
    group = f"batch-committed-{topic}"[:100]
    rocketmq.update_consumer_offset(group, topic, "broker-a", 2, 10)
    rows = _read(
        spark,
        rocketmq,
        transport,
        topic,
        startingOffsets="committed",
        consumerGroup=group,
        startingOffsetsFallback="latest",
    ).collect()
    assert _keys(rows) == [("broker-a", 2, 10), ("broker-a", 2, 11)]
    with pytest.raises(Exception, match="has no committed offset for"):
        _read(
            spark,
            rocketmq,
            transport,
            topic,
            startingOffsets="committed",
            consumerGroup=group,
            startingOffsetsFallback="error",
        ).collect()


def test_tag_filter(spark, rocketmq, transport, loaded):
    topic, java, _ = loaded
    rows = _read(spark, rocketmq, transport, topic, subExpression="TagA || TagC").collect()
    assert _keys(rows) == _java_keys([m for m in java if m["tags"] in ("TagA", "TagC")])


def test_a_user_schema_reads_only_its_columns(spark, rocketmq, transport, loaded):
    """A subset of the columns, in the user's order; the tag filter still applies without the tags column."""
    topic, java, _ = loaded
    df = _read(
        spark,
        rocketmq,
        transport,
        topic,
        schema="body BINARY, queueOffset BIGINT, brokerName STRING, queueId INT",
        subExpression="TagB",
    )
    assert df.columns == ["body", "queueOffset", "brokerName", "queueId"]
    rows = df.collect()
    want = {
        (m["brokerName"], m["queueId"], m["queueOffset"]): base64.b64decode(m["bodyBase64"])
        for m in java
        if m["tags"] == "TagB"
    }
    assert {(r["brokerName"], r["queueId"], r["queueOffset"]): bytes(r["body"]) for r in rows} == want
    assert len(rows) == len(want)


@pytest.mark.parametrize(
    "schema, message",
    [
        ("queueOffset BIGINT, offset BIGINT", "no column 'offset'.*queueOffset BIGINT"),
        ("queueOffset INT", "column 'queueOffset' is BIGINT in the rocketmq source, not INT"),
    ],
)
def test_a_wrong_user_schema_lists_the_columns(spark, rocketmq, transport, loaded, schema, message):
    topic, _, _ = loaded
    with pytest.raises(Exception, match=message):
        _read(spark, rocketmq, transport, topic, schema=schema).collect()


def test_splitting_gives_the_same_rows(spark, rocketmq, transport, loaded):
    topic, java, _ = loaded
    whole = _read(spark, rocketmq, transport, topic)
    split = _read(spark, rocketmq, transport, topic, maxMessagesPerPartition="5")
    more = _read(spark, rocketmq, transport, topic, minPartitions="40")
    assert split.rdd.getNumPartitions() == 8 * 3 and more.rdd.getNumPartitions() >= 40
    expected = sorted((r["queueOffset"], r["brokerName"], r["queueId"], bytes(r["body"])) for r in whole.collect())
    for df in (split, more):
        assert (
            sorted((r["queueOffset"], r["brokerName"], r["queueId"], bytes(r["body"])) for r in df.collect())
            == expected
        )


def test_small_arrow_batches_and_deep_pipelines(spark, rocketmq, transport, topic):
    rocketmq.produce_bulk(topic, 4000, 64, tags=["TagA"])
    df = _read(spark, rocketmq, transport, topic, rowsPerBatch="7", pullDepth="32")
    assert df.count() == 4000
    assert df.select("queueOffset", "brokerName", "queueId").distinct().count() == 4000


@pytest.mark.parametrize(
    "options, message",
    [
        ({"startingOfsets": "earliest"}, "unknown option 'startingofsets'"),
        ({"startingOffsets": "{oops"}, "option startingOffsets is not valid JSON"),
        ({"topic": "no-such-topic-here"}, "topic 'no-such-topic-here' does not exist"),
        (
            {"unreachable": True},
            {
                "remoting": "no name server answered.*check the nameServer option",
                "grpc": "could not talk gRPC to 127.0.0.1:1.*check that endpoint is",
            },
        ),
        (
            {"startingOffsets": '{"T": {"broker-a/0": 5}}', "endingOffsets": '{"T": {"broker-a/0": 2}}'},
            "end offset 2 is before the start offset 5",
        ),
        (
            {"startingOffsets": '{"T": {"broker-z/0": 5}}'},
            "names queue broker-z/0 of topic .*, whose broker group is not in the topic's route now .*check the name",
        ),
    ],
)
def test_bad_options_fail_before_any_task(spark, rocketmq, transport, loaded, options, message):
    topic, _, _ = loaded
    options = dict(options)  # the parameter is shared by both transports' runs
    if options.pop("unreachable", False):
        options = {("nameServer" if transport == "remoting" else "endpoint"): "127.0.0.1:1"}
        message = message[transport]
    options = {k: (v.replace('"T"', json.dumps(topic)) if isinstance(v, str) else v) for k, v in options.items()}
    with pytest.raises(Exception, match=message):
        _read(spark, rocketmq, transport, options.pop("topic", topic), **options).collect()


def test_both_transports_give_identical_rows(spark, rocketmq, loaded):
    topic, java, _ = loaded

    def rows(transport, **options):
        df = _read(spark, rocketmq, transport, topic, includeProperties="true", **options)
        return sorted((tuple(r.asDict().items()) for r in df.collect()), key=lambda r: (r[1], r[2], r[3]))

    for options in (
        {},
        {"subExpression": "TagB"},
        {
            "startingOffsets": json.dumps({topic: {"broker-b/1": 4}}),
            "endingOffsets": json.dumps({topic: {"broker-a/2": 9}}),
        },
    ):
        over_remoting, over_grpc = rows("remoting", **options), rows("grpc", **options)
        assert over_remoting and over_remoting == over_grpc, options


def test_secrets_do_not_show_in_explain(spark, rocketmq, transport, loaded):
    topic, _, _ = loaded
    df = _read(spark, rocketmq, transport, topic, accessKey="AK", secretKey="very-secret-value")
    plan = df._jdf.queryExecution().toString()
    assert "very-secret-value" not in plan


@pytest.fixture
def pushdown_enabled(spark):
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    yield
    spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_pushed_filters_narrow_the_plan(spark, rocketmq, transport, loaded, pushdown_enabled):
    topic, java, between = loaded
    base = _read(spark, rocketmq, transport, topic, pushFilters="true", maxMessagesPerPartition="1")
    exact = base.where("brokerName = 'broker-b' AND queueId IN (1, 2) AND queueOffset >= 3 AND queueOffset < 8")
    assert exact.rdd.getNumPartitions() == 2 * 5  # one message per partition: only what the filters allow
    assert _keys(exact.collect()) == [("broker-b", q, o) for q in (1, 2) for o in range(3, 8)]

    tagged = base.where("tags = 'TagB'")
    assert _keys(tagged.collect()) == _java_keys([m for m in java if m["tags"] == "TagB"])
    # pushed tags narrow subExpression's, never widen them; a SQL92 filter is kept whatever else is pushed
    within = _read(spark, rocketmq, transport, topic, pushFilters="true", subExpression="TagA || TagC")
    assert _keys(within.where("tags IN ('TagB', 'TagC')").collect()) == _java_keys(
        [m for m in java if m["tags"] == "TagC"]
    )
    assert within.where("tags = 'TagB'").count() == 0
    sql = _read(
        spark,
        rocketmq,
        transport,
        topic,
        pushFilters="true",
        expressionType="SQL92",
        subExpression="n > 3 AND round = 1",
    )
    assert _keys(sql.where("queueId = 1").collect()) == _java_keys(
        [m for m in java if int(m["properties"]["n"]) > 3 and m["properties"]["round"] == "1" and m["queueId"] == 1]
    )

    import datetime as dt

    since = dt.datetime.fromtimestamp(between / 1000, tz=dt.timezone.utc)
    recent = base.where(base.storeTimestamp >= since)
    assert recent.rdd.getNumPartitions() == 8 * 6  # the first round is not even planned
    assert _keys(recent.collect()) == _java_keys([m for m in java if m["storeTimestamp"] >= between])


def test_pushdown_needs_the_spark_setting_and_is_off_by_default(spark, rocketmq, transport, loaded):
    topic, java, _ = loaded
    assert _read(spark, rocketmq, transport, topic).where("queueId = 1").count() == len(
        [m for m in java if m["queueId"] == 1]
    )
    with pytest.raises(Exception, match="spark.sql.python.filterPushdown.enabled"):
        _read(spark, rocketmq, transport, topic, pushFilters="true").where("queueId = 1").collect()


def test_sql92_filter(spark, rocketmq, transport, loaded):
    topic, java, _ = loaded
    rows = _read(
        spark, rocketmq, transport, topic, expressionType="SQL92", subExpression="n > 3 AND round = 1"
    ).collect()
    assert _keys(rows) == _java_keys(
        [m for m in java if int(m["properties"]["n"]) > 3 and m["properties"]["round"] == "1"]
    )


def test_empty_topic_reads_no_rows(spark, rocketmq, transport, topic):
    assert _read(spark, rocketmq, transport, topic).count() == 0
