"""The streaming reader: offsets are next-offset-per-queue JSON; each micro-batch is an exact set of queue ranges
that Spark logs before it runs. After Spark commits a batch, its end is mirrored to the consumer group."""
from __future__ import annotations

import logging
import math
import time
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)

from rmq_spark.batch import RangePartition
from rmq_spark.client.errors import DataLossError, RocketMQError
from rmq_spark.client.model import MessageQueue
from rmq_spark.connect import new_client
from rmq_spark.offset_store import OffsetStore
from rmq_spark.offsets import OffsetResolver, QueueRange, offsets_from_json, offsets_to_json, split_ranges
from rmq_spark.options import SourceOptions
from rmq_spark.partition_reader import read_range
from rmq_spark.planning import check_data_loss, resolve_queues

log = logging.getLogger(__name__)

# latestOffset is called every few ms when idle: ask the brokers at most this often (the name server every
# pollNameServerIntervalMs).
MAX_OFFSET_POLL_S = 0.1


def prorate(start: dict[MessageQueue, int], latest: dict[MessageQueue, int], limit: int) -> dict[MessageQueue, int]:
    """End offsets that read at most about ``limit`` messages, each queue getting a share proportional to its
    backlog (as Spark's Kafka source does); every queue with a backlog advances by at least one."""
    backlog = {mq: max(0, latest[mq] - start.get(mq, latest[mq])) for mq in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    end = {}
    for mq, size in backlog.items():
        share = math.floor(limit * size / total) if size else 0
        end[mq] = start.get(mq, latest[mq]) + min(size, max(share, 1 if size else 0))
    return end


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("rocketmq")``. The instance Spark plans with lives on the driver; the copies
    that run ``read`` in tasks are built from the same options and never connect until they read."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._client = None
        self._store: OffsetStore | None = None
        self._queues: list[MessageQueue] = []
        self._queues_at = 0.0
        self._latest: dict[MessageQueue, int] = {}
        self._latest_at = 0.0
        self._cap: dict[MessageQueue, int] | None = None  # Trigger.AvailableNow target
        self._last_batch_at = time.monotonic()
        self._initial: dict | None = None

    # -- driver-side state, built lazily ----------------------------------------------------------------------
    @property
    def client(self):
        if self._client is None:
            self._client = new_client(self.options)
        return self._client

    @property
    def store(self) -> OffsetStore | None:
        if self._store is None and self.options.commit_offsets_to_broker and self.options.consumer_group:
            self._store = OffsetStore(self.client, self.options.consumer_group)
        return self._store

    def _current_queues(self) -> list[MessageQueue]:
        now = time.monotonic()
        if not self._queues or now - self._queues_at > self.options.poll_name_server_interval_ms / 1000:
            self._queues = resolve_queues(self.client, self.options)
            self._queues_at = now
        return self._queues

    def _latest_offsets(self) -> dict[MessageQueue, int]:
        now = time.monotonic()
        queues = self._current_queues()
        if set(queues) != set(self._latest) or now - self._latest_at > MAX_OFFSET_POLL_S:
            fresh = self._ask_each_broker(self.client.max_offsets, queues, "max offsets")
            # a broker that did not answer keeps its last known offsets (its queues simply do not advance)
            self._latest = {mq: fresh.get(mq, self._latest.get(mq)) for mq in queues
                            if mq in fresh or mq in self._latest}
            self._latest_at = now
        if self._cap is not None:
            return {mq: min(o, self._cap.get(mq, o)) for mq, o in self._latest.items()}
        return dict(self._latest)

    # -- Spark's stream reader API ------------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        if self._initial is None:
            queues = self._current_queues()
            starts = OffsetResolver(self.client, self.options).start(queues, default="latest") if queues else {}
            self._initial = offsets_to_json(starts)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.options
        if o.max_messages_per_trigger is not None:
            return ReadMaxRows(o.max_messages_per_trigger)
        if o.min_messages_per_trigger is not None:
            return ReadMinRows(o.min_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._cap = None
        self._latest_at = 0.0
        self._cap = self._latest_offsets()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        # Spark calls this only once the batch ending at `start` is in its commit log: the last batch of a run
        # (which commit() never sees with AvailableNow) is mirrored here.
        self._mirror(begin)
        latest = self._latest_offsets()
        self._check_vanished(begin, latest)
        for mq in latest:
            begin.setdefault(mq, 0)  # a new queue (or topic) is read from its first offset
        end = dict(latest)
        if not isinstance(limit, ReadAllAvailable):
            o = self.options
            backlog = sum(max(0, latest[mq] - begin[mq]) for mq in latest)
            waited = (time.monotonic() - self._last_batch_at) * 1000
            if (o.min_messages_per_trigger and backlog < o.min_messages_per_trigger
                    and waited < o.max_trigger_delay_ms and self._cap is None):
                return offsets_to_json({mq: begin[mq] for mq in latest})
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else o.max_messages_per_trigger
            if max_rows:
                end = prorate(begin, latest, max_rows)
        if any(end[mq] > begin[mq] for mq in end):
            self._last_batch_at = time.monotonic()
            self._log_lag(end, latest)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, finish = offsets_from_json(start), offsets_from_json(end)
        new = [mq for mq in finish if mq not in begin]
        if new:
            begin.update({mq: 0 for mq in new})
        # A broker that does not answer now is checked for data loss by the task, when it pulls.
        mins = self._ask_each_broker(self.client.min_offsets, [mq for mq in finish if finish[mq] > begin[mq]],
                                     "min offsets")
        ranges = []
        for mq, stop in sorted(finish.items()):
            if stop <= begin[mq]:
                continue
            first = check_data_loss(mq, begin[mq], mins.get(mq, begin[mq]),
                                    self.options.fail_on_data_loss and mq not in new)
            ranges.append(QueueRange(mq, first, max(first, stop)))
        o = self.options
        return [RangePartition(r) for r in split_ranges(ranges, min_partitions=o.min_partitions,
                                                        max_per_partition=o.max_messages_per_partition)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, RangePartition):  # Spark plans an empty query as one InputPartition(None)
            yield from read_range(self.options, partition.range)

    def commit(self, end: dict) -> None:
        self._mirror(offsets_from_json(end))

    def _mirror(self, committed: dict[MessageQueue, int]) -> None:
        """Record offsets Spark has committed and mirror what changed to the consumer group (never raises)."""
        store = self.store
        if store is None or not committed:
            return
        store.update_all(committed)
        store.persist_all()

    def stop(self) -> None:
        if self._client is not None:
            if self._store is not None:
                self._store.persist_all()
            self._client.close()
            self._client = None
            self._store = None

    # -- helpers ----------------------------------------------------------------------------------------------
    def _ask_each_broker(self, ask, queues: list[MessageQueue], what: str) -> dict[MessageQueue, int]:
        """``ask(queues)`` for all brokers at once; if that fails, broker by broker, leaving out (and logging)
        the brokers that cannot answer now, so one broker's restart does not stop the query."""
        try:
            return ask(queues)
        except RocketMQError as e:
            first_error = e
        out: dict[MessageQueue, int] = {}
        for broker in sorted({mq.broker_name for mq in queues}):
            group = [mq for mq in queues if mq.broker_name == broker]
            try:
                out.update(ask(group))
            except RocketMQError as e:
                log.warning("rocketmq source: %s of broker %s unavailable (%s); its queues wait", what, broker, e)
        if not out and queues:
            raise first_error
        return out

    def _check_vanished(self, begin: dict[MessageQueue, int], latest: dict[MessageQueue, int]) -> None:
        gone = [mq for mq in begin if mq not in latest]
        if not gone:
            return
        what = ("queues " + ", ".join(str(mq) for mq in gone) + " are no longer in the topic route; messages "
                "not yet read from them may be lost")
        if self.options.fail_on_data_loss:
            raise DataLossError(what + ". Set failOnDataLoss=false to go on without them.")
        log.warning("%s (failOnDataLoss=false: going on without them)", what)

    def _log_lag(self, end: dict[MessageQueue, int], latest: dict[MessageQueue, int]) -> None:
        behind = [latest[mq] - end[mq] for mq in latest]
        if behind:
            log.info("rocketmq source: planned batch ends %d messages behind latest (per queue min %d, avg %.1f, "
                     "max %d)", sum(behind), min(behind), sum(behind) / len(behind), max(behind))
