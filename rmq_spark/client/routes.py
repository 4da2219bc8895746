"""The route cache: each topic's route as the name servers last answered it, kept for a TTL and kept on through a
name-server outage. A route past its TTL is looked up again on a background thread, and a caller waits for that
lookup only briefly (ROUTE_WAIT_S) before it goes on with the cached route, so a name server that takes requests
and never answers does not hold up reads from brokers that are up. It asks the name servers only through a
transport's ``_fetch_route(s)`` and reports their outages to the client's outage log."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Protocol

from rmq_spark.client.errors import RETRYABLE, RocketMQError
from rmq_spark.client.model import TopicRoute
from rmq_spark.client.outages import OutageLog

NAME_SERVERS = "the name servers"
# While no name server answers, the last route is used and the name servers are asked again at most this often.
ROUTE_RETRY_S = 1.0
# The longest a caller with a cached route waits for the name servers to answer a new lookup: they answer in
# milliseconds when they are well; one that takes packets and never answers must not hold up the caller (Spark's
# thread asks latestOffset every few milliseconds) for a request timeout.
ROUTE_WAIT_S = 0.5


class RouteSource(Protocol):
    """Where the cache asks for routes (a transport) and reports the name servers' outages."""

    outages: OutageLog

    def _fetch_route(self, topic: str) -> TopicRoute: ...

    def _fetch_routes(self, topics: Sequence[str]) -> list[TopicRoute | RocketMQError]: ...


class RouteCache:
    """The routes of the topics a client has used, each with when it was fetched; thread-safe."""

    def __init__(self, source: RouteSource, ttl: float) -> None:
        self._source = source
        self.ttl = ttl
        self._routes: dict[str, tuple[float, TopicRoute]] = {}
        self._lock = threading.Lock()
        self._lookups: dict[str, Future] = {}  # the background route lookups under way, by topic
        self._pool: ThreadPoolExecutor | None = None

    def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        """The topic's route, cached for ``ttl`` seconds. Past that, it is looked up again in the background,
        and the caller waits for the answer at most ROUTE_WAIT_S before it goes on with the cached route (a name
        server that answers nothing must not hold up reads from brokers that are up). With ``refresh``, or without
        a cached route, the lookup is waited for; while no name server answers, the last route is kept (asked
        again in ROUTE_RETRY_S), and without one the error is raised."""
        with self._lock:
            cached = self._routes.get(topic)
        if cached is None or refresh:
            return self._lookup(topic)
        if time.monotonic() - cached[0] < self.ttl:
            return cached[1]
        return self.recheck_route(topic)

    def recheck_route(self, topic: str) -> TopicRoute:
        """The topic's route looked up again in the background, waiting at most ROUTE_WAIT_S for it (not at all
        while the name servers are known to be down, or when a lookup of the topic is under way already), else the
        cached route. Without a cached route, the lookup is waited for."""
        with self._lock:
            cached = self._routes.get(topic)
            if cached is None:
                pending, wait = None, 0.0
            elif topic in self._lookups:
                pending, wait = self._lookups[topic], 0.0
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rmq-route")
                pending = self._lookups[topic] = self._pool.submit(self._lookup_in_background, topic)
                wait = 0.0 if self._source.outages.is_down(NAME_SERVERS) else ROUTE_WAIT_S
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
            with self._lock:
                self._lookups.pop(topic, None)

    def refresh_routes(self, topics: Sequence[str]) -> dict[str, TopicRoute | RocketMQError]:
        """``route(topic, refresh=True)`` of every topic, asked together where the transport can (remoting: one
        write to the name server for all): each topic's route, or the error its lookup raised."""
        fetched = self._source._fetch_routes(topics)
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
        with self._lock:
            cached = self._routes.get(topic)
        try:
            if isinstance(fetched, RocketMQError):
                raise fetched
            route = self._source._fetch_route(topic) if fetched is None else fetched
        except RETRYABLE as e:
            if cached is None:
                raise
            self._source.outages.down(NAME_SERVERS, "using the last known routes", e)
            with self._lock:  # ask again in ROUTE_RETRY_S, not at every call
                self._routes[topic] = (time.monotonic() - self.ttl + ROUTE_RETRY_S, cached[1])
            return cached[1]
        self._source.outages.up(NAME_SERVERS)
        with self._lock:
            self._routes[topic] = (now, route)
        return route

    def invalidate_route(self, topic: str) -> None:
        """Look the topic's route up again at its next use (at most once every ROUTE_RETRY_S)."""
        with self._lock:
            cached = self._routes.get(topic)
            if cached is not None:
                stale = time.monotonic() - self.ttl + ROUTE_RETRY_S
                self._routes[topic] = (min(cached[0], stale), cached[1])

    def cached_route(self, topic: str) -> TopicRoute | None:
        """The last route fetched for ``topic``, however old; None if it was never fetched."""
        with self._lock:
            cached = self._routes.get(topic)
        return cached[1] if cached else None

    def close(self) -> None:
        """Stop the background route lookups (one under way ends at its request timeout)."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._lookups.clear()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
