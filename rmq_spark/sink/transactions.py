"""Exactly-once writes: ending half messages on the driver, and the commit marker that makes a streaming batch's
commit happen once across driver crashes.

A streaming commit of batch N runs in three steps, each recorded on the broker before the next:

1. *started(N)*: each target queue's end offset is stored under the query's scan group (the point a recovery
   scans from), then the marker (the marker group's offset on the marker queue) becomes ``2N + 1``;
2. the halves are committed, each queue's in row order;
3. *done(N)*: the marker becomes ``2N + 2``.

A commit of N that finds done(N) is a replay after a crash between step 3 and Spark's own commit log: its new halves
are rolled back. One that finds started(N) follows a crash inside step 2, which may have committed part of the
first attempt: the committed messages are read back from the stored offsets, and only the new halves whose row key
is not among them are committed. A row key names the micro-batch, the task's partition and the row's content (with
a count for identical rows), so it holds when a replayed partition yields the same rows, in any order, and never
matches a row of another batch.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Iterable, Sequence

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import BrokerBusyError, RETRYABLE, RocketMQError
from rmq_spark.client.model import PROPERTY_UNIQ_KEY, HalfMessage, MessageQueue, OutgoingMessage
from rmq_spark.sink.retry import Retries

ROW_KEY_PROPERTY = "rmqSparkRow"
MARKER_SUFFIX = "_commits"  # the marker group: producerGroup + this
SCAN_SUFFIX = "_commit_scan"  # the group holding where a recovery scans each target queue from


class CommitError(RocketMQError):
    """Ending a batch's half messages did not finish: some may be committed. Restarting the query completes the
    batch exactly once (streaming); a batch write must be checked."""


def batch_prefix(group: str, batch_id: int) -> str:
    """The start of the row keys of micro-batch ``batch_id`` written under producer group ``group``."""
    return f"{group}/{batch_id}/"


class RowKeys:
    """Row keys of one task: micro-batch, partition, content digest and the count of identical rows before this
    one."""

    def __init__(self, group: str, batch_id: int, partition: int) -> None:
        self._prefix = f"{batch_prefix(group, batch_id)}{partition}/"
        self._seen: dict[str, int] = defaultdict(int)

    def key(self, topic: str, m: OutgoingMessage) -> str:
        h = hashlib.blake2b(digest_size=12)
        for part in (topic, m.tags or "", " ".join(m.keys), str(m.flag), str(m.deliver_time_ms)):
            h.update(part.encode("utf-8"))
            h.update(b"\0")
        for k in sorted(m.properties):
            if k not in (PROPERTY_UNIQ_KEY, ROW_KEY_PROPERTY):
                h.update(f"{k}\x01{m.properties[k]}\x02".encode("utf-8"))
        h.update(m.body)
        digest = h.hexdigest()
        n = self._seen[digest]
        self._seen[digest] = n + 1
        return f"{self._prefix}{digest}/{n}"


def end_halves(client: BaseClient, halves: Sequence[HalfMessage], *, commit: bool, group: str,
               retry_timeout: float) -> None:
    """Commit or roll back ``halves``: the queues in parallel, each queue's halves one at a time in order (the broker
    ends transactions on a thread pool, so two in flight for one queue could land out of order). A request that
    could not be sent (the broker is away: restarting, not in the route), a broker that asked to back off, and any
    failed rollback are asked again with backoff for up to ``retry_timeout`` seconds; a commit that was sent and
    failed raises CommitError, since a commit whose answer was lost may have been applied and must not be sent
    twice."""
    per_queue: dict[MessageQueue, list[HalfMessage]] = defaultdict(list)
    for h in halves:
        per_queue[h.queue].append(h)
    position = {mq: 0 for mq in per_queue}
    retries = {mq: Retries(retry_timeout) for mq in per_queue}
    while position:
        calls = []
        for mq, i in position.items():
            half = per_queue[mq][i]
            try:
                calls.append((mq, client.end_transaction_async(half, commit=commit, group=group)))
            except RETRYABLE as e:
                calls.append((mq, e))
        for mq, call in calls:
            try:
                if isinstance(call, Exception):
                    raise call
                call.result()
            except RETRYABLE as e:
                done_here = f"{position[mq]} of {len(per_queue[mq])}"
                if commit and not isinstance(call, Exception) and not isinstance(e, BrokerBusyError):
                    raise CommitError(f"committing the half messages for {mq} stopped at {done_here}: {e}",
                                      code=e.code, remark=e.remark) from e
                retries[mq].wait(e, f"ending the half messages for {mq} (stopped at {done_here})")
                continue
            retries[mq].reset()
            position[mq] += 1
            if position[mq] == len(per_queue[mq]):
                del position[mq]


def started(batch_id: int) -> int:
    return 2 * batch_id + 1


def done(batch_id: int) -> int:
    return 2 * batch_id + 2


class CommitMarker:
    """The commit state of one streaming query, kept on the broker as consumer offsets: the marker as the offset of
    group ``producerGroup + "_commits"`` on ``marker_queue``, and where a recovery scans each target queue from as
    the offsets of group ``producerGroup + "_commit_scan"`` (two groups, as the marker queue is a target too)."""

    def __init__(self, client: BaseClient, producer_group: str, marker_queue: MessageQueue) -> None:
        self.client = client
        self.producer_group = producer_group
        self.group = producer_group + MARKER_SUFFIX
        self.scan_group = producer_group + SCAN_SUFFIX
        self.marker_queue = marker_queue

    def read(self) -> int | None:
        return self.client.query_consumer_offsets(self.group, [self.marker_queue])[self.marker_queue]

    def write(self, value: int) -> None:
        self.client.update_consumer_offsets(self.group, {self.marker_queue: value})

    def record_starts(self, queues: Iterable[MessageQueue]) -> None:
        queues = sorted(set(queues))
        self.client.update_consumer_offsets(self.scan_group, dict(self.client.max_offsets(queues)))

    def committed_rows(self, batch_id: int, queues: Iterable[MessageQueue]) -> set[str]:
        """The row keys of batch ``batch_id`` stored in ``queues`` since their recorded starts."""
        queues = sorted(set(queues))
        starts = self.client.query_consumer_offsets(self.scan_group, queues)
        ends = self.client.max_offsets([mq for mq in queues if starts.get(mq) is not None])
        prefix = batch_prefix(self.producer_group, batch_id)
        keys = set()
        for mq, end in ends.items():
            for m in self.client.read_range(mq, starts[mq], end):
                key = m.properties.get(ROW_KEY_PROPERTY)
                if key and key.startswith(prefix):
                    keys.add(key)
        return keys


def commit_batch(marker: CommitMarker, batch_id: int, halves: Sequence[tuple[str, HalfMessage]],
                 target_queues: Iterable[MessageQueue], group: str, retry_timeout: float) -> str:
    """Commit streaming batch ``batch_id`` exactly once; answers what happened: committed, replayed (already
    committed: the halves were rolled back) or recovered (part had been committed by an earlier attempt). A broker
    that is away is waited for up to ``retry_timeout`` seconds (``end_halves``)."""
    state = marker.read()
    handles = [h for _, h in halves]
    if state is not None and state > done(batch_id):
        raise CommitError(f"the commit marker of producer group {group!r} (group {marker.group!r} on "
                          f"{marker.marker_queue}) is at batch {(state - 1) // 2}, past this query's batch {batch_id}: "
                          "another query uses this producerGroup. Give each exactly_once query its own "
                          "producerGroup, kept across restarts")
    if state is not None and state >= done(batch_id):
        end_halves(marker.client, handles, commit=False, group=group, retry_timeout=retry_timeout)
        return "replayed"
    outcome = "committed"
    if state == started(batch_id):
        already = marker.committed_rows(batch_id, target_queues)
        end_halves(marker.client, [h for key, h in halves if key in already], commit=False, group=group,
                   retry_timeout=retry_timeout)
        handles = [h for key, h in halves if key not in already]
        outcome = "recovered"
    else:
        marker.record_starts(target_queues)
        marker.write(started(batch_id))
    end_halves(marker.client, handles, commit=True, group=group, retry_timeout=retry_timeout)
    marker.write(done(batch_id))
    return outcome
