"""Admission control of a micro-batch (rmq_spark/source/admission.py): per-trigger limits and AvailableNow's cap,
pure functions of offsets, limit and time waited."""

from __future__ import annotations

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from rmq_spark.client.model import MessageQueue
from rmq_spark.source.admission import TriggerLimits, admit, capped, prorate

A, B, C = (MessageQueue("T", "broker-a", i) for i in range(3))


def test_prorate_shares_the_limit_by_backlog_and_moves_every_queue_with_a_backlog():
    end = prorate({A: 0, B: 0, C: 0}, {A: 900, B: 99, C: 1}, 100)
    assert end == {A: 90, B: 9, C: 1}
    assert sum(end.values()) <= 100 + 3


def test_prorate_reads_everything_under_the_limit():
    assert prorate({A: 5, B: 0}, {A: 10, B: 3}, 100) == {A: 10, B: 3}


def test_all_available_admits_the_targets():
    assert admit(
        {A: 0}, {A: 1_000}, ReadAllAvailable(), TriggerLimits(max_messages=10), waited_ms=0, available_now=False
    ) == {A: 1_000}


def test_a_max_rows_limit_caps_the_batch():
    end = admit({A: 0, B: 0}, {A: 50, B: 50}, ReadMaxRows(10), TriggerLimits(), waited_ms=0, available_now=False)
    assert end == {A: 5, B: 5}


def test_a_minimum_waits_until_the_delay_passed():
    limits = TriggerLimits(min_messages=100, max_delay_ms=1_000)
    begin, target = {A: 0, B: 7}, {A: 10, B: 17}
    assert admit(begin, target, ReadMinRows(100), limits, waited_ms=10, available_now=False) == begin
    assert admit(begin, target, ReadMinRows(100), limits, waited_ms=1_000, available_now=False) == target
    assert admit(begin, target, ReadMinRows(100), limits, waited_ms=10, available_now=True) == target
    assert admit(begin, {A: 100, B: 7}, ReadMinRows(100), limits, waited_ms=10, available_now=False) == {A: 100, B: 7}


def test_a_minimum_with_a_maximum_still_caps_once_admitted():
    limits = TriggerLimits(max_messages=10, min_messages=5, max_delay_ms=60_000)
    assert admit({A: 0}, {A: 40}, ReadMinRows(5), limits, waited_ms=0, available_now=False) == {A: 10}


def test_a_reset_queue_passes_through_below_its_start():
    end = admit({A: 50, B: 0}, {A: 3, B: 40}, ReadMaxRows(10), TriggerLimits(), waited_ms=0, available_now=False)
    assert end == {A: 3, B: 10}


def test_available_now_reads_to_its_cap_and_no_further():
    assert capped(latest=100, begin=10, cap=60) == 60
    assert capped(latest=40, begin=10, cap=60) == 40
    assert capped(latest=100, begin=10, cap=10) == 10  # a queue the trigger did not see stays put
    assert capped(latest=5, begin=10, cap=60) == 5  # reset: passes as is, for the data-loss rule
