"""QueueAccess's one answer per queue of a batch's start, against the scripted cluster of test_stream_queues: where
each queue ends and whether it may be read there now (docs/DESIGN.md §10)."""

from __future__ import annotations

from rmq_spark.source.offsets import offsets_from_json
from rmq_spark.source.queue_access import Access, QueueEnd
from tests.unit.test_stream_queues import ALL, _Cluster, _reader, mq


def _started(cluster: _Cluster, **options: str):
    reader = _reader(cluster, **options)
    begin = offsets_from_json(reader.latestOffset(reader.initialOffset(), ALL))
    return reader, begin


def test_every_queue_whose_master_answered_is_readable_to_its_end():
    cluster = _Cluster({"broker-a": 2}, {mq(0): 5, mq(1): 5})
    reader, begin = _started(cluster)
    cluster.ends[mq(1)] = 9
    reader.watch.poll(force=True)
    ends = reader.access.ends(begin)
    assert not ends.barred and not ends.unavailable
    assert dict(ends) == {mq(0): QueueEnd(5, Access.READABLE), mq(1): QueueEnd(9, Access.READABLE)}


def test_queues_that_left_the_route_are_drained_or_gone_as_their_master_answers():
    cluster = _Cluster({"broker-a": 4}, {mq(i): 5 for i in range(4)})
    reader, begin = _started(cluster, failOnDataLoss="false")
    cluster.queues_of["broker-a"] = 2  # the topic shrank
    cluster.ends[mq(3)] = 7  # two messages of queue 3 the query has not read
    reader.watch.poll(force=True)
    ends = reader.access.ends(begin)
    assert ends.barred == {mq(2): Access.DRAINED, mq(3): Access.GONE}
    assert ends[mq(0)].access is Access.READABLE
    left = {q: o for q, o in begin.items() if q != mq(3)}  # the next start, without the gone queue
    assert reader.access.ends(left).barred == {mq(2): Access.DRAINED}  # the verdict stands


def test_a_slave_behind_the_querys_offset_is_waited_for_and_a_queue_nobody_answers_is_unavailable():
    cluster = _Cluster({"broker-a": 2}, {mq(0): 5, mq(1): 5})
    reader, begin = _started(cluster)
    cluster.slave_ends = {mq(0): 3}  # the master is away; a slave answers queue 0 behind the query, nobody queue 1
    reader.watch.poll(force=True)
    ends = reader.access.ends(begin)
    assert ends[mq(0)] == QueueEnd(3, Access.SLAVE_BEHIND)
    assert ends[mq(1)] == QueueEnd(5, Access.UNAVAILABLE) and ends.unavailable == {mq(1)}
