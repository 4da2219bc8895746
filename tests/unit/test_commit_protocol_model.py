"""A stateful property-based test of the exactly-once streaming commit (``rmq_spark.sink.transactions.commit_batch``
over ``rmq_spark.sink.commit_records.CommitRecords``): the real protocol code against a model of the brokers
(``tests.support.broker_model``), with Spark's side played by the machine below.

Queries (a query id and a producer group each; a checkpoint reset is a new query id on the same group, from batch 0;
two live queries may share a group) plan micro-batches of rows (identical rows among them), send them as half
messages routed to any writable queue (a replay may route them otherwise) and commit them. Between the steps brokers
stop, are killed, lose their master, come back and flush their consumer offsets; topics grow, shrink and spread to
another broker group, also between a batch's sends and its commit; an election of a replica that lagged cuts a broker
group's queues (asynchronous replication), other producers store messages, time passes. Inside a commit the driver
may die at any write (before or after the broker applied it), an answer may be lost after the request was applied,
a broker group may go away for a while, or be cut by an election, and the driver may die later in that commit. A
failed or cut commit is followed, as Spark does after a restart, by a replay of the same batch id with fresh halves of
the same rows; a commit that returned may still be replayed (the driver died before Spark's commit log).

The invariant: each row of every batch whose commit returned is stored exactly once (counted by row key, over every
queue, readable or not), less the copies a cut took (acknowledged writes that asynchronous replication loses); no row
of any batch is stored more often than the batch has it; a commit that raises raises a RocketMQError saying what
happened, and one refused with nothing going wrong commits none of its halves.

RMQ_SPARK_MODEL_EXAMPLES sets how many runs hypothesis explores (a long exploration: 5000 or more, about 15 a
second, with no time limit)."""

from __future__ import annotations

import inspect
import itertools
import os
from collections import Counter
from dataclasses import dataclass, field

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.model import PROPERTY_UNIQ_KEY, HalfMessage, OutgoingMessage
from rmq_spark.sink.commit_records import CommitRecords
from rmq_spark.sink.row_keys import ROW_KEY_PROPERTY, row_key
from rmq_spark.sink.transactions import commit_batch
from tests.support.broker_model import (
    PRODUCER_GROUP_PROPERTY,
    BrokerModel,
    DriverCrash,
    Faults,
    ModelClient,
    model_time,
)

BROKERS = ("broker-a", "broker-b", "broker-c")
TOPIC = "t0"  # option topic of every query: the home of its records is one of its broker groups
TOPICS = (TOPIC, "t1")
SKEWS = [-4000, 0, 4000]  # how far an elected master's clock runs ahead of the driver's (ms; within CLOCK_SLACK_MS)
RETRY_TIMEOUT = 3.0  # model seconds a commit waits for a broker that is away
EXAMPLES = int(os.environ.get("RMQ_SPARK_MODEL_EXAMPLES", "300"))
if "RMQ_SPARK_MODEL_EXAMPLES" in os.environ:
    pytestmark = pytest.mark.timeout(0)  # a long exploration runs past the suite's 10 minutes a test


def new_records(client: ModelClient, group: str, topic: str, query: str) -> CommitRecords:
    """The commit records of query ``query`` (Spark's streaming query id), for a CommitRecords that takes one."""
    if "query" in inspect.signature(CommitRecords).parameters:
        return CommitRecords(client, group, topic, query=query)
    return CommitRecords(client, group, topic)


def key_of(group: str, query: str, batch: int, topic: str, body: bytes) -> str:
    """A row's key as a task of query ``query`` makes it."""
    extra = {"query": query} if "query" in inspect.signature(row_key).parameters else {}
    return row_key(group=group, batch_id=batch, topic=topic, m=OutgoingMessage(body), **extra)


@dataclass
class Batch:
    """A micro-batch as Spark's offset log fixes it: its rows, the same in every replay."""

    id: int
    rows: list[tuple[str, bytes]]
    keys: list[str]
    halves: list[tuple[str, HalfMessage]] | None = None  # the sent halves of the attempt under way
    completed: bool = False  # a commit of it returned


@dataclass
class Query:
    """A streaming query: its id (kept across restarts, new at a checkpoint reset) and producer group."""

    id: str
    group: str
    next_batch: int = 0
    pending: Batch | None = None  # planned, not yet in Spark's commit log
    alive: bool = True
    batches: list[Batch] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Query({self.id!r}, {self.group!r})"


