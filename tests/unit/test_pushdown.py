"""The pushdown of Spark's filters into a narrower plan, without a broker."""

from __future__ import annotations

from pyspark.sql.datasource import EqualTo, GreaterThan, Not, StringStartsWith

from rmq_spark.options import parse_options
from rmq_spark.source.pushdown import push

OPTIONS = parse_options({"nameServer": "127.0.0.1:9876", "topic": "T"})


def test_a_filter_without_an_attribute_is_left_to_spark():
    negated = Not(EqualTo(("queueId",), 1))
    narrowing, rest = push([negated, EqualTo(("queueId",), 2)], OPTIONS)
    assert rest == [negated]
    assert narrowing.queue_ids == frozenset({2})


def test_filters_it_cannot_narrow_by_are_left_to_spark():
    kept = [StringStartsWith(("topic",), "T"), GreaterThan(("queueId",), 1), EqualTo(("body",), b"x")]
    narrowing, rest = push(kept, OPTIONS)
    assert rest == kept and narrowing.queue_ids is None and narrowing.topics is None
