"""The PySpark writers of the sink: tasks send (``write``), the driver commits or aborts (exactly-once)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.model import HalfMessage
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.client_pool import new_client, shared_client
from rmq_spark.errors import CommitError
from rmq_spark.options import OptionError, SinkOptions, check_topic_name
from rmq_spark.sink.columns import checked_batches, to_rows
from rmq_spark.sink.commit_log import records_topic
from rmq_spark.sink.commit_records import CommitRecords
from rmq_spark.sink.message_types import TopicTypes
from rmq_spark.sink.native_sends import HalfSpec, NativeSends, takes
from rmq_spark.sink.routing import Router
from rmq_spark.sink.row_keys import ROW_KEY_PROPERTY, batch_prefix, row_key
from rmq_spark.sink.row_rules import RowRule, counter
from rmq_spark.sink.sender import Sender
from rmq_spark.sink.transactions import Outcome, commit_batch, end_halves

log = logging.getLogger(__name__)
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # MicroBatchExecution.BATCH_ID_KEY
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # StreamExecution.QUERY_ID_KEY: the same across restarts from a checkpoint


@dataclass(frozen=True)
class MicroBatch:
    """The streaming query (Spark's query id) and micro-batch a task writes."""

    query: str
    batch_id: int


@dataclass(frozen=True)
class SinkCommit(WriterCommitMessage):
    """What one task wrote: the count, and in exactly-once mode its half messages with their row keys (empty in a
    batch write, whose commit has no recovery to read them)."""

    partition: int
    sent: int
    halves: tuple[tuple[str, HalfMessage], ...] = ()
    query: str | None = None  # the streaming query of an exactly-once streaming write


def _partition() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def _micro_batch() -> MicroBatch:
    """The query and micro-batch this task writes: Spark's MicroBatchExecution sets both as local properties of the
    batch's jobs, and a replay after a restart from the same checkpoint runs under the same ones."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    query = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
    batch = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
    missing = [p for p, v in ((QUERY_ID_PROPERTY, query), (BATCH_ID_PROPERTY, batch)) if v is None]
    if query is None or batch is None:
        raise RocketMQError(
            f"the task of a streaming write has no local property {' or '.join(missing)}, which "
            "exactly_once needs to key its rows by query and micro-batch: this Spark does not set it. Run "
            "the query with the micro-batch engine of Spark 4 (not continuous or real-time mode), "
            "or write with deliveryGuarantee=at_least_once"
        )
    return MicroBatch(query, int(batch))


# The broker keeps a committed timer message in its timer topic until its time, so the recovery of a streaming
# exactly-once batch cut by a crash would not find it in its queue and would commit it again.
TIMER_ROWS = RowRule(
    "a deliverTimeMs (a timer message), which a streaming query with deliveryGuarantee=exactly_once cannot write",
    "the broker holds a committed timer message aside until its time, so the recovery of a batch cut by a crash "
    "would not see it and would commit it again. Write timer rows with deliveryGuarantee=at_least_once (or a batch "
    "df.write), or leave deliverTimeMs null",
    counter("deliverTimeMs", null=False),
)


def write_task(
    options: SinkOptions, batches: Iterator[pa.RecordBatch], micro_batch: MicroBatch | None = None
) -> SinkCommit:
    """Send one task's rows; in exactly-once mode as half messages, returned for the driver to end. ``micro_batch``,
    the query and micro-batch of a streaming write, goes into each row's key (a streaming commit's recovery reads
    them)."""
    partition = _partition()
    eo = options.exactly_once
    with shared_client(options) as client, contextlib.ExitStack() as cleanup:
        router = Router(client, start=partition)
        # over remoting the core encodes the rows (no timer rows: those go one by one); in exactly-once mode it
        # frames each half message whole, which needs unsigned requests over plain TCP
        direct, native = None, None
        if isinstance(client, RemotingClient):
            direct = client.direct_sends() if eo else None
            if direct is not None:
                cleanup.callback(direct.close)  # its connections given back, also when the task fails
            if direct is not None or not eo:
                native = NativeSends(router, options.topic, client.namespace)
        sender = Sender(
            client,
            options.producer_group,
            transactional=eo,
            retry_timeout=options.broker_retry_timeout,
            sends=direct,
        )
        types = TopicTypes(
            client, transactional=eo, group=options.producer_group, retry_timeout=options.broker_retry_timeout
        )
        # a streaming exactly-once batch, whose commit a restart may recover: its rows are keyed
        keyed_batch = micro_batch if eo else None
        spec = None
        if eo:
            b = keyed_batch
            prefix = None if b is None else batch_prefix(options.producer_group, b.query, b.batch_id)
            spec = HalfSpec(options.producer_group, prefix)
        keys: list[str] = []
        rules = (router.named_queues(options.topic), *((TIMER_ROWS,) if keyed_batch is not None else ()))
        for batch in checked_batches(batches, partition, rules):
            if native is not None and spec is not None and takes(batch):
                framed = native.halves(batch, spec)  # routes first: a topic without one is named as such
                for topic, kind in native.kinds(batch):
                    types.check_kind(topic, kind)
                for half in framed:
                    keys.append(half.key)
                    sender.add_half(half)
                continue
            if native is not None and takes(batch):
                sends = native.add(batch)  # routes first: a topic without one is named as such
                for topic, kind in native.kinds(batch):
                    types.check_kind(topic, kind)
                for send in sends:
                    sender.add_encoded(send.mq, send.body, send.count, send.sys_flag)
                continue
            if native is not None and spec is None:  # what the core gathers goes first, keeping each queue's order
                for send in native.finish():
                    sender.add_encoded(send.mq, send.body, send.count, send.sys_flag)
            rows = to_rows(batch, options.topic)
            explicit = rows.queues
            for i, message in enumerate(rows.messages):
                topic = rows.topics[i]
                named = explicit[i] if explicit is not None else (None, None)
                mq = router.route(topic, message.sharding_key, *named)
                types.check(topic, message)
                if keyed_batch is not None:
                    keys.append(
                        row_key(
                            options.producer_group,
                            keyed_batch.query,
                            keyed_batch.batch_id,
                            topic,
                            message,
                            None if named[0] is None else (mq.broker_name, mq.queue_id),
                        )
                    )
                    message.properties[ROW_KEY_PROPERTY] = keys[-1]
                elif eo:
                    keys.append("")
                sender.add(mq, message)
        for send in native.finish() if native is not None and spec is None else ():
            sender.add_encoded(send.mq, send.body, send.count, send.sys_flag)
        sender.finish()
    halves = tuple(zip(keys, sender.halves(), strict=True)) if eo else ()
    return SinkCommit(partition, sender.sent, halves, None if keyed_batch is None else keyed_batch.query)


def _halves(messages: Sequence[WriterCommitMessage | None]) -> list[tuple[str, HalfMessage]]:
    out: list[tuple[str, HalfMessage]] = []
    for m in sorted((m for m in messages if isinstance(m, SinkCommit)), key=lambda m: m.partition):
        out.extend(m.halves)
    return out


class RocketMQWriter(DataSourceArrowWriter):
    """``df.write.format("rocketmq")``: at-least-once sends, or exactly-once through half messages committed when
    every task has succeeded (rolled back on abort)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return write_task(self.options, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        halves = _halves(messages)
        if halves:
            with shared_client(self.options) as client:
                end_halves(
                    client,
                    [h for _, h in halves],
                    commit=True,
                    group=self.options.producer_group,
                    retry_timeout=self.options.broker_retry_timeout,
                )

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        halves = _halves(messages)
        if halves:
            with shared_client(self.options) as client:
                end_halves(
                    client,
                    [h for _, h in halves],
                    commit=False,
                    group=self.options.producer_group,
                    retry_timeout=self.options.broker_retry_timeout,
                )


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("rocketmq")``: as the batch writer, and in exactly-once mode each micro-batch is
    committed once across driver crashes (``rmq_spark.sink.transactions``)."""

    def __init__(self, options: SinkOptions) -> None:
        if options.exactly_once and options.topic is None:
            raise OptionError(
                "deliveryGuarantee=exactly_once in a streaming query needs option topic: the commit "
                "records are kept on a broker group of that topic (rows may still name other topics)"
            )
        if options.exactly_once:
            check_topic_name(
                "producerGroup (in the name of the topic of its commit records)", records_topic(options.producer_group)
            )
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return write_task(self.options, iterator, _micro_batch() if self.options.exactly_once else None)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        o = self.options
        if not o.exactly_once:
            return
        queries = {m.query for m in messages if isinstance(m, SinkCommit) and m.query is not None}
        if not queries:
            return  # no task ran: nothing was written
        if len(queries) > 1:
            raise CommitError(f"the tasks of batch {batchId} name {len(queries)} streaming queries: {sorted(queries)}")
        assert o.topic is not None, "__init__ gave exactly-once writes a topic"
        halves = _halves(messages)
        with new_client(o) as client:  # fresh routes, and reads on masters (no suggestion of a slave kept)
            records = CommitRecords(
                client, o.producer_group, o.topic, queries.pop(), retry_timeout=o.broker_retry_timeout
            )
            outcome = commit_batch(records, batchId, halves, o.broker_retry_timeout)
        if outcome in (Outcome.REPLAYED, Outcome.RECOVERED):
            log.warning("rocketmq sink: batch %d was %s (%d half messages)", batchId, outcome.value, len(halves))

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        halves = _halves(messages)
        if halves:
            with shared_client(self.options) as client:
                end_halves(
                    client,
                    [h for _, h in halves],
                    commit=False,
                    group=self.options.producer_group,
                    retry_timeout=self.options.broker_retry_timeout,
                )
