"""Spark SQL over rocketmq. A temporary view keeps its OPTIONS; a catalog table (CREATE TABLE ... USING rocketmq) does
not, because Spark hands a Python data source only the options of the statement: it is read, streamed and written
with the options in each statement (WITH (...)), and used without them it fails with an error that says so."""

from __future__ import annotations

import collections
import uuid

import pytest

from tests.integration.streaming import Collect, assert_exactly_once


def _name(kind: str) -> str:
    return f"{kind}_{uuid.uuid4().hex[:8]}"


def test_a_temporary_view_using_rocketmq_keeps_its_options(spark, rocketmq, topic):
    rocketmq.produce_bulk(topic, 120, 30, tags=["TagA", "TagB"])
    view = _name("events")
    spark.sql(
        f"CREATE TEMPORARY VIEW {view} USING rocketmq OPTIONS (nameServer '{rocketmq.name_server}', topic '{topic}')"
    )
    try:
        rows = spark.sql(f"SELECT tags, count(*) AS n FROM {view} GROUP BY tags").collect()
    finally:
        spark.catalog.dropTempView(view)
    assert {r.tags: r.n for r in rows} == collections.Counter(m["tags"] for m in rocketmq.consume(topic))


def test_a_catalog_table_is_read_streamed_and_written_with_the_options_of_each_statement(
    spark, rocketmq, topic, tmp_path
):
    rocketmq.produce_bulk(topic, 200, 30, tags=["TagA", "TagB"])
    target = f"{topic}-sql"
    rocketmq.create_topic(target, queues=2)
    events, copies = _name("events"), _name("copies")
    ns = rocketmq.name_server
    spark.sql(f"CREATE TABLE {events} USING rocketmq OPTIONS (nameServer '{ns}', topic '{topic}')")
    spark.sql(f"CREATE TABLE {copies} (body BINARY, tags STRING) USING rocketmq")
    source = f"WITH ('nameServer' = '{ns}', 'topic' = '{topic}')"
    try:
        with pytest.raises(Exception, match="does not pass a catalog table's options to a Python data source"):
            spark.sql(f"SELECT count(*) FROM {events}").collect()

        java = sorted((m["brokerName"], m["queueId"], m["queueOffset"]) for m in rocketmq.consume(topic))
        rows = spark.sql(f"SELECT brokerName, queueId, queueOffset FROM {events} {source}").collect()
        assert sorted((r[0], r[1], r[2]) for r in rows) == java

        sink = Collect()
        stream = spark.sql(
            f"SELECT * FROM STREAM {events} WITH ('nameServer' = '{ns}', 'topic' = '{topic}', "
            "'startingOffsets' = 'earliest', 'maxMessagesPerTrigger' = '70')"
        )
        query = (
            stream.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the SQL stream did not end"
        assert query.exception() is None, query.exception()
        assert_exactly_once(sink, rocketmq, topic)

        spark.sql(
            f"INSERT INTO {copies} WITH ('nameServer' = '{ns}', 'topic' = '{target}') "
            f"SELECT body, 'SQL' FROM {events} {source} WHERE tags = 'TagA'"
        )
        written = rocketmq.consume(target)
        assert sorted(m["bodyBase64"] for m in written) == sorted(
            m["bodyBase64"] for m in rocketmq.consume(topic) if m["tags"] == "TagA"
        )
        assert {m["tags"] for m in written} == {"SQL"}
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {events}")
        spark.sql(f"DROP TABLE IF EXISTS {copies}")
