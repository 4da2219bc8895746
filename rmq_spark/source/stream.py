"""The streaming reader: offsets are next-offset-per-queue JSON; each micro-batch is an exact set of queue ranges
that Spark logs before it runs. After Spark commits a batch, its end is mirrored to the consumer group.

The fault model (docs/DESIGN.md §10): a queue whose broker is missing from the route or silent is unavailable, not
lost. Its offset stays in every batch's end unchanged and it is planned again when its broker answers; the rest
of the query keeps going. Data loss is only what a live broker proves."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import RETRYABLE
from rmq_spark.client.model import MessageQueue
from rmq_spark.client_pool import new_client
from rmq_spark.options import SourceOptions
from rmq_spark.source.admission import TriggerLimits, admit, capped
from rmq_spark.source.batch import partitions_of, read_partition
from rmq_spark.source.cut_queues import ReadTimes, all_new, new_messages
from rmq_spark.source.group_check import GroupCheck
from rmq_spark.source.offset_mirror import OffsetMirror
from rmq_spark.source.offset_resolver import OffsetResolver
from rmq_spark.source.offset_specs import START_KEY, Edge, check_named, entering_spec
from rmq_spark.source.offset_store import OffsetStore
from rmq_spark.source.offsets import (
    offsets_from_json,
    offsets_to_json,
    recorded_planned_at,
    recorded_start,
    recorded_start_time,
)
from rmq_spark.source.planning import plan_ranges, query_topics
from rmq_spark.source.queue_access import Access, QueueAccess
from rmq_spark.source.queue_watch import QueueWatch
from rmq_spark.source.schema import COLUMNS
from rmq_spark.source.skipped import SkippedMessages

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannedEnd:
    """An end this reader returned, as Spark will hand it back (``offsets``) and parsed (``parsed``)."""

    offsets: dict
    parsed: dict[MessageQueue, int]


@dataclass(frozen=True)
class Answered:
    """An answer that holds while the versions of what it was made from stay the same: ``latestOffset`` found
    nothing to read from ``offsets`` (and nothing pending) at the queue watch's version, or ``reportLatestOffset``
    returned ``offsets`` at the watch's and the skipped counts' versions."""

    offsets: dict
    versions: tuple[int, ...]


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("rocketmq")``. The instance Spark plans with lives on the driver; the copies
    that run ``read`` in tasks are built from the same options and never connect until they read."""

    def __init__(self, options: SourceOptions, columns: tuple[str, ...] = COLUMNS) -> None:
        self.options = options
        self.columns = columns
        self._client: BaseClient | None = None
        self._watch: QueueWatch | None = None
        self._access: QueueAccess | None = None
        self._store: OffsetMirror | None = None
        self._cap: dict[MessageQueue, int] | None = None  # Trigger.AvailableNow target
        self._last_batch_at = time.monotonic()
        self._initial: dict | None = None  # the initial offsets this process resolved (never mirrored)
        self._initial_offsets: dict[MessageQueue, int] | None = None  # the same, parsed
        self._start_time: int | None = None  # when latest was resolved at the query's start (ms), as offsets carry it
        self._group_check: GroupCheck | None = None
        self._unavailable: set[MessageQueue] = set()  # the queues the last planned end waits for
        self._limits = TriggerLimits(
            options.max_messages_per_trigger, options.min_messages_per_trigger, options.max_trigger_delay_ms
        )
        self._idle: Answered | None = None  # the last start with nothing to read: the same start, the same answer
        self._skipped = SkippedMessages()
        self._read_times = ReadTimes()  # before when each queue's delivered messages were stored
        self._reported: Answered | None = None  # reportLatestOffset's last answer
        # the last two ends returned: Spark hands them back as the next start, to partitions() and to commit()
        self._planned: list[PlannedEnd] = []

    # -- driver-side state, built lazily ----------------------------------------------------------------------
    @property
    def client(self) -> BaseClient:
        if self._client is None:
            self._client = new_client(self.options)
            self._client.pull_group = self.options.pull_group
        return self._client

    @property
    def watch(self) -> QueueWatch:
        if self._watch is None:
            self._watch = QueueWatch(self.client, self.options)
        return self._watch

    @property
    def access(self) -> QueueAccess:
        if self._access is None:
            self._access = QueueAccess(self.client, self.options, self.watch)
        return self._access

    @property
    def store(self) -> OffsetMirror | None:
        o = self.options
        if self._store is None and o.commit_offsets_to_broker and o.consumer_group:
            # stop() waits for the update in flight and the one pending
            self._store = OffsetMirror(
                OffsetStore(self.client, o.consumer_group), flush_timeout=2 * o.request_timeout_ms / 1000
            )
        return self._store

    @property
    def group_check(self) -> GroupCheck:
        if self._group_check is None:
            self._group_check = GroupCheck(self.client, self.options, self._topics)
        return self._group_check

    def _topics(self) -> list[str]:
        """The query's topics: the watch's when it has them (no name-server request), else the options'."""
        watched = self._watch.topics() if self._watch is not None else None
        return watched if watched is not None else query_topics(self.client, self.options)

    # -- Spark's stream reader API ------------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        if self._initial is None:
            self.group_check.check()
            self.watch.poll(force=True)
            for note in check_named(self.options.starting, self.watch.queues(), waits=True):
                log.warning(
                    "rocketmq source: %s; if that broker group is stopped or restarting, the queue starts "
                    "where the option puts it once the group is back",
                    note,
                )
            if self.options.starting is Edge.LATEST:
                self._start_time = int(time.time() * 1000)  # before the ends are asked: what latest means now
            starts = OffsetResolver(self.client, partial=True).resolve(self.options.starting, self.watch.readable())
            self._log_unresolved(starts.failed)
            if any(o > self.watch.latest.get(mq, o) for mq, o in starts.items()):
                # messages landed since the watch asked: its ends must not read as a reset below these starts
                self.watch.poll(force=True)
            self._initial_offsets = dict(starts)
            self._initial = offsets_to_json(starts, start_time=self._start_time)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.options
        if o.max_messages_per_trigger is not None:
            return ReadMaxRows(o.max_messages_per_trigger)
        if o.min_messages_per_trigger is not None:
            return ReadMinRows(o.min_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.watch.poll(force=True)
        self._cap = dict(self.watch.latest)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        watch = self.watch
        watch.poll()
        if self._idle is not None and self._idle.versions == (watch.version,) and self._idle.offsets == start:
            return start
        self._idle = None
        begin, recorded = self._parsed(start), recorded_start(start)
        start_time = recorded_start_time(start)
        if start_time is not None:  # (a restart learns it here: the checkpoint's offsets carry it)
            self._start_time = start_time
        # the start of the query's first batch: the initial offsets this process resolved
        first = recorded is None and begin == self._initial_offsets
        # Spark calls this only once the batch ending at `start` is in its commit log (except for the initial
        # offsets): the last batch of a run, which commit() never sees with AvailableNow, is mirrored here.
        if not first:
            self._read_times.committed()  # (a no-op once commit() saw it)
            self._mirror(begin, recorded)
        end = self._end(begin, limit)
        if end != begin:
            self._read_times.note(begin, end)
            self._last_batch_at = time.monotonic()
            self._log_lag(end, watch.latest)
        elif not first:
            if self._store is not None:
                # no batch runs now: the last committed end is sent before Spark may end this process (an
                # AvailableNow run ends here, often without stop())
                self._store.flush(self._store.flush_timeout)
            if self._settled(limit):
                self._idle = Answered(start, (watch.version,))
            return start  # the same JSON string: no batch
        # The first batch's end records its start, even when nothing moved (Spark runs a first batch anyway): a
        # replay of an uncommitted batch 0 gets a fresh initialOffset(), which may resolve elsewhere by then, and
        # partitions() prefers the recorded start.
        out = offsets_to_json(
            end, start=begin if first else None, start_time=self._start_time, planned_at=self._read_times.last
        )
        self._planned = [PlannedEnd(out, end), *self._planned[:1]]
        return out

    def _parsed(self, offsets: dict) -> dict[MessageQueue, int]:
        """``offsets_from_json(offsets)``, without parsing again an end this reader planned."""
        for planned in self._planned:
            if planned.offsets == offsets:
                return dict(planned.parsed)
        return offsets_from_json(offsets)

    def _settled(self, limit: ReadLimit) -> bool:
        """Whether the answer to the same start stays the same until the watch sees a change: no queue waited
        for, no offsets left to mirror, and a limit that does not depend on the time."""
        return (
            not self._unavailable
            and isinstance(limit, (ReadAllAvailable, ReadMaxRows))
            and not self._limits.time_dependent
            and (self._store is None or (self.group_check.passed and self._store.settled()))
        )

    def _end(self, begin: dict[MessageQueue, int], limit: ReadLimit) -> dict[MessageQueue, int]:
        """The end of the next batch from ``begin`` under ``limit`` and the trigger options."""
        waited_ms = (time.monotonic() - self._last_batch_at) * 1000
        return admit(
            begin, self._targets(begin), limit, self._limits, waited_ms=waited_ms, available_now=self._cap is not None
        )

    def reportLatestOffset(self) -> dict | None:
        watch = self._watch
        if watch is None or not watch.latest:
            return None
        versions = (watch.version, self._skipped.version)
        if self._reported is None or self._reported.versions != versions:
            latest = watch.latest
            # (a batch planned to the latest offsets, the usual one, has them laid out already)
            laid_out = next(
                (p.offsets for p in self._planned if p.parsed == latest and START_KEY not in p.offsets), None
            )
            self._reported = Answered({**(laid_out or offsets_to_json(latest)), **self._skipped.report()}, versions)
        return self._reported.offsets

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        recorded = recorded_start(end)
        begin = recorded if recorded is not None else self._parsed(start)
        finish = self._parsed(end)
        started = begin.get
        moved = {mq: o for mq, o in finish.items() if started(mq, o) != o}
        # No GET_MIN_OFFSET on the batch's path by default: each task checks for data loss when it pulls, and names
        # the queue, the offsets gone and failOnDataLoss as planning would. A cut queue (its end below its offset)
        # asks where it starts now and where the messages stored after the cut begin (cut_queues.py); under
        # failOnDataLoss=false every queue asks, so that the driver counts what is skipped (skipped.py).
        cut = [mq for mq, o in moved.items() if o < begin[mq]]
        asked = cut if self.options.fail_on_data_loss else list(moved)
        mins = self.client.min_offsets(asked, partial=True) if asked else {}
        gaps = self._gaps(moved)
        resumes = {}
        if cut:
            resumes = new_messages(self.client, cut, mins, moved, self._read_times, recorded_planned_at(start))
        ranges = plan_ranges(
            begin,
            moved,
            mins,
            fail_on_data_loss=self.options.fail_on_data_loss,
            sparse_topics=self.watch.sparse_topics,
            gaps=gaps,
            resumes=resumes,
        )
        if not self.options.fail_on_data_loss:  # (under true, planning skips nothing: it raises)
            recreated = [mq for mq, o in resumes.items() if all_new(o, mins.get(mq))]
            self._skipped.count(begin, moved, ranges, gaps, recreated=recreated)
        return partitions_of(ranges, self.options)

    def _gaps(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, list[tuple[int, int]]]:
        """``remapping_gaps`` of the moved logic queues; none where their leader cannot answer now (a task that
        pulls into one then fails on the offsets it finds missing, and Spark retries it)."""
        logic = [mq for mq in queues if mq.logic]
        if not logic:
            return {}
        try:
            return self.client.remapping_gaps(logic)
        except RETRYABLE as e:
            log.info("rocketmq source: the remapping gaps of logic queues cannot be read now (%s)", e)
            return {}

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.options, partition, self.columns)

    def commit(self, end: dict) -> None:
        self._read_times.committed()
        self._mirror(self._parsed(end), recorded_start(end))

    def stop(self) -> None:
        if self._client is not None:
            if self._store is not None:
                self._store.close()
            if self._watch is not None:
                self._watch.close()
            self._client.close()
            self._client = None
            self._watch = None
            self._access = None
            self._store = None
            self._idle = self._reported = None
            self._planned = []

    # -- planning the end of a batch ---------------------------------------------------------------------------
    def _targets(self, begin: dict[MessageQueue, int]) -> dict[MessageQueue, int]:
        """The furthest each queue may be read to now, as ``QueueAccess`` answers: a readable queue to its end (under
        AvailableNow, no further than the cap), a queue that may not be read now keeps its offset, a gone one leaves
        the offsets. A queue whose end answered by its master fell below its offset is a cut queue (its end passes
        through below the start, for planning's data-loss rule); new queues enter at their start offset and are read
        from the next batch on, so every start is in Spark's offset log."""
        watch = self.watch
        ends = self.access.ends(begin)
        self._unavailable = ends.unavailable
        if not ends.barred and self._cap is None:
            # the usual case: every queue may be read to its end
            latest = ends.latest
            target = (
                dict(latest) if latest.keys() == begin.keys() else {mq: latest.get(mq, b) for mq, b in begin.items()}
            )
        else:
            target = {}
            for mq, b in begin.items():
                queue = ends[mq]
                if queue.access is Access.GONE:
                    continue
                end = b if queue.end is None else queue.end
                if queue.access is not Access.READABLE:
                    target[mq] = b  # it waits (unavailable, drained, a lagging slave), its offset carried
                elif self._cap is not None:
                    target[mq] = capped(end, b, self._cap.get(mq, b))
                else:
                    target[mq] = end
        new = [mq for mq in watch.readable() if mq not in begin] if not begin.keys() >= watch.queue_set else []
        if new:
            target.update(self._new_queue_starts(new))
        return target

    def _new_queue_starts(self, queues: list[MessageQueue]) -> dict[MessageQueue, int]:
        """Where queues that appear after the start are read from (``entering_spec``)."""
        spec = entering_spec(self.options.starting, self._start_time)
        starts = OffsetResolver(self.client, partial=True).resolve(spec, queues)
        for mq, o in sorted(starts.items()):
            log.info("rocketmq source: new queue %s enters at offset %d", mq, o)
        return dict(starts)

    def _log_unresolved(self, failed: dict) -> None:
        brokers = sorted({mq.broker_name for mq in failed})
        if brokers:
            log.warning(
                "rocketmq source: broker(s) %s did not answer at the start; their queues start once they "
                "answer: where the starting options name them, else at their first offset (under latest: the "
                "first offset stored since the query started; under committed: the group's offset, else "
                "startingOffsetsFallback)",
                ", ".join(brokers),
            )

    def _log_lag(self, end: dict[MessageQueue, int], latest: dict[MessageQueue, int]) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        behind = [max(0, latest[mq] - end[mq]) for mq in end if mq in latest]
        if behind:
            log.info(
                "rocketmq source: planned batch ends %d messages behind latest (per queue min %d, avg %.1f, max %d)",
                sum(behind),
                min(behind),
                sum(behind) / len(behind),
                max(behind),
            )

    # -- the consumer group mirror -----------------------------------------------------------------------------
    def _mirror(self, committed: dict[MessageQueue, int], recorded: dict[MessageQueue, int] | None) -> None:
        """Hand the end of a batch Spark has committed to the mirror, which sends what changed to the consumer group
        in the background, never moving a group's offset back (an unreachable broker's offsets stay pending). A
        first batch that read nothing (its end is the start it recorded) mirrors nothing: no message was read yet."""
        store = self.store
        if store is None or not committed or recorded == committed:
            return
        if self.group_check.check():
            store.submit(committed)
