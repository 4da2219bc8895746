"""User-specified schemas: which projections the source accepts, and the errors for the rest."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from rmq_spark.datasource import RocketMQDataSource, _columns
from rmq_spark.options import OptionError
from rmq_spark.source.schema import COLUMNS, arrow_schema, projection


def schema(*fields) -> StructType:
    return StructType([StructField(name, t) for name, t in fields])


def test_no_schema_is_every_column():
    assert _columns(None) == COLUMNS and arrow_schema(COLUMNS).names == list(COLUMNS)


def test_a_subset_in_any_order_with_spark_types():
    got = _columns(
        schema(
            ("properties", MapType(StringType(), StringType())),
            ("body", BinaryType()),
            ("queueOffset", LongType()),
            ("keys", ArrayType(StringType())),
            ("storeTimestamp", TimestampType()),
            ("queueId", IntegerType()),
        )
    )
    assert got == ("properties", "body", "queueOffset", "keys", "storeTimestamp", "queueId")
    assert arrow_schema(got).names == list(got)


@pytest.mark.parametrize(
    "fields, words",
    [
        ([("offset", LongType())], ["no column 'offset'", "queueOffset BIGINT", "body BINARY"]),
        ([("queueoffset", LongType())], ["no column 'queueoffset'", "did you mean 'queueOffset'"]),
        ([("queueOffset", IntegerType())], ["column 'queueOffset' is BIGINT", "not INT"]),
        ([("body", StringType())], ["column 'body' is BINARY", "not STRING"]),
        ([("bornTimestamp", TimestampNTZType())], ["column 'bornTimestamp' is TIMESTAMP", "not TIMESTAMP_NTZ"]),
        ([("body", BinaryType()), ("body", BinaryType())], ["column 'body' is named twice"]),
        ([], ["has no column", "topic STRING"]),
    ],
)
def test_a_wrong_schema_names_the_column_and_lists_the_valid_ones(fields, words):
    with pytest.raises(OptionError) as e:
        _columns(schema(*fields))
    for w in words:
        assert w in str(e.value)


def test_types_compare_without_case_or_spaces():
    assert projection([("properties", "MAP<STRING,STRING>"), ("keys", "array<string>")]) == ("properties", "keys")


def _source_ddl(**options: str) -> str:
    """The schema the source gives a query that names none, as Spark asks for it (options lower-cased)."""
    given = {"nameserver": "localhost:9876", "topic": "T", **{k.lower(): v for k, v in options.items()}}
    return RocketMQDataSource(given).schema()


def test_the_default_row_leaves_properties_out():
    assert "properties" not in _source_ddl()
    assert _source_ddl(includeProperties="false") == _source_ddl()
    assert "properties" not in RocketMQDataSource({}).schema()  # a catalog table's schema: Spark passes no options


def test_include_properties_adds_the_map_as_the_last_column():
    assert _source_ddl(includeProperties="TRUE") == _source_ddl() + ", properties MAP<STRING, STRING>"


def test_include_properties_is_true_or_false():
    with pytest.raises(OptionError, match="option includeProperties must be true or false, not 'yes'"):
        _source_ddl(includeProperties="yes")


def test_a_user_schema_that_names_properties_keeps_it_without_the_option():
    got = _columns(schema(("queueOffset", LongType()), ("properties", MapType(StringType(), StringType()))))
    assert got == ("queueOffset", "properties")


def test_a_user_schema_without_properties_wins_over_the_option_with_a_warning(caplog):
    with caplog.at_level("WARNING", logger="rmq_spark.datasource"):
        assert _columns(schema(("body", BinaryType())), include_properties=True) == ("body",)
    assert "option includeProperties=true is ignored" in caplog.text and "properties MAP<STRING, STRING>" in caplog.text
