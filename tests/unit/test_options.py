"""Option parsing: every bad input gives an OptionError naming the option."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from rmq_spark.client.model import FilterExpression, MessageQueue
from rmq_spark.option_table import OPTIONS, Scope, default, reference_markdown
from rmq_spark.option_values import parse_duration_ms
from rmq_spark.options import OptionError, parse_options, parse_sink_options
from rmq_spark.source.offset_specs import ByTimestamp, Committed, Edge, SpecificOffsets

BASE = {"nameserver": "127.0.0.1:9876", "topic": "T"}


def test_defaults_and_case_insensitive_keys():
    o = parse_options({"NAMESERVER": "a:1;b:2", "Topics": "B, A,A", "FailOnDataLoss": "False"})
    assert o.name_server == "a:1;b:2" and o.topics == ("A", "B") and o.fail_on_data_loss is False
    assert o.filter == FilterExpression("*", "TAG") and o.filter.tags is None and o.pull_depth == 8
    assert o.commit_offsets_to_broker is False


def test_the_filter_options_parse_into_one_filter_expression():
    o = parse_options({**BASE, "subExpression": " TagA ||TagB|| ", "expressionType": "tag"})
    assert o.filter == FilterExpression("TagA ||TagB||") and o.filter.type == "TAG"
    assert o.filter.tags == frozenset({"TagA", "TagB"}) and o.filter.filters
    sql = parse_options({**BASE, "subExpression": "a > 1 || b", "expressionType": "sql92"}).filter
    assert sql.type == "SQL92" and sql.tags is None and sql.filters  # a SQL92 filter is never read as tags
    for every in ("*", "", "  ", "TagA || *"):
        f = parse_options({**BASE, "subExpression": every}).filter
        assert f.tags is None and not f.filters and f.expression == "*", every
    assert pickle.loads(pickle.dumps(o)).filter.tags == o.filter.tags
    assert FilterExpression.of_tags(["b", "a", "a"]) == FilterExpression("a || b")
    with pytest.raises(ValueError, match="at least one tag"):
        FilterExpression.of_tags([])
    with pytest.raises(ValueError, match="TAG, SQL92"):
        FilterExpression("x", "REGEX")


def test_endpoint_selects_the_grpc_transport():
    o = parse_options({"Endpoint": " gw:8081 ", "topic": "T", "tls": "true"})
    assert o.endpoint == "gw:8081" and o.name_server is None and o.tls is True
    assert parse_options({"endpoint": "[::1]:8081", "topic": "T"}).endpoint == "[::1]:8081"


def test_secrets_stay_out_of_repr():
    o = parse_options({**BASE, "accessKey": "AK", "secretKey": "s3cr3t-value", "securityToken": "tok-value"})
    assert "s3cr3t-value" not in repr(o) and "tok-value" not in repr(o) and "AK" in repr(o)


@pytest.mark.parametrize(
    "raw, message",
    [
        (
            {**BASE, "startingOffset": "earliest"},
            "unknown option 'startingOffset' .*; did you mean startingOffsets\\? known options: .*consumerGroup",
        ),
        ({**BASE, "failondatalos": "false"}, "did you mean failOnDataLoss\\?"),
        ({**BASE, "colour": "blue"}, "unknown option 'colour' for the rocketmq source; known options: "),
        ({"topic": "T"}, "option nameServer is required"),
        ({**BASE, "nameserver": "localhost"}, "option nameServer: 'localhost' is not host:port"),
        ({"nameserver": "h:1"}, "exactly one of the options topic, topics, topicPattern"),
        (
            {**BASE, "topics": "A"},
            r"exactly one of the options topic, topics, topicPattern, assign \(got topic, topics\)",
        ),
        ({**BASE, "assign": '{"T": ["broker-a/0"]}'}, r"exactly one of .* \(got topic, assign\)"),
        ({"nameserver": "h:1", "assign": "T"}, "option assign is not valid JSON"),
        ({"nameserver": "h:1", "assign": '{"T": []}'}, "topic 'T' must map to a non-empty list"),
        ({"nameserver": "h:1", "assign": '{"T": ["broker-a"]}'}, "option assign: queue key 'broker-a' of topic 'T'"),
        (
            {"nameserver": "h:1", "assign": '{"T": ["broker-a/0"]}', "startingOffsets": '{"T": {"broker-b/0": 3}}'},
            "option startingOffsets names queues that option assign does not: T:broker-b/0",
        ),
        ({**BASE, "topic": "bad topic"}, "not a valid RocketMQ topic name"),
        ({"nameserver": "h:1", "topicPattern": "("}, "topicPattern is not a valid regular expression"),
        ({**BASE, "startingOffsets": "{not json"}, "option startingOffsets is not valid JSON"),
        ({**BASE, "startingOffsets": '{"T": {"broker-a": 1}}'}, "queue key 'broker-a' of topic 'T'"),
        ({**BASE, "startingOffsets": '{"T": {"broker-a/0": "x"}}'}, "must be an integer"),
        ({**BASE, "startingOffsets": "newest"}, "option startingOffsets must be earliest | latest | committed"),
        ({**BASE, "startingOffsets": "latest"}, "startingOffsets=latest is for streaming"),
        ({**BASE, "startingOffsets": "committed"}, "needs option consumerGroup"),
        ({**BASE, "minPartitions": "0"}, "option minPartitions must be at least 1"),
        ({**BASE, "maxMessagesPerPartition": "many"}, "option maxMessagesPerPartition must be an integer"),
        ({**BASE, "failOnDataLoss": "yes"}, "option failOnDataLoss must be true or false"),
        ({**BASE, "expressionType": "REGEX"}, "option expressionType must be one of TAG, SQL92"),
        ({**BASE, "accessKey": "AK"}, "accessKey and secretKey go together"),
        ({**BASE, "endpoint": "h:1"}, "nameServer .remoting. or option endpoint .gRPC pull gateway., not both"),
        ({"endpoint": "gateway", "topic": "T"}, "option endpoint 'gateway' is not host:port"),
        ({"endpoint": "a:1;b:2", "topic": "T"}, "option endpoint takes one host:port"),
        ({"endpoint": "gw:70000", "topic": "T"}, "option endpoint 'gw:70000' is not host:port"),
        ({"endpoint": "a:1", "topicPattern": "T.*"}, "topicPattern needs the name server's topic list"),
        ({**BASE, "path": "/x"}, "takes no path"),
        ({**BASE, "startingOffsetsFallback": "middle"}, "startingOffsetsFallback must be one of"),
        ({**BASE, "commitOffsetsToBroker": "true"}, "commitOffsetsToBroker=true needs option consumerGroup"),
        ({**BASE, "startingOffsets": '{"T": {"broker-a/0": -3}}'}, "offset -3 for T:broker-a/0 is not valid"),
        ({**BASE, "endingOffsets": "earliest"}, "option endingOffsets must be latest or a JSON object"),
        ({**BASE, "startingOffsetsByTimestamp": '{"T": {"broker-a/0": -5}}'}, "must be a time in ms"),
        ({**BASE, "brokerRetryTimeoutMs": "soon"}, "option brokerRetryTimeoutMs must be an integer"),
        ({**BASE, "allowSharedConsumerGroup": "maybe"}, "option allowSharedConsumerGroup must be true or false"),
    ],
)
def test_bad_options(raw, message):
    with pytest.raises(OptionError, match=message):
        parse_options(raw)


def test_secret_not_in_errors():
    with pytest.raises(OptionError) as e:
        parse_options({**BASE, "secretKey": "s3cr3t-value"})
    assert "s3cr3t-value" not in str(e.value)


def test_streaming_rejects_ending_options():
    with pytest.raises(OptionError, match="endingOffsets is for batch queries only"):
        parse_options({**BASE, "endingOffsets": "latest"}, streaming=True)
    assert parse_options({**BASE, "startingOffsets": "latest"}, streaming=True).starting == Edge.LATEST


def test_offset_options_are_parsed_once_into_typed_specs():
    mq = MessageQueue("T", "broker-a", 0)
    assert parse_options(BASE).starting == Edge.EARLIEST and parse_options(BASE).ending == Edge.LATEST
    assert parse_options(BASE, streaming=True).starting == Edge.LATEST
    o = parse_options({**BASE, "startingOffsets": '{"T": {"broker-a/00": 7}}', "endingOffsets": "latest"})
    assert o.starting == SpecificOffsets("startingOffsets", {mq: 7}, Edge.EARLIEST) and o.ending == Edge.LATEST
    o = parse_options(
        {**BASE, "startingOffsets": "committed", "consumerGroup": "g", "startingOffsetsFallback": "ERROR"}
    )
    assert o.starting == Committed("g", None)
    # precedence as in Spark's Kafka source: timestamp, then per-queue timestamps, then offsets
    o = parse_options(
        {
            **BASE,
            "startingOffsets": "earliest",
            "startingOffsetsByTimestamp": '{"T": {"broker-a/0": 5}}',
            "startingTimestamp": "9",
        }
    )
    assert o.starting == ByTimestamp("startingTimestamp", timestamp=9, strict=True)  # Kafka's default: error
    o = parse_options({**BASE, "startingTimestamp": "9", "startingOffsetsByTimestampStrategy": "Latest"})
    assert o.starting == ByTimestamp("startingTimestamp", timestamp=9, strict=False)
    o = parse_options({**BASE, "endingOffsets": "latest", "endingOffsetsByTimestamp": '{"T": {"broker-a/0": 5}}'})
    assert o.ending == ByTimestamp("endingOffsetsByTimestamp", per_queue={mq: 5}, default=Edge.LATEST)


def test_one_default_per_option():
    # every default comes from the option table: the parsed options without the option, and the dataclasses
    parsed, sink = parse_options(BASE), parse_sink_options({"nameServer": "h:1"})
    for o in OPTIONS:
        if o.default is None:
            continue
        target = sink if o.scope is Scope.WRITE else parsed
        if o.field is not None:
            assert getattr(target, o.field) == o.default, o.name
    assert sink.producer_group == default("producerGroup", Scope.WRITE)
    assert sink.delivery_guarantee.value == default("deliveryGuarantee")
    assert parse_options({**BASE, "brokerRetryTimeoutMs": "1500"}).broker_retry_timeout == 1.5


def test_the_options_reference_is_generated_from_the_table():
    reference = Path(__file__).resolve().parents[2] / "docs" / "OPTIONS.md"
    assert reference.read_text() == reference_markdown(), "run: python -m rmq_spark.option_table > docs/OPTIONS.md"
    for o in OPTIONS:
        assert f"| `{o.name}` |" in reference.read_text()


def test_options_of_the_other_mode_are_logged_and_ignored_as_kafka_does(caplog):
    with caplog.at_level(logging.WARNING, logger="rmq_spark.options"):
        o = parse_options({**BASE, "maxMessagesPerTrigger": "5", "pushFilters": "false"})
    assert o.max_messages_per_trigger == 5  # parsed all the same: a bad value is still an error
    assert "option maxMessagesPerTrigger does not apply to a batch read; it is ignored" in caplog.text
    assert "pushFilters" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rmq_spark.options"):
        parse_options({**BASE, "pushFilters": "true", "maxMessagesPerTrigger": "5"}, streaming=True)
    assert "option pushFilters does not apply to a streaming query" in caplog.text
    assert "maxMessagesPerTrigger" not in caplog.text


def test_contradicting_trigger_limits_and_kafka_spellings_are_named():
    with pytest.raises(OptionError, match=r"minMessagesPerTrigger \(10\) is above maxMessagesPerTrigger \(5\)"):
        parse_options({**BASE, "minMessagesPerTrigger": "10", "maxMessagesPerTrigger": "5"}, streaming=True)
    for kafka, ours in (
        ("subscribe", "topics"),
        ("subscribePattern", "topicPattern"),
        ("maxOffsetsPerTrigger", "maxMessagesPerTrigger"),
        ("minOffsetsPerTrigger", "minMessagesPerTrigger"),
        ("maxRecordsPerPartition", "maxMessagesPerPartition"),
    ):
        with pytest.raises(
            OptionError, match=f"option '{kafka}' is Spark's Kafka source's; the rocketmq source's is {ours}"
        ):
            parse_options({**BASE, kafka: "x"})
    for spelled in ("exactly-once", "EXACTLY_ONCE", "Exactly-Once"):
        assert parse_sink_options(
            {"nameServer": "h:1", "topic": "t", "producerGroup": "g", "deliveryGuarantee": spelled}
        ).exactly_once
    assert not parse_sink_options({"nameServer": "h:1", "deliveryGuarantee": "at-least-once"}).exactly_once


def test_durations():
    assert parse_duration_ms("x", "15m") == 900_000 and parse_duration_ms("x", "250ms") == 250
    # Spark's timeStringAsMs: a bare number is milliseconds (maxTriggerDelay=500 waits 0.5 s, as Kafka's source)
    assert parse_duration_ms("x", "500") == 500 and parse_duration_ms("x", "2min") == 120_000
    assert parse_duration_ms("x", "1d") == 86_400_000 and parse_duration_ms("x", "2500us") == 2
    with pytest.raises(OptionError, match="Spark's time suffixes"):
        parse_duration_ms("x", "3 weeks")
    with pytest.raises(OptionError, match="option x must be a duration"):
        parse_duration_ms("x", "soon")


def test_tls_files_with_an_explicit_tls_true_and_the_pairs_they_need():
    o = parse_options({"nameServer": "ns:9876", "topic": "T", "tls": "true", "tlsCaFile": "/ca.pem"})
    assert o.tls is True and o.tls_ca_file == "/ca.pem"
    with pytest.raises(OptionError, match="tlsCertFile and tlsKeyFile go together.*set both or neither"):
        parse_options({"nameServer": "ns:9876", "topic": "T", "tlsCertFile": " ", "tlsKeyFile": "/k.pem"})
    with pytest.raises(OptionError, match="tls=false contradicts tlsCaFile: remove tls=false"):
        parse_options({"nameServer": "ns:9876", "topic": "T", "tls": "false", "tlsCaFile": "/ca.pem"})


@pytest.mark.parametrize("parse", [parse_options, parse_sink_options])
def test_no_options_at_all_names_the_catalog_table_limit_and_the_ways_around_it(parse):
    with pytest.raises(OptionError, match=r"CREATE TABLE .* Spark does not pass a catalog table's options.*WITH \("):
        parse({})


def test_assign_names_the_only_queues_read():
    o = parse_options(
        {
            "nameserver": "h:1",
            "assign": '{"B": ["broker-b/1"], "A": ["broker-a/0", "broker-a/2"]}',
            "startingOffsets": '{"A": {"broker-a/2": 7}}',
        }
    )
    assert o.topics == ("A", "B") and o.topic_pattern is None
    assert o.assign == {
        MessageQueue("A", "broker-a", 0),
        MessageQueue("A", "broker-a", 2),
        MessageQueue("B", "broker-b", 1),
    }
    assert parse_options(BASE).assign is None


def test_parsing_options_needs_neither_grpc_nor_the_native_core():
    probe = (
        "import sys, rmq_spark.options as o; o.parse_options({'nameServer': 'h:1', 'topic': 'T'}); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'grpc' or m in "
        "('rmq_spark._native', 'rmq_spark.compiled')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
