"""The streaming driver's view of the query's queues: which the routes show, their latest offsets, and for a queue
Spark knows but cannot read now, whether it is *unavailable* (its broker is missing from the route or silent:
wait for it) or has *vanished* (a live broker no longer has it: the data-loss rule applies). docs/DESIGN.md §10.
``queue_access.py`` turns this view into the one answer per queue the stream reader plans with.

Spark asks for the latest offsets every few milliseconds when idle, so they are answered from memory: each queue
whose master answered is watched by a held pull (``HeldPulls``), and only the queues whose hold ended (a message
came, or it failed) or that have none (their master is away, or the transport cannot hold) are asked, at most
every ``OFFSET_POLL_S``; the name servers every ``pollNameServerIntervalMs``. An idle query costs one request per
queue per hold, whatever the trigger. Nothing here raises because a broker or every name server is unreachable once
the query has seen its topics: the last routes and offsets are kept, and each outage is logged once."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as futures_wait
from typing import Any, TypeVar

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import RETRYABLE, RequestTimeoutError, RocketMQError, TopicNotFoundError, UnsupportedError
from rmq_spark.client.model import MessageQueue, TopicRoute, queue_order
from rmq_spark.client.outages import RETRY_DOWN_S, broker_group
from rmq_spark.client.routes import NAME_SERVERS, ROUTE_WAIT_S
from rmq_spark.options import SourceOptions
from rmq_spark.source.held_pulls import HeldPulls
from rmq_spark.source.planning import (
    check_assigned,
    check_filter,
    compacted_topics,
    first_route,
    query_topics,
    reads_queue,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

OFFSET_POLL_S = 0.1
WAITS = "its queues wait (unavailable, not lost)"
REFUSES = "its master is away and its slave refuses pulls (slaveReadEnable=false)"


class QueueWatch:
    """Polls the routes and the latest offsets of the query's topics."""

    def __init__(self, client: BaseClient, options: SourceOptions) -> None:
        self.client, self.options = client, options
        self._routes: dict[str, TopicRoute | None] = {}  # None: the topic has no route now
        self._queues: list[MessageQueue] | None = None  # queues(), until the routes change
        self._queue_set: frozenset[MessageQueue] = frozenset()
        self.version = 0  # counts the polls that may have changed what this watch shows
        self._holds = HeldPulls(client, options.pull_group)
        self._routes_at = float("-inf")
        self._listed = False  # whether the name servers answered the query's topics once
        self._reader: ThreadPoolExecutor | None = None  # reads the routes in the background
        self._reading: Future | None = None
        self._routes_set = 0  # counts the routes applied: a background read started before the last one is stale
        self._reading_after = 0  # the count when the background read started
        self._live: set[str] | None = None  # brokers registered now, looked up once per route poll when needed
        self._live_known = False
        self.sparse_topics: frozenset[str] = frozenset()
        self.latest: dict[MessageQueue, int] = {}  # last known end offset of every queue seen, kept while unavailable
        self.replica: set[MessageQueue] = set()  # latest answered by a slave (may lag behind its master)
        self.silent: set[MessageQueue] = set()  # in the routes, but their broker did not answer the last poll
        # whether the slave read while its master is away serves pulls, when that was asked, and why not
        self._serves_reads: dict[str, tuple[bool, float, BaseException | str]] = {}
        self._latest_at = float("-inf")

    # -- polling ---------------------------------------------------------------------------------------------
    def poll(self, *, force: bool = False) -> None:
        """Bring ``latest`` up to date: with ``force``, every queue is asked; else the queues without a held pull,
        if any and not asked in the last OFFSET_POLL_S (or the routes just changed). The routes are read every
        pollNameServerIntervalMs in the background and take effect at the first call after they came. Only the
        first read is waited for; with ``force`` a read is started (after applying one that ended before) and waited
        for at most ROUTE_WAIT_S (name servers that never answer must not hold up Spark's thread), else the last
        routes are used. A read that
        started before routes read later were applied is stale: it is dropped."""
        now = time.monotonic()
        due = now - self._latest_at >= OFFSET_POLL_S
        if self._routes_at == float("-inf"):
            self._apply_routes(self._read_routes())
            self._routes_at = now
            due = True
        elif force or (
            self._reading is None and now - self._routes_at >= self.options.poll_name_server_interval_ms / 1000
        ):
            if self._reading is not None and self._take_routes(0.0):  # a read older than this call, ended
                due = True
            if self._reading is None:
                self._start_reading()
        if self._reading is not None and self._take_routes(ROUTE_WAIT_S if force else 0.0):
            due = True
        learned = {mq: offset for mq, offset in self._holds.rung().items() if offset is not None}
        if learned:
            self.latest.update(learned)  # the masters' answers to held pulls
            self.version += 1
        queues = self.queues()
        if not force:
            if not due or len(self._holds) == len(queues):
                return
            queues = self._holds.unheld(queues)
        self._poll_offsets(queues)
        self._latest_at = time.monotonic()

    def _route_reader(self) -> ThreadPoolExecutor:
        """The thread that asks the name servers, one request after the other."""
        if self._reader is None:
            self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rmq-routes")
        return self._reader

    def _start_reading(self) -> None:
        """Start a background read of the routes."""
        self._reading = self._route_reader().submit(self._read_routes)
        self._reading_after = self._routes_set
        self._routes_at = time.monotonic()

    def _take_routes(self, wait: float) -> bool:
        """Apply the background read of the routes if it ends within ``wait`` seconds and no routes read after it
        started were applied meanwhile (what it raised is raised here); whether it did."""
        reading = self._reading
        if reading is None or not futures_wait([reading], timeout=wait).done:
            return False
        self._reading = None
        routes = reading.result()
        if self._reading_after != self._routes_set:
            return False  # routes read after it started were applied meanwhile: it is stale
        self._apply_routes(routes)
        return True

    def _in_background(self, ask: Callable[..., T], *args: Any, **kw: Any) -> T:
        """``ask(*args, **kw)`` (a name-server request) run by the route reader, waited for at most ROUTE_WAIT_S:
        RequestTimeoutError (retryable: cannot tell now) after that."""
        try:
            return self._route_reader().submit(ask, *args, **kw).result(timeout=ROUTE_WAIT_S)
        except FutureTimeout:
            raise RequestTimeoutError(f"the name servers did not answer within {ROUTE_WAIT_S} s") from None

    def close(self) -> None:
        """Drop the held pulls and the route reader."""
        self._holds.close()
        if self._reader is not None:
            self._reader.shutdown(wait=False, cancel_futures=True)
            self._reader = None
            self._reading = None

    def _read_routes(self) -> dict[str, TopicRoute | None]:
        """The query's topics and their routes, as the name servers answer now (the last ones while none does).
        Runs in the background: it only reads this watch. Once the topics were listed, a name server that does not
        answer, or a topicPattern match whose route cannot be read now, is waited for, never raised."""
        known = self._routes
        try:
            topics = query_topics(self.client, self.options)
        except RETRYABLE as e:
            if not self._listed:
                raise
            self.client.outages.down(NAME_SERVERS, "using the last known topic list", e)
            topics = list(known)
        self._listed = True
        routes: dict[str, TopicRoute | None] = {}
        refreshed = self.client.refresh_routes([topic for topic in topics if topic in known])  # one write for all
        for topic in topics:
            if topic in known:
                answer = refreshed[topic]
                if isinstance(answer, TopicNotFoundError):
                    routes[topic] = None  # its brokers are all down, or it was deleted: classify() tells
                elif isinstance(answer, RocketMQError):
                    raise answer
                else:
                    routes[topic] = answer
                continue
            try:
                route = first_route(self.client, topic, self.options)  # a topic never seen: errors for bad input
            except RETRYABLE as e:
                if self.options.topic_pattern is None:
                    raise
                self.client.outages.down(NAME_SERVERS, "using the last known routes", e)
                continue  # a pattern's new topic: read at a later poll
            if route is not None:
                routes[topic] = route
        return routes

    def _apply_routes(self, routes: dict[str, TopicRoute | None]) -> None:
        self._live_known = False
        self._serves_reads.clear()
        new = set(routes) - set(self._routes)
        first = not self._routes
        self._set_routes(routes)
        if first:
            check_assigned(self.options, routes)
            check_filter(self.client, self.options, self.queues())
        if new:
            self.sparse_topics |= compacted_topics(self.client, new)

    def _poll_offsets(self, queues: list[MessageQueue]) -> None:
        """Ask ``queues``' latest offsets, note which of them a slave answered or nobody did, and hold a pull at
        the end of each one its master answered."""
        try:
            answers = self.client.max_offsets(queues, partial=True)
        except RocketMQError:
            # a queue may have left the routes since they were read (a topic that shrank; the gRPC gateway refuses
            # such a queue): read them now, and ask the queues still in them (the rest is classify()'s to judge);
            # routes that take longer than ROUTE_WAIT_S are waited for by later polls
            if self._reading is None:
                self._start_reading()
            if not self._take_routes(ROUTE_WAIT_S):
                return
            queues = [mq for mq in queues if mq in self.queue_set]
            answers = self.client.max_offsets(queues, partial=True)
        self.version += 1
        self.latest.update(answers)
        asked = set(queues)
        self.replica = (self.replica - asked) | answers.replica
        failed: dict[str, BaseException | str] = {mq.broker_name: e for mq, e in answers.failed.items()}
        refusing = self._refusing_reads(answers)
        failed.update(refusing)
        self.silent = (self.silent - asked) | set(answers.failed) | {mq for mq in answers if mq.broker_name in refusing}
        self.client.outages.report((mq.broker_name for mq in queues), failed, broker_group, WAITS)
        with self.client.burst():
            for mq, offset in answers.items():
                if mq not in answers.replica:
                    self._holds.arm(mq, offset)

    def _refusing_reads(self, answers) -> dict[str, BaseException | str]:
        """The brokers whose latest offsets a slave answered (their master is away) and whose slave refuses pulls
        (slaveReadEnable=false, or the probe pull failed), with why: unavailable, as if they had no slave, until
        the master answers. A slave that serves is asked again after the next route poll; one that refuses (or
        refers to its master for a moment after the master left), every few seconds."""
        refusing: dict[str, BaseException | str] = {}
        now = time.monotonic()
        for mq in sorted(answers.replica):
            broker = mq.broker_name
            serves, at, why = self._serves_reads.get(broker, (False, float("-inf"), REFUSES))
            if not serves and now - at >= RETRY_DOWN_S:
                why = REFUSES
                try:
                    serves = self.client.serves_reads(mq, answers[mq], self.options.pull_group)
                except RocketMQError as e:
                    serves, why = False, e  # not answering now, or refusing the probe: asked again in a few seconds
                self._serves_reads[broker] = (serves, now, why)
            if not serves:
                refusing[broker] = why
        return refusing

    # -- what the routes show --------------------------------------------------------------------------------
    def queues(self) -> list[MessageQueue]:
        """The readable queues of the query (only the assigned ones with option assign) the routes show now,
        sorted."""
        if self._queues is None:
            self._queues = sorted(
                (
                    mq
                    for r in self._routes.values()
                    if r is not None
                    for mq in r.read_queues()
                    if reads_queue(self.options, mq)
                ),
                key=queue_order,
            )
            self._queue_set = frozenset(self._queues)
        return self._queues

    def topics(self) -> list[str] | None:
        """The query's topics as the watch last read them (None before its first read)."""
        return sorted(self._routes) if self._listed else None

    @property
    def queue_set(self) -> frozenset[MessageQueue]:
        """``queues()`` as a set."""
        self.queues()
        return self._queue_set

    def _set_routes(self, routes: dict[str, TopicRoute | None]) -> None:
        unchanged = routes == self._routes
        self._routes = routes
        self._routes_set += 1
        self.version += 1
        if not unchanged:  # (the usual route poll changes nothing: its queues and the holds kept stay as they are)
            self._queues = None
            self._holds.keep(self.queues())

    def readable(self) -> list[MessageQueue]:
        """The queues the routes show whose broker answered the last poll."""
        return [mq for mq in self.queues() if mq not in self.silent and mq in self.latest]

    def classify(self, known: Iterable[MessageQueue]) -> tuple[set[MessageQueue], set[MessageQueue]]:
        """(unavailable, vanished) among ``known``, for ``QueueAccess``: a queue missing from the routes has
        vanished when its broker is in the topic's route with fewer queues, or is registered and up but no longer
        has the topic, or when the options no longer name its topic; otherwise (broker missing from the route,
        topic missing from the name server's list, not readable now, or silent) it is unavailable."""
        current = self.queue_set
        known = known.keys() if isinstance(known, dict) else set(known)
        unavailable: set[MessageQueue] = set()
        vanished: set[MessageQueue] = set()
        if current.issuperset(known) and self.silent.isdisjoint(known) and self.latest.keys() >= known:
            return unavailable, vanished  # every one is in the routes and answered
        fresh: dict[str, TopicRoute | None] = {}
        for mq in known:
            if mq in current:
                if mq in self.silent or mq not in self.latest:
                    unavailable.add(mq)
                continue
            if not reads_queue(self.options, mq):
                vanished.add(mq)  # the options no longer name it (its topic, or the queue under option assign)
                continue
            # A topic missing from the name server's list (all its brokers unregistered, or a name server that
            # restarted before they registered again) follows the same rules as a topic without a route.
            route = self._routes.get(mq.topic)
            queue_data = route.queue_data(mq.broker_name) if route else None
            broker = route.broker(mq.broker_name) if route else None
            if queue_data is not None and broker is not None and broker.addresses:
                (vanished if mq.queue_id >= queue_data.read_queue_nums else unavailable).add(mq)
            elif self._registered(mq.broker_name) and not self._back_in_route(mq, fresh):
                vanished.add(mq)
            else:
                unavailable.add(mq)
                self.client.outages.down(broker_group(mq.broker_name), WAITS, f"not in the route of topic {mq.topic}")
        return unavailable, vanished

    def _back_in_route(self, mq: MessageQueue, fresh: dict[str, TopicRoute | None]) -> bool:
        """Whether a route of ``mq``'s topic read now has the queue again. The routes were read before the name
        servers were asked which brokers are registered: a broker that registered in between (a restart) is in the
        second answer but not yet in the first, and its queues are back, not gone."""
        if mq.topic not in fresh:
            try:
                fresh[mq.topic] = self.route_now(mq.topic)
            except RETRYABLE:
                return True  # cannot tell now: wait, and classify again at the next batch
            self._set_routes({**self._routes, mq.topic: fresh[mq.topic]})
        route = fresh[mq.topic]
        return route is not None and mq in set(route.read_queues())

    def route_now(self, topic: str) -> TopicRoute | None:
        """``topic``'s route as the name servers answer now (None: it has none), waited for at most ROUTE_WAIT_S;
        RETRYABLE when they cannot tell now. The client caches it, but keeps its last route when the topic has
        none: a verdict that must rest on the newest route takes it from here, never from that cache."""
        try:
            return self._in_background(self.client.route, topic, refresh=True)
        except TopicNotFoundError:
            return None

    def _registered(self, broker: str) -> bool:
        """True only when the name servers say ``broker`` is registered now (False when they cannot tell)."""
        if not self._live_known:
            try:
                self._live = self._in_background(self.client.live_brokers)
            except (UnsupportedError, *RETRYABLE):
                self._live = None
            self._live_known = True
        return self._live is not None and broker in self._live
