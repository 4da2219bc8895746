"""What every transport's client shares: the route cache (kept through a name-server outage), the per-queue
fan-out with its one partial-failure policy, single-queue shortcuts, group creation on offset update and exact
range reads (their messages gathered by the native core). A transport supplies the primitives: ``_fetch_route``,
one ``*_call`` per kind of per-queue request and ``pull_async``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, nullcontext
from types import MappingProxyType
from typing import Any, Protocol

from rmq_spark.client import hints
from rmq_spark.client.defaults import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_PULL_DEPTH, DEFAULT_RETRY_TIMEOUT
from rmq_spark.client.errors import (
    RETRYABLE,
    AuthError,
    BrokerError,
    BrokerUnavailableError,
    RocketMQError,
    UnsupportedError,
)
from rmq_spark.client.gathering import MessageCollector
from rmq_spark.client.holds import CallHolds, Holds
from rmq_spark.client.model import (
    DEFAULT_GROUP,
    DEFAULT_PRODUCER_GROUP,
    EVERY_MESSAGE,
    SLOT,
    Boundary,
    FilterExpression,
    HalfMessage,
    Message,
    MessageQueue,
    MessageType,
    OutgoingMessage,
    PullResult,
    SendResult,
    TopicRoute,
)
from rmq_spark.client.namespaces import NO_NAMESPACE, Namespace
from rmq_spark.client.outages import OutageLog
from rmq_spark.client.range_reader import PullSession, RangeReader, SharedPulls
from rmq_spark.client.time_search import NearOffset, first_stored_at_or_after

log = logging.getLogger(__name__)

NAME_SERVERS = "the name servers"
# While no name server answers, the last route is used and the name servers are asked again at most this often.
ROUTE_RETRY_S = 1.0
# The longest a caller with a cached route waits for the name servers to answer a new lookup: they answer in
# milliseconds when they are well; one that takes packets and never answers must not hold up the caller (Spark's
# thread asks latestOffset every few milliseconds) for a request timeout.
ROUTE_WAIT_S = 0.5
# A topic whose Get requests (first and end offsets) the brokers refused this user has its offsets learnt from pulls'
# answers; the Get requests are tried again this long after the refusal (a permission granted since).
GET_RETRY_S = 300.0


class Call(Protocol):
    """A request in flight; ``result()`` waits for its parsed answer or raises a RocketMQError. ``replica`` is
    true when it went to a slave."""

    replica: bool

    def result(self) -> Any: ...

    def cancel(self) -> None: ...


class HeldCall(Call, Protocol):
    """A held pull in flight (``hold_async``): it also tells when it has ended, and since when its answer may
    have been there."""

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` once the call has ended (at once if it has), on the thread that ended it."""

    @property
    def ended_at(self) -> float:
        """Once ended: the earliest ``time.monotonic()`` its answer may have come."""


# the default of a per-queue mapping: no queue (read-only, so a shared default)
NONE_PER_QUEUE: Mapping[MessageQueue, Any] = MappingProxyType({})


class Answers(dict):
    """A fan-out's answers per queue. ``failed`` holds each queue whose broker could not answer now, with why;
    ``replica`` the queues answered by a slave (which may lag behind its master)."""

    def __init__(
        self,
        answers: Mapping[MessageQueue, Any] = NONE_PER_QUEUE,
        failed: Mapping[MessageQueue, RocketMQError] = NONE_PER_QUEUE,
        replica: Iterable[MessageQueue] = (),
    ):
        super().__init__(answers)
        self.failed: dict[MessageQueue, RocketMQError] = dict(failed)
        self.replica: set[MessageQueue] = set(replica)

    def merge(self, other: Answers) -> Answers:
        """This and ``other``'s answers, failures and replica answers together."""
        out = Answers(self, self.failed, self.replica | other.replica)
        out.update(other)
        out.failed.update(other.failed)
        return out


def unavailable(what: str, failed: Mapping[MessageQueue, RocketMQError]) -> BrokerUnavailableError:
    """One error for the queues of a fan-out whose brokers could not answer, naming each broker."""
    brokers = sorted({mq.broker_name for mq in failed})
    first = next(iter(failed.values()))
    return BrokerUnavailableError(
        f"{what}: broker{'s' if len(brokers) > 1 else ''} {', '.join(brokers)} could not "
        f"answer now ({first}); retry when {'they are' if len(brokers) > 1 else 'it is'} "
        "back",
        code=first.code,
        remark=first.remark,
    )


