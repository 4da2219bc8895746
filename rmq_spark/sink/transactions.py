"""Exactly-once writes: ending half messages on the driver, and the commit records that make a streaming batch's
commit happen once across driver crashes and broker outages.

The records are consumer offsets of groups named after the query's producer group, on queue 0 (the *slot*) or on
every queue of a (topic, broker group) *pair*, read from masters only (a slave's copy may lag):

- the *home*, where the marker lives: the slot of option ``topic`` on the broker group first by name with a master
  at the query's first commit. It never moves: the slots record its name's fingerprint (group
  ``<producerGroup>_commit_home``), so that a commit finds it while it is out of the route, and waits for it;
- the *marker* (group ``<producerGroup>_commits`` on the home): ``2N + 1`` while batch N commits, ``2N + 2`` once
  done;
- the *attempt* (group ``<producerGroup>_commit_attempt`` on the home): a nonce, a parity and how many pairs
  besides the home's one the commit may write to; each of them holds the nonce in group
  ``<producerGroup>_commit_pairs`` + parity;
- where a recovery scans each queue of those pairs from (group ``<producerGroup>_commit_scan``): the queue's end
  when the commit began (a queue without one is scanned from its first offset). The pairs' queues are those of a
  route that holds every pair's broker group, never of one that misses a group not registered again yet.

A streaming commit of batch N: *started(N)* records the scan starts, the pairs' nonce, the attempt, then the marker
``2N + 1``; the halves are committed, each queue's in row order; *done(N)*: the marker becomes ``2N + 2``. A commit
of N that finds done(N) is a replay after a crash between the last step and Spark's own commit log: its new halves
are rolled back. One that finds started(N) follows a crash while halves were committed: every pair of the attempt
must answer (else it waits up to brokerRetryTimeoutMs, then fails: a restart completes the batch), the messages
stored since the scan starts are read back, and only the new halves whose row key is not among them are committed.
Pairs the replay writes to and the attempt does not name join it first: their scan starts, then a new attempt
(fresh nonce, other parity) over all its pairs, then the home's record, so that the pairs of a recovery cut by a
crash are still recorded, and tags of an extension cut before its record are never counted. A row key names the
micro-batch, the task's partition and the row's content (with a count for identical rows), so it holds when a
replayed partition yields the same rows, in any order, and never matches a row of another batch.
"""
from __future__ import annotations

import hashlib
import logging
import secrets
from collections import defaultdict
from typing import Callable, Iterable, Sequence, TypeVar

from rmq_spark.client.base import Answers, BaseClient
from rmq_spark.client.errors import BrokerBusyError, BrokerUnavailableError, RETRYABLE, RocketMQError
from rmq_spark.client.model import PROPERTY_UNIQ_KEY, HalfMessage, MessageQueue, OutgoingMessage
from rmq_spark.sink.retry import Retries

log = logging.getLogger(__name__)
T = TypeVar("T")
Pair = tuple[str, str]  # (topic, broker group)

ROW_KEY_PROPERTY = "rmqSparkRow"
MARKER_SUFFIX = "_commits"  # the marker group: producerGroup + this
SCAN_SUFFIX = "_commit_scan"  # where a recovery scans each queue of a pair from
ATTEMPT_SUFFIX = "_commit_attempt"  # on the home: the attempt of the commit under way
PAIRS_SUFFIX = "_commit_pairs"  # + "0" or "1" (the attempt's parity): on each pair of the attempt, its nonce
HOME_SUFFIX = "_commit_home"  # the fingerprint of the home's broker group name


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


def slot(pair: Pair) -> MessageQueue:
    """The queue whose group offsets hold a pair's records: its queue 0."""
    return MessageQueue(pair[0], pair[1], 0)