ROWS = st.lists(st.tuples(st.sampled_from(TOPICS), st.sampled_from([b"x", b"y", b"z"])), min_size=1, max_size=6)
ROUTING = st.lists(st.integers(0, 63), min_size=6, max_size=6)
CHANGES = st.none() | st.tuples(st.sampled_from(TOPICS), st.sampled_from(BROKERS), st.sampled_from([1, 2, 4, 8]))
CRASH = st.tuples(st.just("crash"), st.integers(0, 12), st.booleans())
FAULTS = st.one_of(
    st.none(),
    CRASH,
    CRASH,
    st.tuples(st.just("lost"), st.integers(0, 40)),
    st.tuples(
        st.just("away"),
        st.integers(0, 40),
        st.sampled_from(BROKERS),
        st.sampled_from(["stop", "kill", "master"]),
        st.sampled_from([0.5, 2.0, 60.0]),
    ),
    st.tuples(
        st.just("cut"),
        st.integers(0, 40),
        st.sampled_from(BROKERS),
        st.integers(1, 4),
        st.sampled_from(SKEWS),
        st.none() | st.tuples(st.integers(0, 12), st.booleans()),
    ),
)


def faults_of(fault: tuple | None) -> Faults:
    """The faults of one commit: None, ("crash", write index, after it was applied), ("crash after", what the
    write's description contains), ("lost", request index), ("away", request index, broker group, how, seconds),
    ("cut", request index, broker group, lag, clock skew, None or a later crash as "crash" has it)."""
    if fault is None:
        return Faults()
    if fault[0] == "crash":
        return Faults(crash=(fault[1], fault[2]))
    if fault[0] == "crash after":
        return Faults(crash_after=fault[1])
    if fault[0] == "lost":
        return Faults(lost=fault[1])
    if fault[0] == "cut":
        return Faults(cut=fault[1:5], crash=fault[5])
    return Faults(away=fault[1:])


