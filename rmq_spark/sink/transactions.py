"""Exactly-once writes: ending half messages on the driver, and the commit of a streaming batch that happens once
across driver crashes, broker crashes and broker outages, by its commit records (``rmq_spark.sink.commit_records``).
docs/DESIGN.md §11 states the protocol as a state machine, with what each crash point leaves and what the next run
does; ``judge`` is its decision table."""

from __future__ import annotations

import enum
import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TypeVar

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import RETRYABLE, BrokerBusyError, RocketMQError, TopicNotFoundError
from rmq_spark.client.model import HalfMessage, MessageQueue
from rmq_spark.client.remoting.client import DirectSends, RemotingClient
from rmq_spark.client.transport import Call
from rmq_spark.errors import CommitError
from rmq_spark.sink.commit_log import CommitRecord, CommitStep, records_topic
from rmq_spark.sink.commit_records import CommitRecords, pairs_of
from rmq_spark.sink.pause_points import CommitPoint, reach
from rmq_spark.sink.retry import Retries
from rmq_spark.sink.row_keys import content_of, rows_digest

log = logging.getLogger(__name__)
T = TypeVar("T")

# What a commit waits out: a broker away or busy, and a route the name servers do not have now (a one-group cluster
# whose broker restarts, a name server restarted before the brokers registered again)
_WAITED = (*RETRYABLE, TopicNotFoundError)


class Outcome(enum.Enum):
    """What the commit of a streaming batch did."""

    COMMITTED = "committed"
    EMPTY = "empty"  # no rows: nothing to commit
    REPLAYED = "replayed"  # already committed: the halves were rolled back
    RECOVERED = "recovered"  # part had been committed by an attempt cut by a crash


class Action(enum.Enum):
    """What a commit does, given the last record."""

    BEGIN = "begin"  # no commit of this batch began
    ROLL_BACK = "roll back"  # the batch is committed: this is a replay
    RECOVER = "recover"  # the batch's commit was cut: commit what is missing


def _restart_completes(late: RocketMQError) -> CommitError:
    """The CommitError of a commit step that waited out ``brokerRetryTimeoutMs`` for a broker (``late``)."""
    return CommitError(
        f"{late}. Restarting the query completes the batch exactly once when the broker is back",
        code=late.code,
        remark=late.remark,
    )


def end_halves(
    client: BaseClient,
    halves: Sequence[HalfMessage],
    *,
    commit: bool,
    group: str,
    retry_timeout: float,
    midway: Callable[[], None] | None = None,
) -> None:
    """Commit or roll back ``halves``: the queues in parallel, each queue's halves one at a time in order (the broker
    ends transactions on a thread pool, so two in flight for one queue could land out of order). A request that
    could not be sent (the broker is away: restarting, not in the route), a broker that asked to back off, and any
    failed rollback are asked again with backoff for up to ``retry_timeout`` seconds; a commit that was sent and
    failed raises CommitError, since a commit whose answer was lost may have been applied and must not be sent
    twice. ``midway`` is called once, when half of them are ended."""
    direct = client.direct_sends() if isinstance(client, RemotingClient) else None
    try:
        _end_halves(client, direct, halves, commit=commit, group=group, retry_timeout=retry_timeout, midway=midway)
    finally:
        if direct is not None:
            direct.close()


def _end_halves(
    client: BaseClient,
    direct: DirectSends | None,
    halves: Sequence[HalfMessage],
    *,
    commit: bool,
    group: str,
    retry_timeout: float,
    midway: Callable[[], None] | None,
) -> None:
    """``end_halves``, its requests over ``direct`` connections where it is given."""
    per_queue: dict[MessageQueue, list[HalfMessage]] = defaultdict(list)
    for h in halves:
        per_queue[h.queue].append(h)
    position = {mq: 0 for mq in per_queue}
    retries = {mq: Retries(retry_timeout) for mq in per_queue}
    ended, half_of_them = 0, (len(halves) + 1) // 2
    end = direct.end_transaction if direct is not None else client.end_transaction_async
    while position:
        calls: list[tuple[MessageQueue, Call | Exception]] = []
        with client.burst():  # one write per broker for the round's requests
            for mq, i in position.items():
                half = per_queue[mq][i]
                try:
                    calls.append((mq, end(half, commit=commit, group=group)))
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
                try:
                    retries[mq].wait(e, f"ending the half messages for {mq} (stopped at {done_here})")
                except RETRYABLE as late:
                    raise _restart_completes(late) from e
                continue
            retries[mq].reset()
            position[mq] += 1
            ended += 1
            if midway is not None and ended == half_of_them:
                midway()
            if position[mq] == len(per_queue[mq]):
                del position[mq]


