"""The property an exactly-once streaming write keys its rows by is the sink's own: a row's ``properties`` never set
it, as they never set RocketMQ's reserved properties, so a row read from a topic such a write filled and written
again carries no key a recovery of that producer group could take for one of its own."""

from __future__ import annotations

from pyspark.sql.types import MapType, StringType, StructField, StructType

from rmq_spark.sink.row_keys import ROW_KEY_PROPERTY

SCHEMA = StructType([StructField("body", StringType()), StructField("properties", MapType(StringType(), StringType()))])


def test_a_rows_row_key_property_is_not_written(spark, rocketmq, topic):
    rows = [(f"r{i}", {ROW_KEY_PROPERTY: f"pg/{i}/00ff", "n": str(i)}) for i in range(4)]
    (
        spark.createDataFrame(rows, SCHEMA)
        .write.format("rocketmq")
        .mode("append")
        .option("nameServer", rocketmq.name_server)
        .option("topic", topic)
        .option("brokerRetryTimeoutMs", "60000")
        .save()
    )
    stored = rocketmq.consume(topic)
    assert sorted(m["properties"]["n"] for m in stored) == ["0", "1", "2", "3"]
    assert [m["properties"][ROW_KEY_PROPERTY] for m in stored if ROW_KEY_PROPERTY in m["properties"]] == []