def outside(gaps: Sequence[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The non-empty parts of ``[start, end)`` outside ``gaps`` (``remapping_gaps``)."""
    out = []
    for low, high in sorted(gaps):
        if low > start:
            out.append((start, min(low, end)))
        start = max(start, high)
    out.append((start, end))
    return [(a, b) for a, b in out if b > a]


class _Probe:
    """A pull as ``group`` asked for a queue's first or end offset (``edge``, a PullResult field) in place of a Get
    request the broker refused (``refusal``); notes the queue's end in ``ends``, where its next probe pulls."""

    def __init__(
        self, pull: Call, mq: MessageQueue, edge: str, group: str, ends: dict[MessageQueue, int], refusal: AuthError
    ) -> None:
        self.pull, self.mq, self.edge, self.group, self.ends, self.refusal = pull, mq, edge, group, ends, refusal
        self.replica = pull.replica

    def result(self) -> int:
        topic, group = self.mq.topic, self.group
        try:
            r = self.pull.result()
        except AuthError as e:
            raise AuthError(
                f"{self.edge.replace('_', ' ')} of {self.mq}: the user may neither ask it (permission `Get` on "
                f"`Topic:{topic}`) nor pull it (`Sub` on `Topic:{topic}` and `Group:{group}`): grant one of them "
                f"(mqadmin createAcl or updateAcl), or set consumerGroup to a group the user has `Sub` on",
                code=e.code,
                remark=e.remark,
            ) from e
        if r.max_offset >= 0:
            self.ends[self.mq] = r.max_offset
        value = getattr(r, self.edge)
        if value < 0:  # a transport whose pulls do not report it
            raise self.refusal
        return value

    def cancel(self) -> None:
        self.pull.cancel()


class BaseClient:
    """The transport-neutral half of a RocketMQ client. Holds live connections, so it is never pickled: each
    process (driver, executor task) builds its own from the same settings."""

    request_timeout: float

    def __init__(
        self,
        *,
        route_ttl: float = 30.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        namespace: Namespace = NO_NAMESPACE,
    ) -> None:
        self._route_ttl = route_ttl
        self.namespace = namespace  # topics and groups go to the brokers in it; the client's callers never see it
        self.max_message_bytes = max_message_bytes
        self._routes: dict[str, tuple[float, TopicRoute]] = {}
        self._routes_lock = threading.Lock()
        self._lookups: dict[str, Future] = {}  # the background route lookups under way, by topic
        self._lookup_pool: ThreadPoolExecutor | None = None
        self.outages = OutageLog(log)
        # the group pulls for offsets name, where the Get requests are refused (the reader's pull group)
        self.pull_group = DEFAULT_GROUP
        self._get_refused: dict[str, tuple[float, AuthError]] = {}  # topic: when, and the refusal
        self._probe_at: dict[MessageQueue, int] = {}  # where the next pull for a queue's offsets pulls: its end

    def __reduce__(self):
        raise TypeError(f"{type(self).__name__} holds connections and cannot be pickled; build one where it is used")

    def close(self) -> None:
        """Close every connection."""
        self._close_lookups()

    def _close_lookups(self) -> None:
        """Stop the background route lookups (one under way ends at its request timeout)."""
        with self._routes_lock:
            pool, self._lookup_pool = self._lookup_pool, None
            self._lookups.clear()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport primitives --------------------------------------------------------------------------------
    def _fetch_route(self, topic: str) -> TopicRoute:
        raise NotImplementedError

    def _fetch_routes(self, topics: Sequence[str]) -> list[TopicRoute | RocketMQError]:
        """The route of each of ``topics`` as the name servers answer now, or the error asking it raised; this
        default asks them one after another."""
        out: list[TopicRoute | RocketMQError] = []
        for topic in topics:
            try:
                out.append(self._fetch_route(topic))
            except RocketMQError as e:
                out.append(e)
        return out

    def _min_offset_call(self, mq: MessageQueue) -> Call:
        raise NotImplementedError

    def _max_offset_call(self, mq: MessageQueue) -> Call:
        raise NotImplementedError

    def _search_offset_call(self, mq: MessageQueue, timestamp: int, boundary: Boundary) -> Call:
        raise NotImplementedError

    def _consumer_offset_call(self, group: str, mq: MessageQueue) -> Call:
        """Answers the group's offset, or None when the group has none for the queue."""
        raise NotImplementedError

    def _store_offset_call(self, group: str, mq: MessageQueue, offset: int) -> Call:
        """Answers True when stored, False when the queue's broker does not know ``group`` (nothing stored)."""
        raise NotImplementedError

    def _create_group(self, group: str, mq: MessageQueue, offset: int) -> None:
        """Make the broker of ``mq`` know ``group`` the way brokers create groups: by a pull in its name."""
        self.pull(mq, offset, 1, group=group)

    def pull_async(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = SLOT,
        *,
        group: str = DEFAULT_GROUP,
        expression: FilterExpression = EVERY_MESSAGE,
        suspend_ms: int = 0,
    ) -> Call:
        """Send a pull and return at once; the call answers a PullResult. With ``suspend_ms`` > 0 the server may
        hold it until messages arrive (long polling)."""
        raise NotImplementedError

    def burst(self) -> AbstractContextManager[None]:
        """Requests this thread sends inside go out together when it ends, where the transport can (fewer writes
        for a fan-out); a request waited for inside it goes out at once."""
        return nullcontext()

    def hold_async(self, mq: MessageQueue, offset: int, *, group: str, hold_ms: int) -> HeldCall:
        """A pull of one message at ``offset`` (the queue's end) that the server holds until a message arrives or
        ``hold_ms`` pass. UnsupportedError where the transport cannot tell when a pull has ended."""
        raise UnsupportedError(f"{type(self).__name__} cannot hold pulls")

    def holds(self, group: str, hold_ms: int) -> Holds:
        """The held pulls of ``group``, each held ``hold_ms`` at most; this default keeps them over ``hold_async``."""
        return CallHolds(self, group, hold_ms)

    def send_async(
        self,
        mq: MessageQueue,
        messages: Sequence[OutgoingMessage],
        *,
        group: str = DEFAULT_PRODUCER_GROUP,
        sys_flag: int = 0,
    ) -> Call:
        """Send one message or a batch (each carrying its UNIQ_KEY) to one queue's master and return at once; the
        call answers a SendResult. ``sys_flag`` marks every message of the send (e.g. compressed bodies)."""
        raise NotImplementedError

    def wire_message(self, message: OutgoingMessage) -> tuple[OutgoingMessage, int]:
        """``message`` as this transport sends it and the sysFlag for ``send_async`` (this default: unchanged, 0)."""
        return message, 0

    def check_filter(self, mq: MessageQueue, group: str, expression: FilterExpression) -> None:
        """InvalidFilterError when the broker of ``mq`` cannot filter by the expression. This default pulls one
        message with it (a server that checks filters refuses the pull)."""
        self.pull(mq, 0, 1, group=group, expression=expression)

    # -- calls some transports lack --------------------------------------------------------------------------
    def send_half_async(
        self, mq: MessageQueue, message: OutgoingMessage, *, group: str = DEFAULT_PRODUCER_GROUP, sys_flag: int = 0
    ) -> Call:
        """Send a transaction's half message bound for ``mq`` and return at once; the call answers its
        HalfMessage handle."""
        raise UnsupportedError(
            f"{type(self).__name__} cannot send transactional messages: use the remoting transport (option nameServer)"
        )

    def end_transaction_async(self, half: HalfMessage, *, commit: bool, group: str = DEFAULT_PRODUCER_GROUP) -> Call:
        """Commit or roll back a half message and return at once."""
        raise UnsupportedError(
            f"{type(self).__name__} cannot end transactions: use the remoting transport (option nameServer)"
        )

    def topics(self) -> list[str]:
        """Every topic known to the cluster."""
        raise UnsupportedError(f"{type(self).__name__} cannot list topics")

    def create_topic(
        self, topic: str, queues: int = 4, *, broker_names: Iterable[str] | None = None, seed_topic: str = "TBW102"
    ) -> None:
        """Create or update ``topic`` with ``queues`` read/write queues on the masters of the cluster (found
        through ``seed_topic``'s route, or the given brokers)."""
        raise UnsupportedError(f"{type(self).__name__} cannot create topics")

    def live_brokers(self) -> set[str]:
        """The names of the broker groups registered with the name servers now (at least one member up)."""
        raise UnsupportedError(f"{type(self).__name__} cannot list the cluster's brokers")

    def put_name_server_value(self, namespace: str, key: str, value: str) -> list[str]:
        """``key`` = ``value`` in ``namespace`` of the name servers' KV config (kept on their disks): the name
        servers that stored it."""
        raise UnsupportedError(f"{type(self).__name__} has no name servers' KV config")

    def name_server_values(self, namespace: str, key: str) -> dict[str, str | None]:
        """Each answering name server's value of ``key`` in ``namespace`` of its KV config (None: none)."""
        raise UnsupportedError(f"{type(self).__name__} has no name servers' KV config")

    def cluster_topics(self) -> set[str]:
        """The topics the brokers of the cluster create under their cluster's and their own names (system topics
        that the topic list shows beside the users' ones)."""
        raise UnsupportedError(f"{type(self).__name__} cannot list the cluster's brokers")

    def is_compacted(self, topic: str) -> bool:
        """True when ``topic`` has the cleanup policy COMPACTION (its queue offsets may be sparse)."""
        raise UnsupportedError(f"{type(self).__name__} cannot read topic attributes")

    def topic_message_type(self, topic: str) -> MessageType | None:
        """The topic's RocketMQ 5 message.type where the server tells it, else None. This default: what the route
        says."""
        return self.route(topic).message_type

    def remapping_gaps(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, list[tuple[int, int]]]:
        """Per logic queue of ``mqs`` (a static topic's) that was remapped, the logic offsets ``[first, end)`` no
        message has (the scope between two mapping items), in order; nothing for other queues. This default: none
        (a transport that does not serve static topics)."""
        return {}

    def serves_reads(self, mq: MessageQueue, offset: int, group: str) -> bool:
        """Whether the broker member reads of ``mq`` go to now serves pulls (a slave may refuse them). A
        transport that cannot tell says True: its pulls are retried until the task's deadline."""
        return True

    def online_consumers(self, group: str, topics: Iterable[str]) -> list[str]:
        """The client ids of ``group``'s consumers connected to the brokers of ``topics`` now."""
        raise UnsupportedError(f"{type(self).__name__} cannot list a group's consumers")

    # -- routing ---------------------------------------------------------------------------------------------
    def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        """The topic's route, cached for ``route_ttl`` seconds. Past that, it is looked up again in the background,
        and the caller waits for the answer at most ROUTE_WAIT_S before it goes on with the cached route (a name
        server that answers nothing must not hold up reads from brokers that are up). With ``refresh``, or without
        a cached route, the lookup is waited for; while no name server answers, the last route is kept (asked
        again in ROUTE_RETRY_S), and without one the error is raised."""
        with self._routes_lock:
            cached = self._routes.get(topic)
        if cached is None or refresh:
            return self._lookup(topic)
        if time.monotonic() - cached[0] < self._route_ttl:
            return cached[1]
        return self.recheck_route(topic)

    def recheck_route(self, topic: str) -> TopicRoute:
        """The topic's route looked up again in the background, waiting at most ROUTE_WAIT_S for it (not at all
        while the name servers are known to be down, or when a lookup of the topic is under way already), else the
        cached route. Without a cached route, the lookup is waited for."""
        with self._routes_lock:
            cached = self._routes.get(topic)
            if cached is None:
                pending, wait = None, 0.0
            elif topic in self._lookups:
                pending, wait = self._lookups[topic], 0.0
            else:
                if self._lookup_pool is None:
                    self._lookup_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rmq-route")
                pending = self._lookups[topic] = self._lookup_pool.submit(self._lookup_in_background, topic)
                wait = 0.0 if self.outages.is_down(NAME_SERVERS) else ROUTE_WAIT_S
        if cached is None or pending is None:  # (both or neither)
            return self._lookup(topic)
        try:
            return pending.result(timeout=wait)
        except FutureTimeout:
            return cached[1]

    def _lookup_in_background(self, topic: str) -> TopicRoute:
        try:
            return self._lookup(topic)
        finally:
            with self._routes_lock:
                self._lookups.pop(topic, None)

    def refresh_routes(self, topics: Sequence[str]) -> dict[str, TopicRoute | RocketMQError]:
        """``route(topic, refresh=True)`` of every topic, asked together where the transport can (remoting: one
        write to the name server for all): each topic's route, or the error its lookup raised."""
        fetched = self._fetch_routes(topics)
        out: dict[str, TopicRoute | RocketMQError] = {}
        for topic, answer in zip(topics, fetched, strict=True):
            try:
                out[topic] = self._lookup(topic, answer)
            except RocketMQError as e:
                out[topic] = e
        return out

    def _lookup(self, topic: str, fetched: TopicRoute | RocketMQError | None = None) -> TopicRoute:
        """Ask the name servers for the topic's route now, or take what they answered (``fetched``); the cached
        one while none answers (see ``route``)."""
        now = time.monotonic()
        with self._routes_lock:
            cached = self._routes.get(topic)
        try:
            if isinstance(fetched, RocketMQError):
                raise fetched
            route = self._fetch_route(topic) if fetched is None else fetched
        except RETRYABLE as e:
            if cached is None:
                raise
            self.outages.down(NAME_SERVERS, "using the last known routes", e)
            with self._routes_lock:  # ask again in ROUTE_RETRY_S, not at every call
                self._routes[topic] = (time.monotonic() - self._route_ttl + ROUTE_RETRY_S, cached[1])
            return cached[1]
        self.outages.up(NAME_SERVERS)
        with self._routes_lock:
            self._routes[topic] = (now, route)
        return route

    def invalidate_route(self, topic: str) -> None:
        """Look the topic's route up again at its next use (at most once every ROUTE_RETRY_S)."""
        with self._routes_lock:
            cached = self._routes.get(topic)
            if cached is not None:
                stale = time.monotonic() - self._route_ttl + ROUTE_RETRY_S
                self._routes[topic] = (min(cached[0], stale), cached[1])

    def cached_route(self, topic: str) -> TopicRoute | None:
        """The last route fetched for ``topic``, however old; None if it was never fetched."""
        with self._routes_lock:
            cached = self._routes.get(topic)
        return cached[1] if cached else None

    def queues(self, topic: str, *, refresh: bool = False) -> list[MessageQueue]:
        """The readable queues of a topic, sorted."""
        return self.route(topic, refresh=refresh).read_queues()

    # -- the fan-out -----------------------------------------------------------------------------------------
    def _gather(
        self, what: str, mqs: Iterable[MessageQueue], make: Callable[[MessageQueue], Call], *, partial: bool
    ) -> Answers:
        """``make(mq)`` for every queue, all in flight at once (every broker asked concurrently). A queue whose
        broker does not answer is asked once more on its own (fresh route and connection, maybe another member
        of its broker group); if that fails too, it is unavailable: with ``partial`` it goes to
        ``Answers.failed``, else one BrokerUnavailableError names the brokers. Any other error is raised."""
        calls: dict[MessageQueue, Call] = {}
        failed: dict[MessageQueue, RocketMQError] = {}
        with self.burst():
            for mq in mqs:
                try:
                    calls[mq] = make(mq)
                except RETRYABLE as e:
                    failed[mq] = e
        out = Answers()
        for mq, call in calls.items():
            try:
                out[mq] = call.result()
            except RETRYABLE as e:
                failed[mq] = e
            else:
                if call.replica:
                    out.replica.add(mq)
        down: set[str] = set()
        for mq in list(failed):
            if mq.broker_name in down:
                continue  # its broker failed twice already: do not wait on it once per queue
            try:
                call = make(mq)
                out[mq] = call.result()
            except RETRYABLE as e:
                failed[mq] = e
                down.add(mq.broker_name)
            else:
                del failed[mq]
                if call.replica:
                    out.replica.add(mq)
        if failed and not partial:
            raise unavailable(what, failed)
        out.failed = failed
        return out

    def min_offsets(self, mqs: Iterable[MessageQueue], *, partial: bool = False) -> Answers:
        """The first offset still held by the broker, per queue."""
        return self._edges("min offsets", mqs, self._min_offset_call, "min_offset", partial)

    def max_offsets(self, mqs: Iterable[MessageQueue], *, partial: bool = False) -> Answers:
        """The offset after the last message (exclusive end), per queue."""
        return self._edges("max offsets", mqs, self._max_offset_call, "max_offset", partial)

    def _edges(
        self, what: str, mqs: Iterable[MessageQueue], make: Callable[[MessageQueue], Call], edge: str, partial: bool
    ) -> Answers:
        """The first or end offsets (``edge``) of ``mqs``. A user refused the Get requests they take (ACL 2.0 grants
        RocketMQ's consumers ``Sub`` only) learns them from the header of a pull as ``pull_group``, which carries
        both: the queues of a topic refused once are asked that way until GET_RETRY_S has passed."""
        mqs = list(mqs)
        now = time.monotonic()
        refused = {t for t, (at, _) in self._get_refused.items() if now - at < GET_RETRY_S}
        asked = [mq for mq in mqs if mq.topic not in refused]
        try:
            out = self._gather(what, asked, make, partial=partial)
        except AuthError as e:
            if not self.refuses_permission(e):
                raise
            for topic in {mq.topic for mq in asked}:
                self._get_refused[topic] = (now, e)
            out, asked = Answers(), []
        pulled = [mq for mq in mqs if mq not in asked]
        if not pulled:
            return out
        return out.merge(self._gather(what, pulled, lambda mq: self._probe_call(mq, edge), partial=partial))

    def _probe_call(self, mq: MessageQueue, edge: str) -> Call:
        """A pull of one message at the queue's last known end (no message comes back unless one came since),
        answering the ``edge`` offset its header carries."""
        pull = self.pull_async(mq, self._probe_at.get(mq, 0), 1, group=self.pull_group)
        return _Probe(pull, mq, edge, self.pull_group, self._probe_at, self._get_refused[mq.topic][1])

    def refuses_permission(self, e: AuthError) -> bool:
        """Whether ``e`` is the server refusing this user a permission (not its credentials). This default: no
        transport's refusal is told apart."""
        return False

    def search_offsets(
        self, mqs: Iterable[MessageQueue], timestamp: int, boundary: Boundary = Boundary.LOWER, *, partial: bool = False
    ) -> Answers:
        """Per queue, the offset of the first (``LOWER``) or last (``UPPER``) message stored at or after / at or
        before ``timestamp`` ms, as the broker's SEARCH_OFFSET_BY_TIMESTAMP defines it."""
        boundary = Boundary(boundary)
        mqs = list(mqs)
        try:
            answers = self._gather(
                "offsets by timestamp",
                mqs,
                lambda mq: self._search_offset_call(mq, int(timestamp), boundary),
                partial=partial,
            )
        except AuthError as e:
            if not self.refuses_permission(e):
                raise
            grants = " and ".join(f"`Get` on `Topic:{t}`" for t in sorted({mq.topic for mq in mqs}))
            raise AuthError(
                f"a start or end by timestamp searches the queues by time, which needs permission {grants} "
                f"({e}): grant it (mqadmin createAcl or updateAcl with -a Get), or start by offsets "
                "(startingOffsets earliest, latest or committed need only `Sub`)",
                code=e.code,
                remark=e.remark,
            ) from e
        near = sorted(mq for mq, v in answers.items() if isinstance(v, NearOffset))
        if not near:
            return answers
        out = answers.merge(self._boundaries(answers, near, int(timestamp), boundary, partial))
        for mq in out.failed:
            out.pop(mq, None)
        return out

    def _boundaries(
        self,
        near: Mapping[MessageQueue, NearOffset],
        mqs: list[MessageQueue],
        timestamp: int,
        boundary: Boundary,
        partial: bool,
    ) -> Answers:
        """The boundary offsets of ``mqs``, whose broker answered an offset near the time (``time_search``)."""
        firsts = self.min_offsets(mqs, partial=partial)
        ends = self.max_offsets([mq for mq in mqs if mq in firsts], partial=partial)
        out = Answers(failed={**firsts.failed, **ends.failed})
        # the last message stored at or before the time is the one before the first stored after it
        after = timestamp if boundary is Boundary.LOWER else timestamp + 1
        for mq in ends:
            try:
                found = first_stored_at_or_after(self, mq, after, near[mq].offset, firsts[mq], ends[mq])
            except RETRYABLE as e:
                if not partial:
                    raise
                out.failed[mq] = e
                continue
            out[mq] = found if boundary is Boundary.LOWER else max(found - 1, firsts[mq])
        return out

    def query_consumer_offsets(self, group: str, mqs: Iterable[MessageQueue], *, partial: bool = False) -> Answers:
        """The group's committed (next-to-consume) offset per queue, None where the group has none."""
        return self._gather(
            f"offsets of consumer group {group!r}",
            mqs,
            lambda mq: self._consumer_offset_call(group, mq),
            partial=partial,
        )

    def update_consumer_offsets(
        self, group: str, offsets: Mapping[MessageQueue, int], *, partial: bool = False
    ) -> Answers:
        """Store the group's next-to-consume offset for each queue on its broker's master (as
        RemoteBrokerOffsetStore.persistAll does). A group the broker does not know yet is created the way brokers
        create groups: by a pull in its name. With ``partial``, queues whose master is unavailable are left in
        ``Answers.failed`` (nothing stored for them)."""
        stored = self._gather(
            f"offset update of consumer group {group!r}",
            offsets,
            lambda mq: self._store_offset_call(group, mq, offsets[mq]),
            partial=partial,
        )
        for mq in [mq for mq, ok in stored.items() if not ok]:
            try:
                self._create_group(group, mq, offsets[mq])
                ok = self._store_offset_call(group, mq, offsets[mq]).result()
            except RETRYABLE as e:
                if not partial:
                    raise
                del stored[mq]
                stored.failed[mq] = e
                continue
            except RocketMQError as e:
                raise RocketMQError(
                    f"consumer group {group!r} does not exist on broker {mq.broker_name} and could "
                    f"not be created by a pull ({e}); {hints.GROUP}",
                    code=e.code,
                    remark=e.remark,
                ) from e
            if not ok:
                raise BrokerError(f"update of group {group!r} offset on {mq} failed: {hints.GROUP}")
            stored[mq] = True
        return stored

    def v4_release(self, topic: str) -> str | None:
        """The release of ``topic``'s brokers where they are RocketMQ 4.x ("4.9.7"), which lack 5.x features
        (timer messages among them); None for 5.x brokers."""
        return None

    # -- single-queue shortcuts ------------------------------------------------------------------------------
    def min_offset(self, mq: MessageQueue) -> int:
        return self.min_offsets([mq])[mq]

    def max_offset(self, mq: MessageQueue) -> int:
        return self.max_offsets([mq])[mq]

    def search_offset(self, mq: MessageQueue, timestamp: int, boundary: Boundary = Boundary.LOWER) -> int:
        return self.search_offsets([mq], timestamp, boundary)[mq]

    def query_consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        return self.query_consumer_offsets(group, [mq])[mq]

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self.update_consumer_offsets(group, {mq: offset})

    def send(
        self,
        mq: MessageQueue,
        messages: OutgoingMessage | Sequence[OutgoingMessage],
        *,
        group: str = DEFAULT_PRODUCER_GROUP,
    ) -> SendResult:
        """Send one message or a batch to one queue and wait; each message gets a UNIQ_KEY unless it has one."""
        batch = [messages] if isinstance(messages, OutgoingMessage) else list(messages)
        if not batch:
            raise ValueError("send needs at least one message")
        return self.send_async(mq, [m.with_unique_id() for m in batch], group=group).result()

    def pull_session(
        self, mq: MessageQueue, *, group: str = DEFAULT_GROUP, expression: FilterExpression = EVERY_MESSAGE
    ) -> PullSession:
        """The pulls of one range read of ``mq`` (over the client's shared connections unless a transport has
        better)."""
        return SharedPulls(self, mq, group=group, expression=expression)

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = SLOT, **kw) -> PullResult:
        """Pull once and wait for the result."""
        return self.pull_async(mq, offset, max_nums, **kw).result()

    # -- exact range reads -----------------------------------------------------------------------------------
    def read_range(
        self,
        mq: MessageQueue,
        start: int,
        end: int,
        *,
        depth: int = DEFAULT_PULL_DEPTH,
        group: str = DEFAULT_GROUP,
        expression: FilterExpression = EVERY_MESSAGE,
        fail_on_data_loss: bool = True,
        retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
        sparse: bool = False,
    ) -> Iterator[Message]:
        """Every message of ``mq`` with ``start <= queueOffset < end`` that matches the filter, in order,
        with ``depth`` pulls in flight. A broker that goes away is waited for up to ``retry_timeout`` seconds;
        ``sparse`` accepts gaps in the offsets (compaction topics); a logic queue's remapping gaps are not read."""
        parts = outside(self.remapping_gaps([mq]).get(mq, ()), start, end) if mq.logic else [(start, end)]
        collected = MessageCollector(
            mq, tags=expression.tags, max_body=self.max_message_bytes, topic=mq.topic if self.namespace else None
        )
        for low, high in parts:
            reader = RangeReader(
                self,
                mq,
                low,
                high,
                depth=depth,
                group=group,
                expression=expression,
                fail_on_data_loss=fail_on_data_loss,
                retry_timeout=retry_timeout,
                sparse=sparse,
            )
            for _ in reader.fill(collected):
                yield from collected.take()
        yield from collected.take()