def retry_while_away(what: str, step: Callable[[], T], retry_timeout: float) -> T:
    """``step()``, tried again with backoff while a broker is away or busy, or a route is missing, for up to
    ``retry_timeout`` seconds; then CommitError (a restart of the query completes the batch once the broker is
    back)."""
    retries = Retries(retry_timeout)
    while True:
        try:
            return step()
        except _WAITED as e:
            try:
                retries.wait(e, what)
            except _WAITED as late:
                raise _restart_completes(late) from e


def _another_query(group: str, last: CommitRecord, query: str, where: str) -> CommitError:
    """The refusal of a query whose producer group keeps another query's records."""
    return CommitError(
        f"producer group {group!r} keeps the commit records of another streaming query: the last one ({where}) is "
        f"{last.describe()}, and this is query {query}. A producerGroup belongs to one query and its checkpoint: a "
        "new checkpoint (a reset stream) or a second query needs a producerGroup of its own. Give this query one; "
        f"or, if the other query is gone for good with its checkpoint, delete topic {records_topic(group)!r} and "
        "restart this one"
    )


def judge(last: CommitRecord | None, query: str, batch_id: int, group: str, where: str) -> Action:
    """What the commit of batch ``batch_id`` of ``query`` does after the last record ``last`` (kept ``where``), or
    CommitError where it must not go on. A record that names no query (an earlier release's) is taken as this
    query's, since a query upgraded from that release restarts from its checkpoint, except where that would roll
    back a batch that another query may own."""
    if last is None:
        return Action.BEGIN
    if last.query not in (None, query):
        raise _another_query(group, last, query, where)
    if last.batch > batch_id:
        if last.query is None:
            raise _another_query(group, last, query, where)
        raise CommitError(
            f"the commit records of producer group {group!r} ({where}) are at batch {last.batch}, past this query's "
            f"batch {batch_id}: the checkpoint is older than the records (was it restored from a copy?). Restore "
            "the checkpoint the query last ran with, or run it under a new producerGroup"
        )
    if last.batch < batch_id:
        if last.step is CommitStep.DONE:
            return Action.BEGIN
        raise CommitError(
            f"the commit of batch {last.batch} under producer group {group!r} ({where}) was cut by a crash and "
            f"never completed, and this query is at batch {batch_id}: rows of batch {last.batch} may be stored in "
            "part. Nothing can complete it now; to go on, run the query under a new producerGroup"
        )
    if last.step is CommitStep.STARTED:
        return Action.RECOVER
    if last.query is None:
        raise CommitError(
            f"the last commit record of producer group {group!r} ({where}) is done({batch_id}), written by an "
            "earlier rmq-spark release that did not name its query: it cannot be told whether this query's batch "
            f"{batch_id} is a replay of it. If this query was restarted from the checkpoint that wrote it, run it "
            f"once more with that release to get past batch {batch_id}; if this is a new query, give it a "
            "producerGroup of its own"
        )
    return Action.ROLL_BACK


def _refuse_other_rows(records: CommitRecords, last: CommitRecord, keys: Sequence[str]) -> None:
    """CommitError when the replay's rows are not those of the batch whose commit was cut."""
    replay = rows_digest(keys)
    if last.rows is not None and last.rows != replay:
        raise CommitError(
            f"the replay of batch {last.batch} is not the batch whose commit was cut by a crash: that one had "
            f"{last.rows}, this one {replay}. Exactly-once needs a deterministic batch (no uuid(), rand(), "
            "current_timestamp() or other values that change between runs, and a source that replays the same "
            f"rows). Batch {last.batch} cannot be completed exactly once; to go on, run the query under a "
            f"producerGroup other than {records.producer_group!r}, accepting that the batch may be stored in part"
        )


