"""Exactly-once writes: ending half messages on the driver, and the commit of a streaming batch that happens once
across driver crashes, broker crashes and broker outages, by its commit records (``rmq_spark.sink.commit_records``).

A streaming commit of batch N: *started(N)* (the pairs it writes to, where their queues end now), the halves are
committed, each queue's in row order, then *done(N)*. A commit of N that finds done(N) is a replay after a crash
between the last step and Spark's own commit log: its new halves are rolled back. One that finds started(N) follows a
crash while halves were committed: every pair of the record must answer (else it waits up to brokerRetryTimeoutMs,
then fails: a restart completes the batch), pairs the replay writes to and the record does not name are added to it
first, the messages stored since the scan starts are read back, and of each row key only as many halves are committed
as the replay has more of them than are stored (``rmq_spark.sink.row_keys``: keys name the content, not the task, so
any partitioning of the replay recovers the same rows).
"""

from __future__ import annotations

import enum
import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TypeVar

from rmq_spark.client.base import BaseClient, Call
from rmq_spark.client.errors import RETRYABLE, BrokerBusyError
from rmq_spark.client.model import HalfMessage, MessageQueue
from rmq_spark.sink.commit_records import CommitError, CommitRecords, Step, pairs_of
from rmq_spark.sink.retry import Retries

log = logging.getLogger(__name__)
T = TypeVar("T")


class Outcome(enum.Enum):
    """What the commit of a streaming batch did."""

    COMMITTED = "committed"
    REPLAYED = "replayed"  # already committed: the halves were rolled back
    RECOVERED = "recovered"  # part had been committed by an attempt cut by a crash


def end_halves(
    client: BaseClient, halves: Sequence[HalfMessage], *, commit: bool, group: str, retry_timeout: float
) -> None:
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
        calls: list[tuple[MessageQueue, Call | Exception]] = []
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
                    raise CommitError(
                        f"committing the half messages for {mq} stopped at {done_here}: {e}",
                        code=e.code,
                        remark=e.remark,
                    ) from e
                retries[mq].wait(e, f"ending the half messages for {mq} (stopped at {done_here})")
                continue
            retries[mq].reset()
            position[mq] += 1
            if position[mq] == len(per_queue[mq]):
                del position[mq]


def patiently(what: str, step: Callable[[], T], retry_timeout: float) -> T:
    """``step()``, tried again with backoff while a broker is away or busy, for up to ``retry_timeout`` seconds;
    then CommitError (a restart of the query completes the batch once the broker is back)."""
    retries = Retries(retry_timeout)
    while True:
        try:
            return step()
        except RETRYABLE as e:
            try:
                retries.wait(e, what)
            except RETRYABLE as late:
                raise CommitError(
                    f"{late}. Restarting the query completes the batch exactly once when the broker is back",
                    code=late.code,
                    remark=late.remark,
                ) from e


def commit_batch(
    records: CommitRecords, batch_id: int, halves: Sequence[tuple[str, HalfMessage]], retry_timeout: float
) -> Outcome:
    """Commit streaming batch ``batch_id`` (its halves with their row keys) exactly once. A broker that is away is
    waited for up to ``retry_timeout`` seconds."""
    group = records.producer_group
    handles = [h for _, h in halves]
    pairs = pairs_of(h.queue for h in handles)
    topics = {t for t, _ in pairs}
    home, last = patiently(
        f"finding the commit records of batch {batch_id}", lambda: records.locate(topics), retry_timeout
    )
    if last is not None and last.batch > batch_id:
        raise CommitError(
            f"the commit records of producer group {group!r} (topic {records.records_topic!r} on "
            f"{home}) are at batch {last.batch}, past this query's batch {batch_id}: another query uses "
            "this producerGroup. Give each exactly_once query its own producerGroup, kept across "
            "restarts"
        )
    if last is not None and last.batch == batch_id and last.step is Step.DONE:
        end_halves(records.client, handles, commit=False, group=group, retry_timeout=retry_timeout)
        return Outcome.REPLAYED
    if last is not None and last.batch == batch_id:
        if not last.pairs:
            raise CommitError(
                f"batch {batch_id} of producer group {group!r} was cut by a crash while an earlier "
                "rmq-spark release committed it, whose records this release cannot read back: restart "
                "the query once with that release to complete the batch, then upgrade"
            )
        record = last
        new = pairs - record.pairs
        if new:
            record = patiently(
                f"recording the new targets of batch {batch_id}", lambda: records.extend(home, last, new), retry_timeout
            )
        stored = patiently(
            f"reading back the rows of batch {batch_id}", lambda: records.committed_rows(record), retry_timeout
        )
        handles, stored_again = [], []
        for key, h in halves:
            if stored[key] > 0:
                stored[key] -= 1
                stored_again.append(h)
            else:
                handles.append(h)
        end_halves(records.client, stored_again, commit=False, group=group, retry_timeout=retry_timeout)
        outcome = Outcome.RECOVERED
    else:
        patiently(
            f"starting the commit of batch {batch_id}", lambda: records.begin(home, batch_id, pairs), retry_timeout
        )
        outcome = Outcome.COMMITTED
    end_halves(records.client, handles, commit=True, group=group, retry_timeout=retry_timeout)
    patiently(f"marking batch {batch_id} committed", lambda: records.finish(home, batch_id), retry_timeout)
    return outcome