class CommitProtocol(RuleBasedStateMachine):
    """Spark's driver and tasks around the commit protocol, and the brokers' faults (module docstring)."""

    queries = Bundle("queries")

    def __init__(self) -> None:
        super().__init__()
        self.model = BrokerModel({"broker-a": {TOPIC: 8}, "broker-b": {"t1": 4}, "broker-c": {}})
        self.ids = itertools.count(1)
        self.all_queries: list[Query] = []
        self.completed: Counter[str] = Counter()  # rows of batches whose commit returned
        self.open: Counter[str] = Counter()  # rows of batches not (yet) completed
        self.log: list[str] = []

    # -- queries -------------------------------------------------------------------------------------------
    @rule(target=queries, group=st.sampled_from(["g1", "g2"]))
    def start_query(self, group: str) -> Query:
        """A query with a new checkpoint on ``group`` (a group a live query may use too)."""
        q = Query(f"q{next(self.ids)}", group)
        self.all_queries.append(q)
        return q

    @rule(target=queries, query=queries)
    def reset_checkpoint(self, query: Query) -> Query:
        """The query is stopped and started again from a new checkpoint: a new query id, batch 0 again; its batch
        under way is abandoned."""
        query.alive = False
        return self.start_query(query.group)

    @rule(query=queries, rows=ROWS, routing=ROUTING)
    def send(self, query: Query, rows: list[tuple[str, bytes]], routing: list[int]) -> None:
        """The query's tasks send the rows of its next batch (``rows``), or of the batch it replays, as half messages,
        each to the writable queue ``routing`` picks, in an order it picks."""
        if not query.alive or (query.pending is not None and query.pending.halves is not None):
            return
        batch = query.pending
        if batch is None:
            keys = [key_of(query.group, query.id, query.next_batch, t, body) for t, body in rows]
            batch = query.pending = Batch(query.next_batch, rows, keys)
            query.batches.append(batch)
            self.open.update(keys)
        halves = []
        for i in sorted(range(len(batch.rows)), key=lambda i: routing[i]):
            topic, body = batch.rows[i]
            queues = self.model.writable_queues(topic)
            if not queues:
                return  # the task fails: Spark runs the batch again
            message = OutgoingMessage(
                body,
                properties={
                    ROW_KEY_PROPERTY: batch.keys[i],
                    PROPERTY_UNIQ_KEY: f"u{next(self.ids)}",
                    PRODUCER_GROUP_PROPERTY: query.group,
                },
            )
            halves.append((batch.keys[i], self.model.send_half(queues[routing[i] % len(queues)], message, query.group)))
        batch.halves = halves

    @rule(query=queries, rows=ROWS, routing=ROUTING, change=CHANGES, fault=FAULTS, spark_logs=st.booleans())
    def commit(
        self,
        query: Query,
        rows: list[tuple[str, bytes]],
        routing: list[int],
        change: tuple[str, str, int] | None,
        fault: tuple | None,
        spark_logs: bool,
    ) -> None:
        """The driver commits the query's batch, with ``fault`` injected. Its tasks send it first unless they have
        (``send``), and then topic ``change`` = (topic, broker group, queues) is made. ``spark_logs``: Spark writes
        its commit log once the commit returned (else the driver dies first and the batch is replayed)."""
        if query.pending is None or query.pending.halves is None:
            self.send(query, rows, routing)
            if change is not None:
                self.set_queues(*change)
        batch = query.pending
        if not query.alive or batch is None or batch.halves is None:
            return
        halves, batch.halves = batch.halves, None
        faults = faults_of(fault)
        clean = self.model.all_up()
        client = ModelClient(self.model, faults)
        what = f"commit of batch {batch.id} of {query} ({len(halves)} halves)"
        try:
            with model_time(self.model):
                outcome = commit_batch(
                    new_records(client, query.group, TOPIC, query.id), batch.id, halves, RETRY_TIMEOUT
                )
        except DriverCrash:
            self.log.append(f"{what}: driver died ({faults.fired})")
            return
        except RocketMQError as e:
            self.log.append(f"{what}: {e} ({faults.fired})")
            assert len(str(e)) > len(e.condition) + 20, f"the {what} raised an error that says nothing: {e!r}"
            if clean and not faults.fired and self.model.all_up():
                committed = [h.msg_id for _, h in halves if self.model.committed_halves[h.msg_id]]
                assert not committed, f"the {what} was refused ({e}) after committing {len(committed)} halves"
            return
        self.log.append(f"{what}: {outcome} ({faults.fired})")
        if not batch.completed:
            batch.completed = True
            self.open.subtract(batch.keys)
            self.completed.update(batch.keys)
        if spark_logs:
            query.pending = None
            query.next_batch += 1

    # -- the brokers ---------------------------------------------------------------------------------------
    @rule(broker=st.sampled_from(BROKERS), how=st.sampled_from(["stop", "kill", "master"]))
    def broker_away(self, broker: str, how: str) -> None:
        self.model.take_away(broker, how)

    @rule(broker=st.sampled_from(BROKERS))
    def elect(self, broker: str) -> None:
        self.model.elect(broker)

    @rule(broker=st.sampled_from(BROKERS), lag=st.integers(1, 4), skew=st.sampled_from(SKEWS))
    def elect_lagging(self, broker: str, lag: int, skew: int) -> None:
        """An election of a replica ``lag`` messages behind its master, its clock ``skew`` ms ahead of the
        driver's, cuts every queue of ``broker``."""
        self.log.append(f"{broker} cut by {lag} (clock {skew:+} ms): {len(self.model.cut(broker, lag, skew))} lost")

    @rule(topic=st.sampled_from(TOPICS), pick=st.integers(0, 63), count=st.integers(1, 3))
    def other_producer(self, topic: str, pick: int, count: int) -> None:
        """Another producer stores ``count`` messages in one writable queue of ``topic``."""
        queues = self.model.writable_queues(topic)
        for _ in range(count if queues else 0):
            self.model.produce(queues[pick % len(queues)], OutgoingMessage(b"other"))

    @rule(seconds=st.sampled_from([1.0, 10.0, 60.0]))
    def time_passes(self, seconds: float) -> None:
        self.model.tick(seconds)

    @rule()
    def copy_configs(self) -> None:
        self.model.copy_configs()

    @rule(broker=st.sampled_from(BROKERS))
    def broker_back(self, broker: str) -> None:
        self.model.bring_back(broker)

    @rule()
    def flush_offsets(self) -> None:
        self.model.flush()

    @rule(topic=st.sampled_from(TOPICS), broker=st.sampled_from(BROKERS), queues=st.sampled_from([1, 2, 4, 8]))
    def set_queues(self, topic: str, broker: str, queues: int) -> None:
        """updateTopic: ``topic`` added to ``broker``, grown or shrunk there."""
        self.model.set_queues(topic, broker, queues)

    # -- the invariant ---------------------------------------------------------------------------------------
    @invariant()
    def each_row_is_stored_once(self) -> None:
        stored = self.model.stored(ROW_KEY_PROPERTY)
        cut = Counter(
            m.properties[ROW_KEY_PROPERTY] for m in self.model.lost_to_cuts if ROW_KEY_PROPERTY in m.properties
        )
        wrong = []
        for key in sorted(set(stored) | set(self.completed)):
            low, high = max(0, self.completed[key] - cut[key]), self.completed[key] + self.open[key]
            if not low <= stored[key] <= high:
                owners = [
                    f"batch {b.id} of {q} ({'completed' if b.completed else 'open'}, {b.keys.count(key)}x)"
                    for q in self.all_queries
                    for b in q.batches
                    if key in b.keys
                ]
                wrong.append(f"{key}: stored {stored[key]}x, expected {low}..{high}x ({', '.join(owners)})")
        assert not wrong, "rows lost or duplicated:\n  " + "\n  ".join(wrong) + "\nsteps:\n  " + "\n  ".join(self.log)


