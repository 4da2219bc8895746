"""The commit records of an exactly-once streaming query: messages in a topic of its own, on one broker group (the
*home*), so that a broker process killed in the middle of a commit (SIGKILL, OOM) comes back with every record it
acknowledged: messages live in the commit log, whose mapped pages survive the process, where consumer offsets are
kept in memory and written to disk every few seconds.

- The records topic is ``rmq_spark_commits_<producerGroup>`` with one queue, created on the home at the query's first
  commit: the first broker group by name of option ``topic`` with a master. It never moves. The slots (queue 0) of
  the query's topics record the home's name as a consumer offset of group ``<producerGroup>_commit_home`` (its
  fingerprint), so that a commit that finds no records topic in the routes tells "its broker group is away: wait"
  from "the query's first commit".
- A record is the JSON body of one message; the last one is the state. *started(N)*: batch N's commit began; it
  names the (topic, broker group) pairs the batch writes to and, for each queue of those pairs, its end when the
  commit began (where a recovery scans from, with the queues of that time: a topic that shrank since still has its
  recorded queues scanned). *done(N)*: every half message of batch N is committed. A recovery that writes to pairs
  the record does not name appends a started(N) over the union first.

What a broker's host crash can still lose is said in the README ("Exactly-once writes")."""

from __future__ import annotations

import enum
import hashlib
import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from rmq_spark.client.base import Answers, BaseClient
from rmq_spark.client.errors import (
    BrokerUnavailableError,
    DataLossError,
    RocketMQError,
    TopicNotFoundError,
    UnsupportedError,
)
from rmq_spark.client.model import MessageQueue, OutgoingMessage
from rmq_spark.client.system_topics import CONNECTOR_TOPIC_PREFIX
from rmq_spark.errors import CommitError
from rmq_spark.sink.row_keys import ROW_KEY_PROPERTY, batch_prefix

log = logging.getLogger(__name__)
Pair = tuple[str, str]  # (topic, broker group)

RECORDS_TOPIC_PREFIX = CONNECTOR_TOPIC_PREFIX + "commits_"  # + producerGroup: the records topic
HOME_SUFFIX = "_commit_home"  # the fingerprint of the home's broker group name
LEGACY_MARKER_SUFFIX = "_commits"  # releases before the records topic kept the marker as this group's offset
RECORD_VERSION = 1


def records_topic(producer_group: str) -> str:
    """The topic that keeps the commit records of producer group ``producer_group``."""
    return RECORDS_TOPIC_PREFIX + producer_group


class Step(enum.Enum):
    """How far a batch's commit went."""

    STARTED = "started"
    DONE = "done"


