"""The commit records of one exactly-once streaming query, kept under its producer group: where they are
(``rmq_spark.sink.commit_home``), what they say (``rmq_spark.sink.commit_log``), and what the recovery of a commit
cut by a crash reads back (``rmq_spark.sink.recovery_scan``). The protocol that writes them is
``rmq_spark.sink.transactions``; what a broker's host crash can still lose is said in the README ("Exactly-once
writes")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from rmq_spark.client.base import BaseClient
from rmq_spark.client.clocks import now_ms
from rmq_spark.client.defaults import DEFAULT_RETRY_TIMEOUT
from rmq_spark.client.errors import TopicNotFoundError
from rmq_spark.client.model import MessageQueue
from rmq_spark.sink.commit_home import CommitHome
from rmq_spark.sink.commit_log import CommitLog, CommitRecord, CommitStep, Pair
from rmq_spark.sink.recovery_scan import RecoveryScan
from rmq_spark.sink.row_keys import RowsDigest, batch_prefix


def pairs_of(queues: Iterable[MessageQueue]) -> set[Pair]:
    """The (topic, broker group) pairs of ``queues``."""
    return {(mq.topic, mq.broker_name) for mq in queues}


class CommitRecords:
    """The records of streaming query ``query`` (Spark's query id) under producer group ``producer_group``, whose
    home is a broker group of option ``topic``. Reads wait up to ``retry_timeout`` seconds for a broker that goes
    away."""

    def __init__(
        self,
        client: BaseClient,
        producer_group: str,
        topic: str,
        query: str,
        *,
        retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
    ) -> None:
        self.client = client
        self.producer_group = producer_group
        self.topic = topic
        self.query = query
        self.log = CommitLog(client, producer_group, retry_timeout)
        self.home = CommitHome(self.log, topic)
        self.scan = RecoveryScan(client, producer_group, retry_timeout)
        self.records_topic = self.log.topic

    def locate(self, topics: Iterable[str]) -> tuple[str, CommitRecord | None]:
        """The home (found, or chosen and created at the first commit) and its last record (None before the first
        commit)."""
        home, legacy = self.home.locate(topics)
        try:
            last = self.log.last(home)
        except TopicNotFoundError:
            self.home.configure_again(home)
            last = self.log.last(home)
        return home, last or legacy

    def current(self) -> CommitRecord | None:
        """The last record, where the records topic exists and its home answers (read only: creates nothing)."""
        holders = self.home.holders()
        return self.log.last(holders[0]) if len(holders) == 1 else None

    def begin(
        self, home: str, batch_id: int, pairs: set[Pair], queues: Iterable[MessageQueue], rows: RowsDigest
    ) -> CommitRecord:
        """The home's fingerprint where a later commit may look for it, then started(N) over ``pairs`` and the
        halves' ``queues``, with their ends now as the scan starts, the time now and the batch's ``rows``."""
        self.home.mark(home, pairs | {(self.topic, b.broker_name) for b in self.client.route(self.topic).brokers})
        began = now_ms()
        record = CommitRecord(
            batch_id, CommitStep.STARTED, self.query, frozenset(pairs), self.scan.starts(pairs, queues), rows, began
        )
        self.log.append(home, record)
        return record

    def extend(self, home: str, record: CommitRecord, pairs: set[Pair], queues: Iterable[MessageQueue]) -> CommitRecord:
        """started(N) as ``record``, over ``pairs`` too, with the queues of ``pairs`` and ``queues`` not scanned yet
        scanned from their ends now."""
        new = {mq: s for mq, s in self.scan.starts(pairs, queues).items() if mq not in record.scan}
        extended = replace(record, pairs=record.pairs | pairs, scan={**record.scan, **new})
        self.home.mark(home, pairs)
        self.log.append(home, extended)
        return extended

    def finish(self, home: str, batch_id: int) -> None:
        """done(N)."""
        self.log.append(home, CommitRecord(batch_id, CommitStep.DONE, self.query))

    def stored(self, record: CommitRecord, queues: Iterable[MessageQueue]) -> Counter:
        """How many times each row content of ``record``'s batch is stored since its commit began (also in the
        replay's ``queues``). A record of a release before query ids is matched by that release's keys and by this
        query's, which a recovery under this release wrote."""
        prefixes: tuple[str, ...] = (batch_prefix(self.producer_group, record.query, record.batch),)
        if record.query is None:
            prefixes += (batch_prefix(self.producer_group, self.query, record.batch),)
        return self.scan.stored(record, prefixes, queues)
