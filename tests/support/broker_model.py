"""A model of RocketMQ broker groups for property-based tests of the sink's streaming commit protocol, and a client
over it (``ModelClient``, a real ``BaseClient`` whose transport primitives the model serves).

What the model keeps, as the brokers do: topics with a queue count on each broker group; messages with their
properties and store times (the model clock's) in consume queues that outlive any crash, unless an election of a
replica that lagged cuts their tails (``cut``); half messages, which END_TRANSACTION commit stores into the
half's own queue id (the broker never checks it against the topic's queue count now) and stores again if committed
twice; consumer offsets, which a killed broker forgets unless they were flushed. A broker group can leave the route
(stopped or killed: its requests raise BrokerUnavailableError, the one in flight as it goes ConnectionLostError) or
lose its master (its slave answers reads, as a replica, and refuses writes), and come back.

What a test injects into one commit through ``Faults``: the driver dies at a chosen write (``DriverCrash``, before or
after the broker applied it), a request is applied and its answer lost (RequestTimeoutError), a broker group goes
away at a chosen request for a while of model time, or is cut by an election there. ``model_time`` makes the
protocol's clocks the model's and its backoff sleeps model time."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import (
    BrokerError,
    BrokerUnavailableError,
    ConnectionLostError,
    RequestTimeoutError,
    RocketMQError,
    TopicNotFoundError,
)
from rmq_spark.client.model import (
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    HalfMessage,
    Message,
    MessageQueue,
    OutgoingMessage,
    QueueData,
    SendResult,
    TopicRoute,
)
from rmq_spark.client.system_topics import RECORDS_TOPIC_PREFIX

MASTER = "master"  # up: in the route, its master answers
SLAVE_ONLY = "slave only"  # in the route with its slave alone: reads answered as a replica's, writes refused
AWAY = "away"  # out of the route: every request fails

PRODUCER_GROUP_PROPERTY = "PGROUP"


NAME_SERVER = "127.0.0.1:9876"  # the model's one name server


class DriverCrash(BaseException):
    """The driver process died at this request (injected). A BaseException: no code of a dying process runs on."""


@dataclass
class Broker:
    """One broker group."""

    name: str
    topics: dict[str, int]  # queue count (read = write) of each topic it has
    state: str = MASTER
    back_at: float | None = None  # a timed outage ends at this model time
    # each queue's messages with their store times (ms)
    queues: dict[tuple[str, int], list[tuple[OutgoingMessage, int]]] = field(default_factory=lambda: defaultdict(list))
    flushed: dict[tuple[str, str, int], int] = field(default_factory=dict)  # (group, topic, queue id) -> offset
    unflushed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    halves: dict[int, tuple[MessageQueue, OutgoingMessage, str]] = field(default_factory=dict)  # by log offset
    # topics created on the master since its replicas last copied its topic configs (every 10 s in RocketMQ)
    uncopied: set[str] = field(default_factory=set)
    # topics the name servers still route to the group whose config its master lacks (elected before it copied
    # them): their messages are there, and a pull or send answers TOPIC_NOT_EXIST until the topic is created again
    unconfigured: dict[str, int] = field(default_factory=dict)
    skew_ms: int = 0  # how far its master's clock runs ahead of the driver's

    def configured(self, topic: str, what: str) -> None:
        """TopicNotFoundError (the broker's TOPIC_NOT_EXIST) where the master lacks ``topic``'s config."""
        if topic in self.unconfigured:
            raise TopicNotFoundError(f"{what}: topic[{topic}] not exist, apply first please!", code=17)


class BrokerModel:
    """The broker groups of a cluster and a model clock (seconds, advanced by the protocol's backoff sleeps)."""

    def __init__(self, topics: dict[str, dict[str, int]]) -> None:
        """``topics``: per broker group name, its topics and their queue counts."""
        # every broker also registers a topic named after itself (RocketMQ's brokerTopicEnable, on by default)
        self.brokers = {name: Broker(name, {name: 1, **t}) for name, t in sorted(topics.items())}
        self.clock = 1000.0
        self._serial = itertools.count(1)
        self.committed_halves: Counter[str] = Counter()  # END_TRANSACTION commits applied, by half msg_id
        # the name servers' KV config, which each writes to its disk at once: no broker crash loses it
        self.name_server_kv: dict[tuple[str, str], str] = {}
        self.lost_to_cuts: list[OutgoingMessage] = []  # every message an election's cut took

    # -- the cluster's state -------------------------------------------------------------------------------
    def route(self, topic: str) -> TopicRoute:
        """The name servers' route of ``topic``: the broker groups in the route that have it."""
        counts = {
            b.name: b.topics.get(topic) or b.unconfigured[topic]
            for b in self.brokers.values()
            if b.state != AWAY and (topic in b.topics or topic in b.unconfigured)
        }
        if not counts:
            raise TopicNotFoundError(f"the name servers have no route for topic {topic!r}")
        return TopicRoute(
            topic,
            tuple(BrokerData(n, {0 if self.brokers[n].state == MASTER else 1: f"{n}:10911"}) for n in counts),
            tuple(QueueData(n, q, q, PERM_READ | PERM_WRITE) for n, q in counts.items()),
        )

    def writable_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a task's producer sends ``topic``'s rows to now."""
        return [
            MessageQueue(topic, b.name, i)
            for b in self.brokers.values()
            if b.state == MASTER and topic in b.topics
            for i in range(b.topics[topic])
        ]

    def take_away(self, name: str, how: str, until: float | None = None) -> None:
        """Broker group ``name`` stops (``stop``: offsets flushed first), is killed (``kill``: unflushed offsets
        lost) or loses its master (``master``: its slave stays, with the flushed offsets), until model time
        ``until`` or ``bring_back``."""
        b = self.brokers[name]
        if how == "stop":
            self._flush(b)
        else:
            b.unflushed.clear()
        b.state = SLAVE_ONLY if how == "master" else AWAY
        b.back_at = until

    def elect(self, name: str) -> None:
        """A replica of broker group ``name`` is elected master (a DLedger leader change, a Controller-mode
        election): it has every message and the flushed consumer offsets, but not the topics created since it last
        copied the topic configs, which the name servers still route to the group."""
        b = self.brokers[name]
        b.unflushed.clear()
        for topic in sorted(b.uncopied):
            b.unconfigured[topic] = b.topics.pop(topic)
        b.uncopied.clear()
        b.state, b.back_at = MASTER, None

    def cut(self, name: str, lag: int, skew_ms: int = 0) -> list[OutgoingMessage]:
        """Broker group ``name``'s master dies and a replica that lagged ``lag`` messages behind it, whose clock runs
        ``skew_ms`` ahead of the driver's, is elected (asynchronous replication): every queue loses its last ``lag``
        messages, and the election is as ``elect``'s. A group that keeps commit records is not cut: a replica
        lacking a row stored after ``started(N)`` lacks that record too, and no protocol survives losing its
        acknowledged records (the README names the settings that prevent any cut). Returns the messages the cut
        took."""
        b = self.brokers[name]
        if any(topic.startswith(RECORDS_TOPIC_PREFIX) and stored for (topic, _), stored in b.queues.items()):
            return []
        lost: list[OutgoingMessage] = []
        for stored in b.queues.values():
            keep = max(0, len(stored) - lag)
            lost += [m for m, _ in stored[keep:]]
            del stored[keep:]
        b.skew_ms = skew_ms
        self.elect(name)
        self.lost_to_cuts += lost
        return lost

    def copy_configs(self) -> None:
        """Every replica copies its master's topic configs."""
        for b in self.brokers.values():
            b.uncopied.clear()

    def bring_back(self, name: str) -> None:
        b = self.brokers[name]
        b.state, b.back_at = MASTER, None

    def all_up(self) -> bool:
        return all(b.state == MASTER for b in self.brokers.values())

    def flush(self) -> None:
        """Every broker writes its consumer offsets to disk (every few seconds in RocketMQ)."""
        for b in self.brokers.values():
            self._flush(b)

    @staticmethod
    def _flush(b: Broker) -> None:
        b.flushed.update(b.unflushed)
        b.unflushed.clear()

    def set_queues(self, topic: str, name: str, queues: int) -> None:
        """Topic ``topic`` gets ``queues`` read and write queues on broker group ``name`` (updateTopic): added
        there, grown or shrunk. The consume queues of a shrunk topic and their messages stay."""
        self.brokers[name].topics[topic] = queues

    def now_ms(self) -> int:
        return int(self.clock * 1000)

    def tick(self, seconds: float) -> None:
        """Model time passes; timed outages end."""
        self.clock += seconds
        for b in self.brokers.values():
            if b.back_at is not None and b.back_at <= self.clock:
                self.bring_back(b.name)

    # -- what tasks do ----------------------------------------------------------------------------------------
    def send_half(self, mq: MessageQueue, message: OutgoingMessage, group: str) -> HalfMessage:
        """A task's half message bound for ``mq`` (a queue its producer may write now)."""
        b = self.brokers[mq.broker_name]
        assert b.state == MASTER and mq.queue_id < b.topics.get(mq.topic, 0), f"{mq} is not writable now"
        n = next(self._serial)
        b.halves[n] = (mq, message, group)
        return HalfMessage(mq, f"half-{n}", f"tx-{n}", n, n)

    def produce(self, mq: MessageQueue, message: OutgoingMessage) -> None:
        """Another producer stores ``message`` in ``mq`` now."""
        b = self.brokers[mq.broker_name]
        b.queues[(mq.topic, mq.queue_id)].append((message, self.now_ms() + b.skew_ms))

    # -- what is stored ---------------------------------------------------------------------------------------
    def stored(self, prop: str) -> Counter[str]:
        """How many messages of every queue (readable or not) carry each value of property ``prop``."""
        out: Counter[str] = Counter()
        for b in self.brokers.values():
            for messages in b.queues.values():
                out.update(m.properties[prop] for m, _ in messages if prop in m.properties)
        return out


@contextmanager
def model_time(model: BrokerModel) -> Iterator[None]:
    """Inside: ``time.monotonic`` and ``time.time`` are the model's clock and ``time.sleep`` advances it (ending timed
    outages), so a protocol waiting for a broker with backoff waits model seconds, at once."""
    with (
        mock.patch("time.monotonic", lambda: model.clock),
        mock.patch("time.time", lambda: model.clock),
        mock.patch("time.sleep", model.tick),
    ):
        yield


@dataclass
class Faults:
    """What goes wrong during one commit, by the index of the client's requests to brokers (``writes`` counts the
    requests that change a broker's state: sends, END_TRANSACTION, offset updates, topic creation). ``crash`` =
    (write index, after the broker applied it); ``lost`` = the request index whose answer is lost after it was
    applied; ``away`` = (request index, broker group, how: stop/kill/master, for how many model seconds);
    ``crash_after``: the driver dies once the broker applied the first write whose description contains it;
    ``cut`` = (request index, broker group, lag, skew ms): the group is cut by an election there
    (``BrokerModel.cut``)."""

    crash: tuple[int, bool] | None = None
    crash_after: str | None = None
    lost: int | None = None
    away: tuple[int, str, str, float] | None = None
    cut: tuple[int, str, int, int] | None = None
    requests: int = 0
    writes: int = 0
    fired: list[str] = field(default_factory=list)


class _Done:
    """A request already answered (or failed) by the model."""

    def __init__(self, value: Any = None, error: RocketMQError | None = None, replica: bool = False) -> None:
        self.value, self.error, self.replica = value, error, replica

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value

    def cancel(self) -> None:
        pass


class ModelClient(BaseClient):
    """A client whose transport is the model (the fan-out, partial answers and single-queue shortcuts are
    BaseClient's own). Routes are the model's now: a commit builds a fresh client."""

    def __init__(self, model: BrokerModel, faults: Faults | None = None) -> None:
        super().__init__()
        self.model = model
        self.faults = faults or Faults()

    # -- the requests --------------------------------------------------------------------------------------
    def _request(self, broker: str, what: str, apply: Callable[[Broker, bool], Any], *, write: bool) -> _Done:
        """One request to ``broker``'s group, with the faults of this commit: ``apply(broker, replica)`` is what the
        broker does."""
        f = self.faults
        index = f.requests
        f.requests += 1
        if f.away is not None and f.away[0] == index:
            _, name, how, seconds = f.away
            f.fired.append(f"{name} {how} for {seconds} s at request {index}")
            self.model.take_away(name, how, self.model.clock + seconds)
            if name == broker and how != "master":
                raise ConnectionLostError(f"the connection to {broker} closed while {what} was pending")
        if f.cut is not None and f.cut[0] == index:
            _, name, lag, skew = f.cut
            lost = self.model.cut(name, lag, skew)
            f.fired.append(f"{name} cut by {lag} (clock {skew:+} ms) at request {index}: {len(lost)} messages lost")
            if name == broker:
                raise ConnectionLostError(f"the connection to {broker} closed while {what} was pending")
        crash = None
        if write:
            if f.crash is not None and f.crash[0] == f.writes:
                crash = f.crash[1]
            f.writes += 1
        b = self.model.brokers[broker]
        if b.state == AWAY:
            raise BrokerUnavailableError(f"broker {broker} is not in the route now ({what})")
        if write and b.state != MASTER:
            raise BrokerUnavailableError(f"broker group {broker} has no master now ({what})")
        if f.crash_after is not None and f.crash_after in what:
            crash = True
        if crash is False:
            f.fired.append(f"driver crash before {what}")
            raise DriverCrash(what)
        try:
            answer = _Done(apply(b, b.state != MASTER), replica=b.state != MASTER)
        except RocketMQError as e:
            answer = _Done(error=e)
        if crash:
            f.fired.append(f"driver crash after {what}")
            raise DriverCrash(what)
        if f.lost == index:
            f.fired.append(f"answer of {what} lost")
            return _Done(error=RequestTimeoutError(f"no answer to {what} in 3000 ms"))
        return answer

    def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        return self.model.route(topic)

    def _fetch_route(self, topic: str) -> TopicRoute:
        return self.model.route(topic)

    def _min_offset_call(self, mq: MessageQueue) -> _Done:
        return self._request(mq.broker_name, f"min offset of {mq}", lambda b, r: 0, write=False)

    def _max_offset_call(self, mq: MessageQueue) -> _Done:
        def end(b: Broker, replica: bool) -> int:
            return len(b.queues.get((mq.topic, mq.queue_id), ()))

        return self._request(mq.broker_name, f"max offset of {mq}", end, write=False)

    def _consumer_offset_call(self, group: str, mq: MessageQueue) -> _Done:
        def query(b: Broker, replica: bool) -> int | None:
            key = (group, mq.topic, mq.queue_id)
            return b.flushed.get(key) if replica else b.unflushed.get(key, b.flushed.get(key))

        return self._request(mq.broker_name, f"offset of group {group} on {mq}", query, write=False)

    def _store_offset_call(self, group: str, mq: MessageQueue, offset: int) -> _Done:
        def store(b: Broker, replica: bool) -> bool:
            b.unflushed[(group, mq.topic, mq.queue_id)] = offset
            return True

        return self._request(mq.broker_name, f"offset update of group {group} on {mq}", store, write=True)

    def send_async(self, mq: MessageQueue, messages, *, group: str = "", sys_flag: int = 0) -> _Done:
        def store(b: Broker, replica: bool) -> SendResult:
            b.configured(mq.topic, f"send to {mq}")
            if mq.queue_id >= b.topics.get(mq.topic, 0):
                raise BrokerError(f"queueId[{mq.queue_id}] is illegal for topic {mq.topic} on {b.name}", code=1)
            queue = b.queues[(mq.topic, mq.queue_id)]
            queue.extend((m, self.model.now_ms() + b.skew_ms) for m in messages)
            return SendResult(",".join(m.unique_id or "" for m in messages), mq, len(queue) - len(messages))

        return self._request(mq.broker_name, f"send to {mq}", store, write=True)

    def end_transaction_async(self, half: HalfMessage, *, commit: bool, group: str = "") -> _Done:
        def end(b: Broker, replica: bool) -> None:
            if half.commit_log_offset not in b.halves:
                raise BrokerError(f"no half message at commit log offset {half.commit_log_offset} on {b.name}")
            mq, message, sent_by = b.halves[half.commit_log_offset]
            if sent_by != group:
                raise BrokerError(f"the half message {half.msg_id} was sent by group {sent_by}, not {group}")
            if commit:  # stored into the half's own queue id, unchecked, each time it is committed
                b.queues[(mq.topic, mq.queue_id)].append((message, self.model.now_ms() + b.skew_ms))
                self.model.committed_halves[half.msg_id] += 1

        what = f"END_TRANSACTION {'commit' if commit else 'rollback'} of {half.msg_id} ({half.queue})"
        return self._request(half.queue.broker_name, what, end, write=True)

    def _create_group(self, group: str, mq: MessageQueue, offset: int) -> None:
        pass  # the model's brokers know every group

    def create_topic(
        self, topic: str, queues: int = 4, *, broker_names: Iterable[str] | None = None, seed_topic: str = "TBW102"
    ) -> None:
        names = (
            sorted(broker_names)
            if broker_names is not None
            else [b.broker_name for b in self.route(seed_topic).brokers]
        )
        for name in names:

            def create(b: Broker, replica: bool) -> None:
                b.topics[topic] = queues
                b.unconfigured.pop(topic, None)
                b.uncopied.add(topic)

            self._request(name, f"creating topic {topic}", create, write=True).result()

    def read_range(self, mq: MessageQueue, start: int, end: int, **kw: Any) -> Iterator[Message]:
        def read(b: Broker, replica: bool) -> list[Message]:
            b.configured(mq.topic, f"pull of {mq}")
            if mq.queue_id >= b.topics.get(mq.topic, 0):
                raise BrokerError(f"queueId[{mq.queue_id}] is illegal for topic {mq.topic} on {b.name}", code=1)
            stored = b.queues.get((mq.topic, mq.queue_id), [])
            return [_message(mq, i, m, at) for i, (m, at) in enumerate(stored[start:end], start)]

        yield from self._request(mq.broker_name, f"reading {mq} [{start}, {end})", read, write=False).result()

    def is_compacted(self, topic: str) -> bool:
        return False

    def live_brokers(self) -> set[str]:
        return {b.name for b in self.model.brokers.values() if b.state != AWAY}

    def put_name_server_value(self, namespace: str, key: str, value: str) -> list[str]:
        self.model.name_server_kv[namespace, key] = value
        return [NAME_SERVER]

    def name_server_values(self, namespace: str, key: str) -> dict[str, str | None]:
        return {NAME_SERVER: self.model.name_server_kv.get((namespace, key))}

    def topics(self) -> list[str]:
        return sorted({t for b in self.model.brokers.values() if b.state != AWAY for t in b.topics})


def _message(mq: MessageQueue, offset: int, m: OutgoingMessage, stored_at: int) -> Message:
    return Message(
        mq.topic,
        mq.broker_name,
        mq.queue_id,
        offset,
        m.unique_id or f"{mq}/{offset}",
        m.tags,
        m.keys,
        m.body,
        0,
        stored_at,
        "",
        "",
        0,
        m.flag,
        dict(m.properties),
    )
