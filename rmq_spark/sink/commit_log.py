"""The record log of an exactly-once streaming query: what its commit records say, and reading and appending them on
their home. The records are messages in queue 0 of topic ``rmq_spark_commits_<producerGroup>``, on one broker group
(the home, ``rmq_spark.sink.commit_home``). Messages live in the commit log, whose mapped pages survive a killed broker
process; consumer offsets would not (a broker keeps them in memory and writes them to disk every few seconds).

A record is the JSON body of one message, and the last one is the state:

- *started(N)* says that the commit of batch N began. It names the query, the (topic, broker group) pairs the batch
  writes to, the end of each queue the batch may write to when the commit began (where a recovery scans from, unless
  an election cut the queue below it since), when it began, and the count and digest of the batch's rows (a replay
  must have the same).
- *done(N)* says that every half message of batch N is committed.

Every record names the streaming query that wrote it (Spark's query id, the same across restarts from one
checkpoint), so that one query's records are never taken for another's."""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from rmq_spark.client.base import Answers, BaseClient
from rmq_spark.client.errors import BrokerUnavailableError, DataLossError
from rmq_spark.client.model import MessageQueue, OutgoingMessage
from rmq_spark.client.system_topics import RECORDS_TOPIC_PREFIX
from rmq_spark.errors import CommitError
from rmq_spark.sink.row_keys import RowsDigest

log = logging.getLogger(__name__)
Pair = tuple[str, str]  # (topic, broker group)

# 1: records without a query or rows (read as this query's, see rmq_spark.sink.transactions); 2: with them
RECORD_VERSION = 2


def records_topic(producer_group: str) -> str:
    """The topic that keeps the commit records of producer group ``producer_group``."""
    return RECORDS_TOPIC_PREFIX + producer_group


class CommitStep(enum.Enum):
    """How far a batch's commit went."""

    STARTED = "started"
    DONE = "done"


@dataclass(frozen=True)
class CommitRecord:
    """One record: ``query``'s commit of ``batch`` reached ``step``. A started record carries the pairs it writes to,
    where a recovery scans each of their queues from, when the commit began (ms by the driver's clock, before the
    scan starts were read: every row the commit stores is stored after it) and its rows' digest. ``query``, ``rows``
    and ``began`` are None in the records of releases before they were kept."""

    batch: int
    step: CommitStep
    query: str | None = None
    pairs: frozenset[Pair] = frozenset()
    scan: Mapping[MessageQueue, int] = field(default_factory=dict)
    rows: RowsDigest | None = None
    began: int | None = None

    def describe(self) -> str:
        """The record as an error names it."""
        by = "an unnamed query (a release before query ids)" if self.query is None else f"query {self.query}"
        return f"{self.step.value}({self.batch}) of {by}"

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": RECORD_VERSION,
                "query": self.query,
                "batch": self.batch,
                "step": self.step.value,
                "pairs": sorted(self.pairs),
                "scan": [[mq.topic, mq.broker_name, mq.queue_id, start] for mq, start in sorted(self.scan.items())],
                "rows": None if self.rows is None else [self.rows.count, self.rows.digest],
                "began": self.began,
            },
            separators=(",", ":"),
        ).encode("utf-8")

    @classmethod
    def decode(cls, body: bytes, where: str) -> CommitRecord:
        """The record in ``body``; CommitError naming ``where`` when it is not one this release can read."""
        try:
            data = json.loads(body)
            if data["version"] > RECORD_VERSION:
                raise CommitError(
                    f"the commit record at {where} was written by a newer rmq-spark (record version "
                    f"{data['version']}): run the query with that release or a newer one"
                )
            rows = data.get("rows")
            return cls(
                int(data["batch"]),
                CommitStep(data["step"]),
                data.get("query"),
                frozenset((t, b) for t, b in data["pairs"]),
                {MessageQueue(t, b, int(q)): int(s) for t, b, q, s in data["scan"]},
                None if rows is None else RowsDigest(int(rows[0]), str(rows[1])),
                None if data.get("began") is None else int(data["began"]),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise CommitError(
                f"the message at {where} is not a commit record of rmq-spark ({e}): is topic "
                f"{where.split(':')[0]!r} written by something else?"
            ) from e


def from_masters(what: str, answers: Answers) -> Answers:
    """``answers`` when every one came from a master; else BrokerUnavailableError naming the broker groups whose
    master did not answer (a slave's copy may lag behind its master's)."""
    away = sorted({mq.broker_name for mq in (*answers.failed, *answers.replica)})
    if away:
        raise BrokerUnavailableError(f"{what}: broker group(s) {', '.join(away)} have no master answering now")
    return answers


class CommitLog:
    """The records of producer group ``producer_group`` on a home: read from and appended to its master. A broker
    that goes away inside a read is waited for up to ``retry_timeout`` seconds."""

    def __init__(self, client: BaseClient, producer_group: str, retry_timeout: float) -> None:
        self.client = client
        self.producer_group = producer_group
        self.topic = records_topic(producer_group)
        self.retry_timeout = retry_timeout

    def queue(self, home: str) -> MessageQueue:
        """The queue that holds the records."""
        return MessageQueue(self.topic, home, 0)

    def last(self, home: str) -> CommitRecord | None:
        """The home's last record, read from its master; None where there is none."""
        mq = self.queue(home)
        what = f"reading the commit records of producer group {self.producer_group!r}"
        end = from_masters(what, self.client.max_offsets([mq], partial=True))[mq]
        if end == 0:
            return None
        try:
            found = [
                m
                for m in self.client.read_range(mq, end - 1, end, retry_timeout=self.retry_timeout)
                if m.queue_offset == end - 1
            ]
        except DataLossError:
            found = []
        if not found:
            log.warning(
                "rocketmq sink: the last commit record of producer group %r (%s, offset %d) was deleted by "
                "the broker's retention: the query had not committed for longer than it. Going on as if its "
                "last batch was done; if a crash had cut that batch, it may be written twice",
                self.producer_group,
                mq,
                end - 1,
            )
            return None
        return CommitRecord.decode(found[0].body, f"{mq.topic}:{mq.broker_name}/{mq.queue_id}/{end - 1}")

    def append(self, home: str, record: CommitRecord) -> None:
        """Append ``record`` to the home's records, on its master."""
        message = OutgoingMessage(body=record.encode(), tags=record.step.value, keys=(str(record.batch),))
        self.client.send(self.queue(home), message, group=self.producer_group)