@dataclass(frozen=True)
class CommitRecord:
    """One record: ``batch``'s commit reached ``step``; a started record carries the pairs it writes to and where a
    recovery scans each of their queues from."""

    batch: int
    step: Step
    pairs: frozenset[Pair] = frozenset()
    scan: dict[MessageQueue, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": RECORD_VERSION,
                "batch": self.batch,
                "step": self.step.value,
                "pairs": sorted(self.pairs),
                "scan": [[mq.topic, mq.broker_name, mq.queue_id, start] for mq, start in sorted(self.scan.items())],
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
            return cls(
                int(data["batch"]),
                Step(data["step"]),
                frozenset((t, b) for t, b in data["pairs"]),
                {MessageQueue(t, b, int(q)): int(s) for t, b, q, s in data["scan"]},
            )
        except (ValueError, KeyError, TypeError) as e:
            raise CommitError(
                f"the message at {where} is not a commit record of rmq-spark ({e}): is topic "
                f"{where.split(':')[0]!r} written by something else?"
            ) from e


def slot(pair: Pair) -> MessageQueue:
    """The queue whose consumer offsets record the home of a pair's query: its queue 0."""
    return MessageQueue(pair[0], pair[1], 0)


def fingerprint(broker_name: str) -> int:
    """A broker group name as a consumer offset (a non-negative long)."""
    return int.from_bytes(hashlib.blake2b(broker_name.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def pairs_of(queues: Iterable[MessageQueue]) -> set[Pair]:
    """The (topic, broker group) pairs of ``queues``."""
    return {(mq.topic, mq.broker_name) for mq in queues}


def on_masters(what: str, answers: Answers) -> Answers:
    """``answers`` when every one came from a master; else BrokerUnavailableError naming the broker groups whose
    master did not answer (a slave's copy may lag behind its master's)."""
    away = sorted({mq.broker_name for mq in (*answers.failed, *answers.replica)})
    if away:
        raise BrokerUnavailableError(f"{what}: broker group(s) {', '.join(away)} have no master answering now")
    return answers


class CommitRecords:
    """The commit records of one streaming query (module docstring), kept under its producer group; the home is a
    broker group of option ``topic``."""

    def __init__(self, client: BaseClient, producer_group: str, topic: str) -> None:
        self.client = client
        self.producer_group = producer_group
        self.topic = topic
        self.records_topic = records_topic(producer_group)
        self.home_group = producer_group + HOME_SUFFIX

    def home_queue(self, home: str) -> MessageQueue:
        """The queue that holds the records."""
        return MessageQueue(self.records_topic, home, 0)

    # -- where the records are ------------------------------------------------------------------------------
    def locate(self, topics: Iterable[str]) -> tuple[str, CommitRecord | None]:
        """The home and its last record (None before the query's first commit). At the first commit the home is
        chosen and its records topic created. BrokerUnavailableError while the home, or a broker group that may
        record which one it is, is away."""
        holders = self._holders()
        if len(holders) > 1:
            raise CommitError(
                f"topic {self.records_topic!r}, which keeps the commit records of producer group "
                f"{self.producer_group!r}, is on {len(holders)} broker groups ({', '.join(holders)}); "
                "it must be on one: delete it from all but the one that holds messages"
            )
        if holders:
            return holders[0], self.last(holders[0])
        brokers = self._brokers({*topics, self.topic})
        home, legacy = self._recorded_home(brokers), None
        if home is None:
            home = self._first_home()
            self._record_home(home, brokers)
        else:  # the home is up, and its records topic not in the route: a release before it kept a marker
            legacy = self._legacy_marker(home)
        self._create(home)
        return home, self.last(home) or legacy

    def current(self) -> CommitRecord | None:
        """The last record, where the records topic exists and its home answers (read only: creates nothing)."""
        holders = self._holders()
        return self.last(holders[0]) if len(holders) == 1 else None

    def _holders(self) -> list[str]:
        """The broker groups the records topic's route lists (none while it does not exist, or its broker group
        is away)."""
        try:
            route = self.client.route(self.records_topic, refresh=True)
        except TopicNotFoundError:
            return []
        return sorted({q.broker_name for q in route.queues})

    def _brokers(self, topics: Iterable[str]) -> set[Pair]:
        """Every (topic, broker group) of the routes of ``topics`` now (looked up again: a commit waiting for a
        broker sees it come back), masterless groups included."""
        return {(t, b.broker_name) for t in sorted(set(topics)) for b in self.client.route(t, refresh=True).brokers}

    def _recorded_home(self, brokers: set[Pair]) -> str | None:
        """The home the slots of ``brokers`` (the pairs of the query's topics and option topic) record; None where
        none does (the query's first commit). BrokerUnavailableError while the recorded home is out of the route,
        or a broker group that may record it has no master answering."""
        answers = self.client.query_consumer_offsets(self.home_group, sorted(slot(p) for p in brokers), partial=True)
        prints = {v for v in answers.values() if v is not None}  # a slave's copy counts: it never changes
        if len(prints) > 1:
            raise CommitError(
                f"the slots of producer group {self.producer_group!r} record {len(prints)} different "
                "broker groups as the home of its commit records: is the group used by another query?"
            )
        if not prints:
            unsure = {mq.broker_name for mq in (*answers.failed, *answers.replica)}
            if unsure:
                raise BrokerUnavailableError(
                    f"cannot tell which broker group keeps the commit records of producer group "
                    f"{self.producer_group!r}: {', '.join(sorted(unsure))}, which may record it, have no master "
                    "answering now"
                )
            return None
        recorded = prints.pop()
        home = next((b for _, b in sorted(brokers) if fingerprint(b) == recorded), None)
        if home is None or (self.topic, home) not in brokers:
            holders = sorted({mq.broker_name for mq, v in answers.items() if v == recorded})
            raise BrokerUnavailableError(
                f"the broker group that keeps the commit records of producer group {self.producer_group!r} "
                f"(recorded by {', '.join(holders)}) is not in the route of topic {self.topic!r} now: it is "
                "stopped or unreachable. The records never move to another broker group; if that one is gone "
                "for good, the query can only go on under a new producerGroup, and the batch cut by the crash "
                "may then be written twice"
            )
        return home

    def _first_home(self) -> str:
        masters = sorted(b.broker_name for b in self.client.route(self.topic).brokers if b.master_address)
        if not masters:
            raise BrokerUnavailableError(
                f"topic {self.topic!r} has no broker group with a master now to keep "
                f"the commit records of producer group {self.producer_group!r}"
            )
        return masters[0]

    def _record_home(self, home: str, brokers: set[Pair]) -> None:
        """The home's fingerprint in its own slot, and in as many slots of the other ``brokers`` as answer."""
        fp = fingerprint(home)
        self.client.update_consumer_offsets(self.home_group, {slot((self.topic, home)): fp})
        others = brokers - {(self.topic, home)}
        self.client.update_consumer_offsets(self.home_group, {slot(p): fp for p in others}, partial=True)

    def _create(self, home: str) -> None:
        """Create the records topic, one queue, on the home's master; wait for the route to show it."""
        try:
            self.client.create_topic(self.records_topic, 1, broker_names=[home], seed_topic=self.topic)
        except UnsupportedError as e:
            raise CommitError(
                f"{e}: the commit records of deliveryGuarantee=exactly_once need topic "
                f"{self.records_topic!r}, and this transport cannot create it"
            ) from e
        except RocketMQError as e:
            if isinstance(e, BrokerUnavailableError):
                raise
            raise CommitError(
                f"creating topic {self.records_topic!r} on broker group {home}, which keeps the commit records of "
                f"producer group {self.producer_group!r}, failed: {e}. Create it yourself with one read and one "
                f"write queue on that broker group only (mqadmin updateTopic -b <{home}'s master> -t "
                f"{self.records_topic} -r 1 -w 1), or let this user create topics",
                code=e.code,
                remark=e.remark,
            ) from e
        if self._holders() != [home]:
            raise BrokerUnavailableError(
                f"topic {self.records_topic!r} was created on {home} and is not in the name servers' route yet"
            )

    def _legacy_marker(self, home: str) -> CommitRecord | None:
        """The state the marker of a release before the records topic holds (a consumer offset on the home's
        slot: 2N + 1 while batch N committed, 2N + 2 once done)."""
        mq = slot((self.topic, home))
        what = f"reading the commit marker of producer group {self.producer_group!r} on {home}"
        value = on_masters(
            what, self.client.query_consumer_offsets(self.producer_group + LEGACY_MARKER_SUFFIX, [mq], partial=True)
        )[mq]
        return None if value is None else CommitRecord((value - 1) // 2, Step.STARTED if value % 2 else Step.DONE)

    # -- the records ----------------------------------------------------------------------------------------
    def last(self, home: str) -> CommitRecord | None:
        """The home's last record, read from its master; None where there is none."""
        mq = self.home_queue(home)
        what = f"reading the commit records of producer group {self.producer_group!r}"
        end = on_masters(what, self.client.max_offsets([mq], partial=True))[mq]
        if end == 0:
            return None
        try:
            found = [m for m in self.client.read_range(mq, end - 1, end) if m.queue_offset == end - 1]
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
        self.client.send(self.home_queue(home), message, group=self.producer_group)

    def begin(self, home: str, batch_id: int, pairs: set[Pair]) -> CommitRecord:
        """started(N) over ``pairs``, with their queues' ends now as the scan starts."""
        record = CommitRecord(batch_id, Step.STARTED, frozenset(pairs), self._ends(pairs))
        self.append(home, record)
        return record

    def extend(self, home: str, record: CommitRecord, new: set[Pair]) -> CommitRecord:
        """started(N) over ``record``'s pairs and ``new``, whose queues are scanned from their ends now."""
        extended = CommitRecord(record.batch, Step.STARTED, record.pairs | new, {**self._ends(new), **record.scan})
        self.append(home, extended)
        return extended

    def finish(self, home: str, batch_id: int) -> None:
        self.append(home, CommitRecord(batch_id, Step.DONE))

    def _ends(self, pairs: Iterable[Pair]) -> dict[MessageQueue, int]:
        queues, _ = self._queues(pairs)
        what = "recording where a recovery scans from"
        return dict(on_masters(what, self.client.max_offsets(queues, partial=True)))

    def _queues(self, pairs: Iterable[Pair]) -> tuple[list[MessageQueue], set[MessageQueue]]:
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

    # -- reading back a cut commit --------------------------------------------------------------------------
    def committed_rows(self, record: CommitRecord) -> Counter:
        """How many times each row key of batch ``record.batch`` is stored in the queues of its pairs since the
        commit began: the recorded queues from their recorded starts, queues added since from their first offset.
        CommitError where that cannot be told (a recorded queue no longer readable, a scan window deleted by
        retention, a compaction topic)."""
        batch_id = record.batch
        what = f"reading back the rows of batch {batch_id}"
        self._refuse_compaction(record)
        queues, readable = self._queues(record.pairs)
        starts = dict(record.scan)
        unrecorded = [mq for mq in queues if mq not in starts]  # read from their first offset: nothing to lose
        if unrecorded:
            log.warning(
                "rocketmq sink: %s have no recorded scan start; batch %d's rows are looked for in them from "
                "their first offset",
                ", ".join(map(str, unrecorded)),
                batch_id,
            )
            starts.update(on_masters(what, self.client.min_offsets(unrecorded, partial=True)))
        ends = on_masters(what, self.client.max_offsets(sorted(starts), partial=True))
        moved = [mq for mq in sorted(starts) if ends[mq] > starts[mq]]
        recorded = [mq for mq in moved if mq in record.scan]
        firsts = on_masters(what, self.client.min_offsets(recorded, partial=True)) if recorded else {}
        for mq in moved:
            if mq not in readable:
                raise CommitError(
                    f"{mq} holds messages stored since batch {batch_id}'s commit began (offsets {starts[mq]} to "
                    f"{ends[mq]}), but topic {mq.topic!r} no longer has it as a readable queue (it shrank): which "
                    f"rows of the batch were committed cannot be told. Give {mq.topic!r} on {mq.broker_name} at least "
                    f"{mq.queue_id + 1} read queues again (mqadmin updateTopic -r), then restart the query"
                )
            if firsts.get(mq, starts[mq]) > starts[mq]:
                raise CommitError(
                    f"the broker's retention deleted messages of {mq} stored since batch {batch_id}'s commit began "
                    f"(offsets {starts[mq]} to {firsts[mq]}): which rows of the batch were committed cannot be told, "
                    "and restarting will not change that. To go on, run the query under a new producerGroup, "
                    f"accepting that batch {batch_id} may be written twice"
                )
        prefix = batch_prefix(self.producer_group, batch_id)
        keys: Counter = Counter()
        for mq in moved:
            for m in self.client.read_range(mq, starts[mq], ends[mq]):
                key = m.properties.get(ROW_KEY_PROPERTY)
                if key and key.startswith(prefix):
                    keys[key] += 1
        return keys

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
