"""Reading back a commit cut by a crash: where each queue a batch may write to ended when its commit began (recorded
in started(N)), and which of the batch's rows are stored since. The queues are those of the batch's pairs in their
topics' routes and every queue a half message names, since END_TRANSACTION stores a half in its own queue even where
the topic has fewer queues now.

An election of a replica that lagged (asynchronous replication) may cut a queue below where the commit began: the
rows stored above the cut are gone, and the commit, going on with the elected master, or producers store messages
from the cut on, at offsets below the recorded start. So a queue is scanned from the first message stored since the
commit began (its recorded time, less CLOCK_SLACK_MS for the brokers' clocks) where that is below the recorded
start: every row of the batch still stored is found, and those the cut took are committed again. Scanning messages
that are not the batch's costs reads only: the batch's rows are told by their keys."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable

from rmq_spark.client import hints
from rmq_spark.client.base import BaseClient
from rmq_spark.client.clocks import CLOCK_SLACK_MS
from rmq_spark.client.errors import BrokerUnavailableError, UnsupportedError
from rmq_spark.client.model import MessageQueue
from rmq_spark.client.time_search import first_stored_at_or_after
from rmq_spark.errors import CommitError
from rmq_spark.sink.commit_log import CommitRecord, Pair, from_masters
from rmq_spark.sink.row_keys import ROW_KEY_PROPERTY, content_of

log = logging.getLogger(__name__)


class RecoveryScan:
    """The scans of producer group ``producer_group``'s commits; reads wait up to ``retry_timeout`` seconds for a
    broker that goes away."""

    def __init__(self, client: BaseClient, producer_group: str, retry_timeout: float) -> None:
        self.client = client
        self.producer_group = producer_group
        self.retry_timeout = retry_timeout

    def starts(self, pairs: Iterable[Pair], queues: Iterable[MessageQueue] = ()) -> dict[MessageQueue, int]:
        """Each queue's end now, where a recovery scans from: the queues of ``pairs`` and ``queues``."""
        every, _ = self.queues(pairs)
        what = "recording where a recovery scans from"
        return dict(from_masters(what, self.client.max_offsets(sorted({*every, *queues}), partial=True)))

    def queues(self, pairs: Iterable[Pair]) -> tuple[list[MessageQueue], set[MessageQueue]]:
        """Every queue of ``pairs`` in their topics' routes (read or write), and those that can be read.
        BrokerUnavailableError names the pairs whose broker group is not in its topic's route (stopped, or not
        registered again yet after a restart): their queues cannot be told, and a record or a read-back that left
        them out would hide their rows from a recovery."""
        wanted: dict[str, set[str]] = defaultdict(set)
        for t, b in pairs:
            wanted[t].add(b)
        out: set[MessageQueue] = set()
        readable: set[MessageQueue] = set()
        missing: list[str] = []
        for t, brokers in sorted(wanted.items()):
            route = self.client.route(t)
            if not brokers <= {q.broker_name for q in route.queues}:
                route = self.client.route(t, refresh=True)  # the cached route may predate a broker's return
            missing += [f"{b} ({t})" for b in sorted(brokers - {q.broker_name for q in route.queues})]
            for q in route.queues:
                if q.broker_name in brokers:
                    out.update(
                        MessageQueue(t, q.broker_name, i) for i in range(max(q.read_queue_nums, q.write_queue_nums))
                    )
                    readable.update(MessageQueue(t, q.broker_name, i) for i in range(q.read_queue_nums))
        if missing:
            raise BrokerUnavailableError(
                f"broker group(s) {', '.join(missing)} of the commit of producer group "
                f"{self.producer_group!r} are not in the topic route now (stopped, or not "
                "registered again yet after a restart)"
            )
        return sorted(out), readable

    def stored(self, record: CommitRecord, prefixes: tuple[str, ...], queues: Iterable[MessageQueue] = ()) -> Counter:
        """How many times each row content of ``record``'s batch (the rows whose keys start with one of
        ``prefixes``) is stored since its commit began, in the queues of its pairs and ``queues`` (the replay's
        halves' own): the recorded queues from their recorded starts (or below, after a cut: the module's rule),
        others from their first offset. CommitError
        where that cannot be told (a queue no longer readable, a scan window deleted by retention, a compaction
        topic)."""
        batch_id = record.batch
        what = f"reading back the rows of batch {batch_id}"
        self._refuse_compaction(record)
        every, readable = self.queues(record.pairs)
        starts = dict(record.scan)
        unrecorded = sorted({*every, *queues} - set(starts))  # read from their first offset: nothing to lose
        if unrecorded:
            log.warning(
                "rocketmq sink: %s have no recorded scan start; batch %d's rows are looked for in them from "
                "their first offset",
                ", ".join(map(str, unrecorded)),
                batch_id,
            )
            starts.update(from_masters(what, self.client.min_offsets(unrecorded, partial=True)))
        ends = from_masters(what, self.client.max_offsets(sorted(starts), partial=True))
        recorded = sorted(record.scan)
        firsts = from_masters(what, self.client.min_offsets(recorded, partial=True)) if recorded else {}
        if record.began is None:
            self._refuse_cut(record, ends, record.scan)
        else:  # a queue that cannot be read cannot be searched
            self._refuse_cut(record, ends, [mq for mq in record.scan if mq not in readable])
            starts.update(self._below_cuts(record, record.began, ends, firsts, readable))
        moved = [mq for mq in sorted(starts) if ends[mq] > starts[mq]]
        for mq in moved:
            if mq not in readable:
                raise CommitError(
                    f"{mq} holds messages stored since batch {batch_id}'s commit began (offsets {starts[mq]} to "
                    f"{ends[mq]}), but topic {mq.topic!r} no longer has it as a readable queue (it shrank): "
                    f"which rows of the batch were committed cannot be told. Give {mq.topic!r} on {mq.broker_name} "
                    f"at least {mq.queue_id + 1} read queues again (mqadmin updateTopic -r), then restart the query"
                )
            if firsts.get(mq, starts[mq]) > starts[mq]:
                raise CommitError(
                    f"the broker's retention deleted messages of {mq} stored since batch {batch_id}'s commit began "
                    f"(offsets {starts[mq]} to {firsts[mq]}): which rows of the batch were committed cannot be told, "
                    "and restarting will not change that. To go on, run the query under a new producerGroup, "
                    f"accepting that batch {batch_id} may be written twice"
                )
        contents: Counter = Counter()
        for mq in moved:
            for m in self.client.read_range(mq, starts[mq], ends[mq], retry_timeout=self.retry_timeout):
                key = m.properties.get(ROW_KEY_PROPERTY)
                if key and key.startswith(prefixes):
                    contents[content_of(key)] += 1
        return contents

    def _below_cuts(
        self,
        record: CommitRecord,
        began: int,
        ends: dict[MessageQueue, int],
        firsts: dict[MessageQueue, int],
        readable: set[MessageQueue],
    ) -> dict[MessageQueue, int]:
        """Where the module's cut rule reads the recorded ``readable`` queues from, for those where that is below their
        recorded start: the first message stored since ``began`` (the commit's start), or the end where none was."""
        since = began - CLOCK_SLACK_MS
        lowered: dict[MessageQueue, int] = {}
        for mq, start in sorted(record.scan.items()):
            if mq not in readable:
                continue
            top, first = min(start, ends[mq]), firsts[mq]
            offset = top
            if top > first:
                offset = first_stored_at_or_after(self.client, mq, since, top, first, top, self.retry_timeout)
            if offset >= start:
                continue
            lowered[mq] = offset
            if ends[mq] < start:
                log.warning(
                    "rocketmq sink: %s ends at %d, below offset %d where batch %d's commit began: an election cut "
                    "its tail (a replica that lagged became the master); the batch's rows are looked for from "
                    "offset %d, the first message stored since the commit began, and those the cut took are "
                    "committed again",
                    mq,
                    ends[mq],
                    start,
                    record.batch,
                    offset,
                )
            else:
                log.info(
                    "rocketmq sink: batch %d's rows are looked for in %s from offset %d, below offset %d where its "
                    "commit began: messages there were stored since the commit began or a moment before it (an "
                    "election may have cut the queue, and new messages filled it again)",
                    record.batch,
                    mq,
                    offset,
                    start,
                )
        return lowered

    def _refuse_cut(self, record: CommitRecord, ends: dict[MessageQueue, int], queues: Iterable[MessageQueue]) -> None:
        """CommitError naming one of the recorded ``queues`` whose end is below its scan start now, where the cut
        rule cannot look for the rows (a record that does not say when its commit began, an earlier release's, or a
        queue that cannot be read now): an election cut its tail (a replica that lagged became the master), so rows
        of the batch committed before the cut may be gone, and which ones cannot be told."""
        starts = record.scan
        for mq in sorted(queues):
            if ends.get(mq, starts[mq]) < starts[mq]:
                raise CommitError(
                    f"{mq}: its end offset {ends[mq]} is below offset {starts[mq]}, where batch {record.batch}'s "
                    "commit began: its tail was cut, as when a replica that lagged behind its master is elected "
                    "(asynchronous replication), so rows of the batch committed before the cut may be gone from "
                    f"the target, and which ones cannot be told. {hints.HA_PREVENTION}. To go on, run the query "
                    f"under a new producerGroup, accepting that rows of batch {record.batch} may be missing or "
                    "written twice"
                )

    def _refuse_compaction(self, record: CommitRecord) -> None:
        for topic in sorted({t for t, _ in record.pairs}):
            try:
                compacted = self.client.is_compacted(topic)
            except UnsupportedError:
                compacted = False
            if compacted:
                raise CommitError(
                    f"topic {topic!r} is a compaction topic (cleanup.policy=COMPACTION): the recovery of batch "
                    f"{record.batch}, cut by a crash, cannot tell which of its rows were committed, since compaction "
                    "may have removed them. Write compaction topics with deliveryGuarantee=at_least_once (a "
                    "compaction topic keeps the last message of each key anyway); to go on, run the query under a "
                    f"new producerGroup, accepting that batch {record.batch} may be written twice"
                )
