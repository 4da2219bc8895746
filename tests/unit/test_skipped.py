"""The driver's count of messages a stream skipped under failOnDataLoss=false (rmq_spark/source/skipped.py)."""

from __future__ import annotations

from rmq_spark.client.model import MessageQueue
from rmq_spark.source.offsets import QueueRange
from rmq_spark.source.skipped import SkippedMessages

A = MessageQueue("T", "broker-a", 0)
LOGIC = MessageQueue("T", "__syslo__global__", 0)


def test_offsets_before_the_planned_start_are_counted():
    skipped = SkippedMessages()
    assert skipped.count({A: 0}, {A: 10}, [QueueRange(A, 4, 10)]) == 4
    assert skipped.count({A: 10}, {A: 20}, []) == 10  # all of its range was deleted


def test_a_remapped_logic_queues_gaps_are_not_skipped_messages():
    skipped = SkippedMessages()
    # [0, 10) planned as [0, 3) and [7, 10) around the gap [3, 7): nothing skipped
    assert (
        skipped.count({LOGIC: 0}, {LOGIC: 10}, [QueueRange(LOGIC, 0, 3), QueueRange(LOGIC, 7, 10)], {LOGIC: [(3, 7)]})
        == 0
    )
    # [10, 30) with [10, 12) deleted and the gap [12, 20): two skipped
    assert skipped.count({LOGIC: 10}, {LOGIC: 30}, [QueueRange(LOGIC, 20, 30)], {LOGIC: [(12, 20)]}) == 2
    assert skipped.report() == {"$skipped": {"T": {"__syslo__global__/0": 2}}}
