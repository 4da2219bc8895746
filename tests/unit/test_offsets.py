"""Offset JSON and range splitting."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmq_spark.client.errors import BrokerUnavailableError
from rmq_spark.client.model import MessageQueue
from rmq_spark.options import OptionError, parse_options
from rmq_spark.source.offset_specs import ByTimestamp, Committed, Edge, SpecificOffsets, check_named, entering_spec
from rmq_spark.source.offsets import (
    QueueRange,
    canonical_json,
    offsets_from_json,
    offsets_to_json,
    recorded_start,
    recorded_start_time,
)
from rmq_spark.source.range_calculator import group_ranges, plan_partitions, split_ranges


def mq(b, q, t="T"):
    return MessageQueue(t, b, q)


def test_canonical_json_is_order_independent_and_sorted_numerically():
    a = {mq("broker-b", 10): 5, mq("broker-a", 2): 1, mq("broker-a", 10): 3, mq("x", 0, "A"): 9}
    b = dict(reversed(list(a.items())))
    assert canonical_json(a) == canonical_json(b)
    assert list(json.loads(canonical_json(a))) == ["A", "T"]
    assert list(json.loads(canonical_json(a))["T"]) == ["broker-a/2", "broker-a/10", "broker-b/10"]
    assert offsets_from_json(canonical_json(a)) == a


def test_an_end_records_its_batch_start_which_every_other_reader_skips():
    start, end = {mq("broker-a", 0): 3, mq("broker-b", 1): 7}, {mq("broker-a", 0): 9, mq("broker-b", 1): 7}
    text = json.dumps(offsets_to_json(end, start=start))
    assert recorded_start(text) == start
    assert offsets_from_json(text) == end
    assert recorded_start(json.dumps(offsets_to_json(end))) is None
    # offsets copied from a checkpoint's first batch into startingOffsets
    options = parse_options({"nameServer": "ns:9876", "topic": "T", "startingOffsets": text})
    assert options.starting.offsets == end


def test_one_partition_per_nonempty_queue_by_default():
    ranges = [QueueRange(mq("a", 0), 0, 10), QueueRange(mq("a", 1), 5, 5), QueueRange(mq("b", 0), 3, 4)]
    assert split_ranges(ranges) == [ranges[0], ranges[2]]


def test_max_per_partition_and_min_partitions():
    r = QueueRange(mq("a", 0), 0, 100)
    assert split_ranges([r], max_per_partition=30) == [
        QueueRange(r.queue, 0, 25),
        QueueRange(r.queue, 25, 50),
        QueueRange(r.queue, 50, 75),
        QueueRange(r.queue, 75, 100),
    ]
    small, big = QueueRange(mq("a", 1), 0, 10), QueueRange(mq("b", 0), 0, 90)
    parts = split_ranges([small, big], min_partitions=10)
    assert sum(1 for p in parts if p.queue == big.queue) == 9 and sum(1 for p in parts if p.queue == small.queue) == 1


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 500)), min_size=1, max_size=8),
    st.one_of(st.none(), st.integers(1, 50)),
    st.one_of(st.none(), st.integers(1, 200)),
)
def test_splitting_covers_every_offset_exactly_once(spans, min_parts, max_per):
    ranges = [QueueRange(mq("b", i), s, s + n) for i, (s, n) in enumerate(spans)]
    parts = split_ranges(ranges, min_partitions=min_parts, max_per_partition=max_per)
    covered = sorted((p.queue, o) for p in parts for o in range(p.start, p.end))
    assert covered == sorted((r.queue, o) for r in ranges for o in range(r.start, r.end))
    assert all(p.size > 0 for p in parts)
    if max_per:
        assert all(p.size <= max_per for p in parts)


def test_a_task_pickles_to_its_ranges_in_order_with_this_process_queues():
    import pickle

    from rmq_spark.source.batch import RangePartition

    ranges = (
        QueueRange(mq("b", 2), 5, 9),
        QueueRange(mq("a", 10, "C"), 0, 3, sparse=True),
        QueueRange(mq("a", 2), 7, 8),
    )
    task = pickle.loads(pickle.dumps(RangePartition(ranges)))
    assert task == RangePartition(ranges) and [r.sparse for r in task.ranges] == [False, True, False]
    assert task.ranges[1].queue is mq("a", 10, "C")
    # split in QueueRange's order: topic, broker, queue id (numerically), offsets
    assert split_ranges(list(ranges)) == [ranges[1], ranges[2], ranges[0]] == sorted(ranges)


def test_small_parts_are_read_together_large_ones_alone():
    small = [QueueRange(mq("a", i), 0, 300) for i in range(5)]
    large = QueueRange(mq("b", 0), 0, 5000)
    tasks = group_ranges([*small[:2], large, *small[2:]], min_per_partition=1000)
    assert tasks == [(large,), (small[0], small[1], small[2], small[3]), (small[4],)]
    assert group_ranges(small, min_per_partition=1000, max_per_partition=700) == [
        (small[0], small[1]),
        (small[2], small[3]),
        (small[4],),
    ]
    assert group_ranges(small, min_per_partition=0) == [(r,) for r in small]


def test_min_partitions_is_never_undone_by_grouping():
    ranges = [QueueRange(mq("a", i), 0, 10) for i in range(4)]
    assert plan_partitions(ranges, min_partitions=8, max_per_partition=None, min_per_partition=1000) == [
        (p,) for p in split_ranges(ranges, min_partitions=8)
    ]
    assert plan_partitions(ranges, min_partitions=None, max_per_partition=None, min_per_partition=1000) == [
        tuple(ranges)
    ]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 500)), min_size=1, max_size=8),
    st.one_of(st.none(), st.integers(1, 200)),
    st.integers(0, 600),
)
def test_grouping_keeps_every_part_once_in_order_within_the_limits(spans, max_per, min_per):
    ranges = [QueueRange(mq("b", i), s, s + n) for i, (s, n) in enumerate(spans)]
    parts = split_ranges(ranges, max_per_partition=max_per)
    tasks = plan_partitions(ranges, min_partitions=None, max_per_partition=max_per, min_per_partition=min_per)
    assert sorted(p for task in tasks for p in task) == sorted(parts)
    for task in tasks:
        assert list(task) == sorted(task)  # a task reads its parts in the planned order
        size = sum(p.size for p in task)
        if len(task) > 1:
            assert all(p.size < min_per for p in task) and sum(p.size for p in task[:-1]) < min_per
            assert not max_per or size <= max_per


def test_a_queue_pickled_into_another_process_hashes_there_as_that_process_builds_it():
    import copy
    import dataclasses
    import os
    import pickle
    import subprocess
    import sys

    from rmq_spark.client.model import queue_of

    a = mq("broker-a", 3)
    # one object per queue, however it is made (the driver's maps hash and compare by identity)
    assert queue_of("T", "broker-a", 3) is MessageQueue("T", "broker-a", 3) is a
    assert MessageQueue(topic="T", broker_name="broker-a", queue_id=3) is a
    assert pickle.loads(pickle.dumps(a)) is a and copy.deepcopy(a) is a and copy.copy(a) is a
    assert dataclasses.replace(mq("broker-a", 4), queue_id=3) is a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.queue_id = 4  # type: ignore[misc]
    check = (
        "import pickle, sys; from rmq_spark.client.model import MessageQueue as M; "
        "q = pickle.loads(sys.stdin.buffer.read()); "
        "assert q is M('T', 'broker-a', 3) and {M('T', 'broker-a', 3): 1}[q] == 1, q"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", check], input=pickle.dumps({a: 7}.popitem()[0]), env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()
    assert (
        a != ("T", "broker-a", 3) and a < mq("broker-a", 4) and sorted([mq("broker-c", 0), a]) == [a, mq("broker-c", 0)]
    )


def test_named_queues_are_checked_against_the_routes_and_a_batch_does_not_wait_for_an_away_broker_group():
    queues = [MessageQueue("T", "broker-a", i) for i in range(2)]
    spec = parse_options(
        {"nameServer": "n:9876", "topic": "T", "startingOffsets": json.dumps({"T": {"broker-a/1": 3, "broker-b/0": 5}})}
    ).starting
    away = (
        "option startingOffsets names queue broker-b/0 of topic 'T', whose broker group is not in the topic's route now"
    )
    assert [note.startswith(away) for note in check_named(spec, queues, waits=True)] == [True]  # a stream waits
    with pytest.raises(
        BrokerUnavailableError,
        match=away + r" \(it has broker-a\): check the name; if that broker "
        "group is stopped or restarting, read when it is back",
    ):
        check_named(spec, queues, waits=False)
    missing = parse_options(
        {"nameServer": "n:9876", "topic": "T", "startingOffsetsByTimestamp": json.dumps({"T": {"broker-a/2": 1}})}
    ).starting
    with pytest.raises(OptionError, match="names queue broker-a/2 of topic 'T', which does not exist"):
        check_named(missing, queues, waits=True)
    other = parse_options({"nameServer": "n:9876", "topic": "T", "startingOffsets": '{"U": {"broker-a/0": 1}}'})
    with pytest.raises(OptionError, match="names topic 'U', which this query does not read"):
        check_named(other.starting, queues, waits=True)


def test_a_queue_entering_a_stream_late_starts_where_the_start_options_name_it():
    named = parse_options(
        {"nameServer": "n:9876", "topic": "T", "startingOffsets": '{"T": {"broker-b/0": 5}}'}, streaming=True
    ).starting
    assert entering_spec(named) == SpecificOffsets("startingOffsets", named.offsets, Edge.EARLIEST)
    committed = parse_options(
        {
            "nameServer": "n:9876",
            "topic": "T",
            "startingOffsets": "committed",
            "consumerGroup": "g",
            "startingOffsetsFallback": "latest",
        },
        streaming=True,
    ).starting
    assert entering_spec(committed) == Committed("g", Edge.LATEST)
    assert entering_spec(Edge.LATEST) is Edge.EARLIEST


def test_offsets_copied_from_a_query_progress_skip_its_skipped_counts():
    end = {mq("broker-a", 0): 9}
    reported = {**offsets_to_json(end), "$skipped": {"T": {"broker-a/0": 40}}}  # reportLatestOffset's latestOffset
    assert offsets_from_json(json.dumps(reported)) == end
    options = parse_options({"nameServer": "ns:9876", "topic": "T", "startingOffsets": json.dumps(reported)})
    assert options.starting.offsets == end


def test_the_json_of_offsets_follows_their_queues_whichever_sets_came_before():
    """The canonical order is laid out once per set of queues: a set seen before, a set of the same size, and a set
    within another must each serialize as sorting them afresh does."""
    a0, a1, b0 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 10), MessageQueue("T", "broker-b", 2)
    c5 = MessageQueue("S", "broker-a", 5)
    sets = ({a1: 1, a0: 2, b0: 3}, {a0: 4, a1: 5, b0: 6}, {a0: 7, a1: 8, c5: 9}, {b0: 1}, {a1: 2, a0: 3, b0: 4})
    for offsets in sets:
        expected: dict[str, dict] = {}
        for mq in sorted(offsets, key=lambda mq: (mq.topic, mq.broker_name, mq.queue_id)):
            expected.setdefault(mq.topic, {})[mq.key] = offsets[mq]
        out = offsets_to_json(offsets)
        assert json.dumps(out) == json.dumps(expected)
        assert offsets_from_json(json.dumps(out)) == offsets


def test_a_latest_stream_carries_its_start_time_and_enters_queues_there():
    mq = MessageQueue("T", "broker-a", 0)
    carried = offsets_to_json({mq: 3}, start_time=1_700_000_000_000)
    assert offsets_from_json(carried) == {mq: 3} and recorded_start_time(carried) == 1_700_000_000_000
    assert recorded_start_time(offsets_to_json({mq: 3})) is None  # offsets of a release before it
    assert entering_spec(Edge.LATEST, 1_700_000_000_000) == ByTimestamp("startingOffsets", timestamp=1_700_000_000_000)
    assert entering_spec(Edge.LATEST, None) is Edge.EARLIEST