CommitProtocol.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCommitProtocol = CommitProtocol.TestCase


# Holes the exploration found in the protocol, kept as fixed cases.
ONE_ROW = {"rows": [(TOPIC, b"x")], "routing": [0] * 6, "change": None}


def test_a_new_checkpoint_on_a_used_producer_group_commits_its_batch_0() -> None:
    """A reset checkpoint's batch 0 is not the old query's batch 0 replayed."""
    state = CommitProtocol()
    old = state.start_query(group="g1")
    state.commit(query=old, fault=None, spark_logs=True, **ONE_ROW)
    new = state.reset_checkpoint(query=old)
    state.commit(query=new, fault=None, spark_logs=True, **ONE_ROW)
    state.each_row_is_stored_once()


def test_a_replay_while_the_home_is_away_and_a_target_joined_since_is_not_committed_again() -> None:
    """The query's topic spread to a broker group after its first commit, whose slot has no fingerprint of the home;
    the home is away when the driver, dead before Spark's commit log, replays the batch."""
    state = CommitProtocol()
    query = state.start_query(group="g1")
    state.commit(query=query, fault=None, spark_logs=False, **ONE_ROW)
    state.set_queues(topic=TOPIC, broker="broker-b", queues=4)
    state.broker_away(broker="broker-a", how="stop")
    state.commit(query=query, fault=None, spark_logs=True, **ONE_ROW)
    state.each_row_is_stored_once()


def test_a_half_committed_into_a_queue_its_topic_lost_before_the_commit_is_not_committed_again() -> None:
    """t1 shrank from 4 queues to 1 between the sends and the commit: END_TRANSACTION still stores a half sent to
    queue 1 there, and the driver dies right after."""
    state = CommitProtocol()
    query = state.start_query(group="g1")
    rows = [("t1", b"x"), ("t1", b"y")]
    cut = ("crash after", "END_TRANSACTION commit of half-2 (t1:broker-b/1)")
    state.commit(
        query=query, rows=rows, routing=[0, 1, 0, 0, 0, 0], change=("t1", "broker-b", 1), fault=cut, spark_logs=True
    )
    state.commit(query=query, rows=rows, routing=[0] * 6, change=None, fault=None, spark_logs=True)
    state.each_row_is_stored_once()


def test_a_replay_after_every_broker_group_was_killed_waits_for_the_home() -> None:
    """Every broker group is killed before it flushed its consumer offsets (a power loss that took the driver too),
    and all but the home come back: the home's fingerprints went with the offsets, and the replay must still not be
    taken for the query's first commit."""
    state = CommitProtocol()
    state.set_queues(topic=TOPIC, broker="broker-c", queues=4)
    query = state.start_query(group="g1")
    state.commit(query=query, fault=None, spark_logs=False, **ONE_ROW)
    for broker in BROKERS:
        state.broker_away(broker=broker, how="kill")
    state.broker_back(broker="broker-b")
    state.broker_back(broker="broker-c")
    state.commit(query=query, fault=None, spark_logs=True, **ONE_ROW)
    state.each_row_is_stored_once()