def _commit_nothing(records: CommitRecords, batch_id: int, retry_timeout: float) -> Outcome:
    """A batch without rows: nothing to commit, unless it is the replay of a batch whose commit was cut."""
    last = retry_while_away(f"reading the commit records at batch {batch_id}", records.current, retry_timeout)
    if judge(last, records.query, batch_id, records.producer_group, records.records_topic) is Action.RECOVER:
        assert last is not None
        if last.rows is None:
            raise CommitError(
                f"the replay of batch {batch_id} has no rows, and the commit of that batch was cut by a crash: "
                "exactly-once needs a deterministic batch. To go on, run the query under a new producerGroup"
            )
        _refuse_other_rows(records, last, ())
    return Outcome.EMPTY


def commit_batch(
    records: CommitRecords, batch_id: int, halves: Sequence[tuple[str, HalfMessage]], retry_timeout: float
) -> Outcome:
    """Commit streaming batch ``batch_id`` (its halves with their row keys) exactly once. A broker that is away is
    waited for up to ``retry_timeout`` seconds."""
    if not halves:
        return _commit_nothing(records, batch_id, retry_timeout)
    group = records.producer_group
    keys = [k for k, _ in halves]
    handles = [h for _, h in halves]
    queues = {h.queue for h in handles}
    pairs = pairs_of(queues)
    home, last = retry_while_away(
        f"finding the commit records of batch {batch_id}", lambda: records.locate({t for t, _ in pairs}), retry_timeout
    )
    reach(CommitPoint.LOCATED, batch_id)
    action = judge(last, records.query, batch_id, group, f"{records.records_topic} on {home}")
    if action is Action.ROLL_BACK:
        end_halves(records.client, handles, commit=False, group=group, retry_timeout=retry_timeout)
        reach(CommitPoint.DONE, batch_id)
        return Outcome.REPLAYED
    if action is Action.RECOVER:
        assert last is not None
        if not last.pairs:
            raise CommitError(
                f"batch {batch_id} of producer group {group!r} was cut by a crash while an earlier "
                "rmq-spark release committed it, whose records this release cannot read back: restart "
                "the query once with that release to complete the batch, then upgrade"
            )
        _refuse_other_rows(records, last, keys)
        record = last
        new_pairs = pairs - record.pairs
        if new_pairs:  # queues of the record's pairs without a scan start are read from their first offset
            new_queues = {mq for mq in queues if (mq.topic, mq.broker_name) in new_pairs}
            record = retry_while_away(
                f"recording the new targets of batch {batch_id}",
                lambda: records.extend(home, last, new_pairs, new_queues),
                retry_timeout,
            )
        reach(CommitPoint.STARTED, batch_id)
        stored = retry_while_away(
            f"reading back the rows of batch {batch_id}", lambda: records.stored(record, queues), retry_timeout
        )
        handles, stored_again = [], []
        for key, h in halves:
            content = content_of(key)
            if stored[content] > 0:
                stored[content] -= 1
                stored_again.append(h)
            else:
                handles.append(h)
        end_halves(records.client, stored_again, commit=False, group=group, retry_timeout=retry_timeout)
        outcome = Outcome.RECOVERED
    else:
        retry_while_away(
            f"starting the commit of batch {batch_id}",
            lambda: records.begin(home, batch_id, pairs, queues, rows_digest(keys)),
            retry_timeout,
        )
        reach(CommitPoint.STARTED, batch_id)
        outcome = Outcome.COMMITTED
    end_halves(
        records.client,
        handles,
        commit=True,
        group=group,
        retry_timeout=retry_timeout,
        midway=lambda: reach(CommitPoint.COMMITTING, batch_id),
    )
    reach(CommitPoint.COMMITTED, batch_id)
    retry_while_away(f"marking batch {batch_id} committed", lambda: records.finish(home, batch_id), retry_timeout)
    reach(CommitPoint.DONE, batch_id)
    return outcome
