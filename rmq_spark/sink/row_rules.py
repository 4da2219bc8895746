"""The rules each row of a write must keep, checked per Arrow batch before any of its rows is sent. A batch that
breaks one fails its task with an ``InvalidRowError`` that counts the rows of the whole Spark partition breaking it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from rmq_spark.errors import InvalidRowError


@dataclass(frozen=True)
class RowRule:
    """A rule rows must keep: ``bad`` counts the rows of a batch that break it, ``problem`` says what such a row
    has, ``fix`` what to do about it."""

    problem: str
    fix: str
    bad: Callable[[pa.RecordBatch], int]


def counter(column: str, *, null: bool) -> Callable[[pa.RecordBatch], int]:
    """Counts the rows of a batch without (``null``) or with a value in ``column``; none when the batch has no such
    column."""

    def count(batch: pa.RecordBatch) -> int:
        i = batch.schema.get_field_index(column)
        if i < 0:
            return 0
        nulls = batch.column(i).null_count
        return nulls if null else len(batch) - nulls

    return count


NULL_BODY = RowRule(
    "a null body",
    "every message needs one (filter the nulls or coalesce them to an empty value)",
    counter("body", null=True),
)
NULL_TOPIC = RowRule("a null topic", "fill it, or drop the column and set option topic", counter("topic", null=True))
# the rules of every write, before those of its mode
COLUMN_RULES = (NULL_BODY, NULL_TOPIC)


def check_rows(batch: pa.RecordBatch, rest: Iterator[pa.RecordBatch], rules: Sequence[RowRule], partition: int) -> None:
    """InvalidRowError for the first rule ``batch`` breaks, with the count of the rows breaking it in ``batch`` and
    the partition's batches still to come (``rest``, read to its end then: the task fails anyway)."""
    for rule in rules:
        bad = rule.bad(batch)
        if bad:
            raise InvalidRowError(rule.problem, rule.fix, partition, bad + sum(rule.bad(b) for b in rest))