def test_a_replay_on_a_broker_group_that_missed_the_last_commit_waits_for_the_home() -> None:
    """broker-c was stopped during the commit, so it holds no fingerprint; the topic spreads to it, and at the replay
    it is the only broker group up."""
    state = CommitProtocol()
    query = state.start_query(group="g1")
    state.broker_away(broker="broker-c", how="stop")
    state.commit(query=query, fault=None, spark_logs=False, **ONE_ROW)
    state.broker_back(broker="broker-c")
    state.broker_away(broker="broker-b", how="stop")
    state.broker_away(broker="broker-a", how="stop")
    state.set_queues(topic=TOPIC, broker="broker-c", queues=1)
    state.commit(query=query, fault=None, spark_logs=True, **ONE_ROW)
    state.each_row_is_stored_once()


def test_a_master_elected_before_it_copied_the_records_topic_reads_the_records() -> None:
    """The home's new master (a DLedger leader change, a Controller-mode election) was elected before it copied the
    records topic's config, which the name servers still route to it: the replay after the driver died before
    Spark's commit log finds the batch's records and completes, rather than waiting for a topic that never comes."""
    state = CommitProtocol()
    query = state.start_query(group="g1")
    state.commit(query=query, fault=None, spark_logs=False, **ONE_ROW)
    (home,) = [
        b.name for b in state.model.brokers.values() if any(t.startswith("rmq_spark_commits_") for t in b.topics)
    ]
    state.elect(broker=home)
    state.commit(query=query, fault=None, spark_logs=True, **ONE_ROW)
    assert query.pending is None, f"the replay did not complete: {state.log[-1]}"
    state.each_row_is_stored_once()


@pytest.mark.parametrize("lag, skew", [(1, 0), (2, -4000), (3, 4000)])
def test_a_cut_at_any_request_of_a_commit_and_a_crash_after_it_leave_each_row_once(lag: int, skew: int) -> None:
    """An election cuts broker-b, a target whose queue holds a message before the batch's (the records are on
    broker-a), in the middle of the commit, which goes on with the elected master, storing rows below where the
    commit began, and the driver dies at a later write: the replay finds those rows and stores each lost one again."""
    rows = {"rows": [("t1", b"x"), ("t1", b"y"), ("t1", b"z")], "routing": [0] * 6, "change": None}
    for request, write in itertools.product(range(30), range(12)):
        state = CommitProtocol()
        query = state.start_query(group="g1")
        state.commit(query=query, rows=[("t1", b"w")], routing=[0] * 6, change=None, fault=None, spark_logs=True)
        state.time_passes(seconds=60.0)
        cut = ("cut", request, "broker-b", lag, skew, (write, True))
        state.commit(query=query, fault=cut, spark_logs=True, **rows)
        state.time_passes(seconds=60.0)
        state.commit(query=query, fault=None, spark_logs=True, **rows)
        state.each_row_is_stored_once()


def test_a_cut_of_a_queue_its_topic_no_longer_reads_is_refused_not_written_twice() -> None:
    """t1 shrank from 4 queues to 2 between the sends and the commit, whose halves for queue 3 are still stored
    there; an election cuts broker-b under the commit. Queue 3 cannot be read, so where the batch's rows are in it
    cannot be told: the replay must refuse rather than store them again. One state it cannot tell from a commit
    that stored nothing there is left out: the cut refilled to exactly where the commit began (DESIGN §11)."""
    rows = {"rows": [("t1", b"x"), ("t1", b"y"), ("t1", b"z")], "routing": [3] * 6}
    refused = 0
    for lag, request, write in itertools.product((2, 4), range(30), range(12)):
        state = CommitProtocol()
        query = state.start_query(group="g1")
        state.commit(query=query, fault=None, spark_logs=True, **ONE_ROW)
        before = {"rows": [("t1", b"a"), ("t1", b"b")], "routing": [3] * 6, "change": None}
        state.commit(query=query, fault=None, spark_logs=True, **before)
        state.time_passes(seconds=60.0)
        cut = ("cut", request, "broker-b", lag, 0, (write, True))
        state.commit(query=query, fault=cut, spark_logs=True, change=("t1", "broker-b", 2), **rows)
        if len(state.model.brokers["broker-b"].queues[("t1", 3)]) == 2:  # its end is where the commit began
            continue
        state.time_passes(seconds=60.0)
        state.commit(query=query, fault=None, spark_logs=True, change=None, **rows)
        state.each_row_is_stored_once()
        refused += "its tail was cut" in state.log[-1]
    assert refused, "no replay met a cut queue it cannot read"