def fingerprint(broker_name: str) -> int:
    """A broker group name as a consumer offset (a non-negative long)."""
    return int.from_bytes(hashlib.blake2b(broker_name.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def attempt_word(nonce: int, parity: int, pairs: int) -> int:
    """The home's record of an attempt: its nonce, the group its tags are in (``_commit_pairs`` + parity) and how
    many pairs carry them."""
    if pairs > 0xFFFF:
        raise CommitError(f"a micro-batch that writes to {pairs} (topic, broker group) pairs is more than the commit "
                          "record holds (65535)")
    return nonce << 24 | parity << 16 | pairs


def read_attempt(word: int) -> tuple[int, int, int]:
    """``attempt_word``'s nonce, parity and pair count."""
    return word >> 24, word >> 16 & 0xFF, word & 0xFFFF


def pairs_of(halves: Iterable[HalfMessage]) -> set[Pair]:
    """The (topic, broker group) pairs that ``halves`` go to."""
    return {(h.queue.topic, h.queue.broker_name) for h in halves}


def on_masters(what: str, answers: Answers) -> Answers:
    """``answers`` when every one came from a master; else BrokerUnavailableError naming the broker groups whose
    master did not answer (a slave's copy of consumer offsets lags behind its master's)."""
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
        self.marker_group = producer_group + MARKER_SUFFIX
        self.scan_group = producer_group + SCAN_SUFFIX
        self.attempt_group = producer_group + ATTEMPT_SUFFIX
        self.pairs_group = producer_group + PAIRS_SUFFIX
        self.home_group = producer_group + HOME_SUFFIX

    def home_pair(self, home: str) -> Pair:
        """The pair whose slot keeps the marker and the attempt."""
        return (self.topic, home)

    # -- reads -----------------------------------------------------------------------------------------------
    def _brokers(self, topics: Iterable[str]) -> set[Pair]:
        """Every (topic, broker group) of the routes of ``topics`` now (looked up again: a commit waiting for a
        broker sees it come back), masterless groups included."""
        return {(t, b.broker_name) for t in sorted(set(topics)) for b in self.client.route(t, refresh=True).brokers}

    def _queues(self, pairs: Iterable[Pair]) -> list[MessageQueue]:
        """Every queue of ``pairs`` in their topics' routes (read or write). BrokerUnavailableError names the pairs
        whose broker group is not in its topic's route (stopped, or not registered again yet after a restart):
        their queues cannot be told, and a record or a read-back that left them out would hide their rows from a
        recovery."""
        wanted: dict[str, set[str]] = defaultdict(set)
        for t, b in pairs:
            wanted[t].add(b)
        out, missing = set(), []
        for t, brokers in sorted(wanted.items()):
            route = self.client.route(t)
            if not brokers <= {q.broker_name for q in route.queues}:
                route = self.client.route(t, refresh=True)  # the cached route may predate a broker's return
            present = {q.broker_name for q in route.queues}
            missing += [f"{b} ({t})" for b in sorted(brokers - present)]
            for q in route.queues:
                if q.broker_name in brokers:
                    out.update(MessageQueue(t, q.broker_name, i)
                               for i in range(max(q.read_queue_nums, q.write_queue_nums)))
        if missing:
            raise BrokerUnavailableError(f"broker group(s) {', '.join(missing)} of the commit of producer group "
                                         f"{self.producer_group!r} are not in the topic route now (stopped, or not "
                                         "registered again yet after a restart)")
        return sorted(out)

    def _value(self, group: str, pair: Pair, what: str) -> int | None:
        """``group``'s offset on the slot of ``pair``, as its master holds it."""
        mq = slot(pair)
        return on_masters(what, self.client.query_consumer_offsets(group, [mq], partial=True))[mq]

    def locate(self, topics: Iterable[str]) -> tuple[str, int | None]:
        """The home and its marker. The home is the broker group whose fingerprint the slots of ``topics`` and of
        option topic record, else (the query's first commit) the first broker group of option topic by name with
        a master. BrokerUnavailableError while the home, or a broker group that may record it, is away."""
        brokers = self._brokers({*topics, self.topic})
        answers = self.client.query_consumer_offsets(self.home_group, sorted(slot(p) for p in brokers), partial=True)
        prints = {v for v in answers.values() if v is not None}  # a slave's copy counts: it never changes
        if len(prints) > 1:
            raise CommitError(f"the slots of producer group {self.producer_group!r} record {len(prints)} different "
                              "broker groups as the home of its commit marker: is the group used by another query?")
        if prints:
            recorded = prints.pop()
            home = next((b for _, b in sorted(brokers) if fingerprint(b) == recorded), None)
            if home is None or (self.topic, home) not in brokers:
                holders = sorted({mq.broker_name for mq, v in answers.items() if v == recorded})
                raise BrokerUnavailableError(
                    f"the broker group that keeps the commit marker of producer group {self.producer_group!r} "
                    f"(recorded by {', '.join(holders)}) is not in the route of topic {self.topic!r} now: it is "
                    "stopped or unreachable. The marker never moves to another broker group; if that one is gone "
                    "for good, the query can only go on under a new producerGroup, and the batch cut by the crash "
                    "may then be written twice")
        else:
            unsure = {mq.broker_name for mq in answers.failed} | {mq.broker_name for mq in answers.replica}
            if unsure:
                raise BrokerUnavailableError(
                    f"cannot tell which broker group keeps the commit marker of producer group "
                    f"{self.producer_group!r}: {', '.join(sorted(unsure))}, which may record it, have no master "
                    "answering now")
            masters = sorted(b.broker_name for b in self.client.route(self.topic).brokers if b.master_address)
            if not masters:
                raise BrokerUnavailableError(f"topic {self.topic!r} has no broker group with a master now to keep "
                                             f"the commit marker of producer group {self.producer_group!r}")
            home = masters[0]
        return home, self._value(self.marker_group, self.home_pair(home),
                                 f"reading the commit marker of producer group {self.producer_group!r} on {home}")

    def participants(self, home: str, topics: Iterable[str]) -> tuple[set[Pair], tuple[int, int, int]]:
        """The pairs that joined the attempt the home records (besides the home), and that attempt. Every one must
        answer: BrokerUnavailableError names those away."""
        what = f"reading the commit attempt of producer group {self.producer_group!r}"
        word = self._value(self.attempt_group, self.home_pair(home), what)
        if word is None:
            raise CommitError(f"the commit marker of producer group {self.producer_group!r} on {home} says a commit "
                              "began, but its record of the pairs it wrote to is missing (the broker lost it)")
        nonce, parity, count = attempt = read_attempt(word)
        pairs = self._brokers({*topics, self.topic}) - {self.home_pair(home)}
        answers = self.client.query_consumer_offsets(self.pairs_group + str(parity), sorted(slot(p) for p in pairs),
                                                     partial=True)
        joined = {(mq.topic, mq.broker_name) for mq, v in answers.items() if mq not in answers.replica and v == nonce}
        if len(joined) != count:
            away = sorted({mq.broker_name for mq in (*answers.failed, *answers.replica)})
            found = ", ".join(f"{b} ({t})" for t, b in sorted(joined)) or "none"
            raise BrokerUnavailableError(
                f"the commit being recovered wrote to {count} (topic, broker group) pair(s) besides the marker's, "
                f"and {len(joined)} answer now ({found}); the others are "
                + (f"on {', '.join(away)}, whose master does not answer" if away else
                   "out of the routes of the batch's topics (their broker groups stopped), or the replayed batch "
                   "writes to other topics than the first attempt"))
        return joined, attempt

    def committed_rows(self, batch_id: int, pairs: Iterable[Pair]) -> set[str]:
        """The row keys of batch ``batch_id`` stored in the queues of ``pairs`` since their recorded starts."""
        queues = self._queues(pairs)
        what = f"reading back the rows of batch {batch_id}"
        starts = on_masters(what, self.client.query_consumer_offsets(self.scan_group, queues, partial=True))
        unrecorded = [mq for mq in queues if starts[mq] is None]
        if unrecorded:  # a queue newer than the record, or a broker that lost it: read the queue whole
            log.warning("rocketmq sink: %s have no recorded scan start; batch %d's rows are looked for in them from "
                        "their first offset", ", ".join(map(str, unrecorded)), batch_id)
            starts.update(on_masters(what, self.client.min_offsets(unrecorded, partial=True)))
        ends = on_masters(what, self.client.max_offsets(queues, partial=True))
        prefix = batch_prefix(self.producer_group, batch_id)
        keys = set()
        for mq, end in ends.items():
            for m in self.client.read_range(mq, starts[mq], end):
                key = m.properties.get(ROW_KEY_PROPERTY)
                if key and key.startswith(prefix):
                    keys.add(key)
        return keys

    # -- writes (each to a master) ---------------------------------------------------------------------------
    def _scan_from_now(self, pairs: set[Pair]) -> None:
        """Record the ends of the queues of ``pairs`` now as where a recovery scans them from."""
        ends = on_masters("recording where a recovery scans from",
                          self.client.max_offsets(self._queues(pairs), partial=True))
        self.client.update_consumer_offsets(self.scan_group, dict(ends))

    def _tag(self, home: str, pairs: set[Pair], nonce: int, parity: int) -> None:
        """Tag ``pairs`` with the attempt's nonce, and every slot with the home's fingerprint."""
        self.client.update_consumer_offsets(self.pairs_group + str(parity), {slot(p): nonce for p in pairs})
        fp = fingerprint(home)
        self.client.update_consumer_offsets(self.home_group, {slot(p): fp for p in pairs | {self.home_pair(home)}})
        others = self._brokers([self.topic]) - pairs  # best effort: the more slots record the home, the better
        self.client.update_consumer_offsets(self.home_group, {slot(p): fp for p in others}, partial=True)

    def begin(self, home: str, batch_id: int, pairs: set[Pair]) -> None:
        """started(N): where to scan ``pairs`` and the home's own pair from, a new attempt over ``pairs``, the
        marker."""
        pairs = pairs - {self.home_pair(home)}
        nonce = secrets.randbits(32)
        self._scan_from_now(pairs | {self.home_pair(home)})
        self._tag(home, pairs, nonce, 0)
        self.client.update_consumer_offsets(self.attempt_group, {slot(self.home_pair(home)):
                                                                 attempt_word(nonce, 0, len(pairs))})
        self.mark(home, started(batch_id))

    def extend(self, home: str, attempt: tuple[int, int, int], joined: set[Pair], new: set[Pair]) -> None:
        """Add ``new`` pairs to the attempt: where to scan them from, then a new attempt over ``joined`` and
        ``new`` tagged in the other parity's group, then the home's word. Tags of an extension cut before the
        word are never counted: they carry a nonce no word names."""
        _, parity, _ = attempt
        nonce = secrets.randbits(32)
        self._scan_from_now(new)
        self._tag(home, joined | new, nonce, 1 - parity)
        self.client.update_consumer_offsets(self.attempt_group, {slot(self.home_pair(home)):
                                                                 attempt_word(nonce, 1 - parity, len(joined | new))})

    def mark(self, home: str, value: int) -> None:
        """Set the marker."""
        self.client.update_consumer_offsets(self.marker_group, {slot(self.home_pair(home)): value})


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
                raise CommitError(f"{late}. Restarting the query completes the batch exactly once when the broker "
                                  "is back", code=late.code, remark=late.remark) from e


def commit_batch(records: CommitRecords, batch_id: int, halves: Sequence[tuple[str, HalfMessage]],
                 retry_timeout: float) -> str:
    """Commit streaming batch ``batch_id`` exactly once; answers what happened: committed, replayed (already
    committed: the halves were rolled back) or recovered (part had been committed by an earlier attempt). A broker
    that is away is waited for up to ``retry_timeout`` seconds."""
    group = records.producer_group
    handles = [h for _, h in halves]
    pairs = pairs_of(handles)
    topics = {t for t, _ in pairs}
    home, state = patiently(f"finding the commit marker of batch {batch_id}", lambda: records.locate(topics),
                            retry_timeout)
    if state is not None and state > done(batch_id):
        raise CommitError(f"the commit marker of producer group {group!r} (group {records.marker_group!r} on "
                          f"{slot(records.home_pair(home))}) is at batch {(state - 1) // 2}, past this query's batch "
                          f"{batch_id}: another query uses this producerGroup. Give each exactly_once query its own "
                          "producerGroup, kept across restarts")
    if state is not None and state >= done(batch_id):
        end_halves(records.client, handles, commit=False, group=group, retry_timeout=retry_timeout)
        return "replayed"
    outcome = "committed"
    if state == started(batch_id):
        joined, attempt = patiently(f"recovering batch {batch_id}", lambda: records.participants(home, topics),
                                    retry_timeout)
        new = pairs - joined - {records.home_pair(home)}
        if new:
            patiently(f"recording the new targets of batch {batch_id}",
                      lambda: records.extend(home, attempt, joined, new), retry_timeout)
        already = patiently(f"reading back the rows of batch {batch_id}",
                            lambda: records.committed_rows(batch_id, joined | {records.home_pair(home)}),
                            retry_timeout)
        end_halves(records.client, [h for key, h in halves if key in already], commit=False, group=group,
                   retry_timeout=retry_timeout)
        handles = [h for key, h in halves if key not in already]
        outcome = "recovered"
    else:
        patiently(f"starting the commit of batch {batch_id}", lambda: records.begin(home, batch_id, pairs),
                  retry_timeout)
    end_halves(records.client, handles, commit=True, group=group, retry_timeout=retry_timeout)
    patiently(f"marking batch {batch_id} committed", lambda: records.mark(home, done(batch_id)), retry_timeout)
    return outcome
