"""The remoting-protocol client: routes, offsets, pulls, consumer offsets and sends over name server and brokers."""
from __future__ import annotations

import ssl
from typing import Callable, Iterable, TypeVar

from rmq_spark.client.base import DEFAULT_GROUP, BaseClient
from rmq_spark.client.errors import ConnectionLostError
from rmq_spark.client.model import Message, MessageQueue, PullResult, SendResult, TopicRoute
from rmq_spark.client.range_reader import RangeChunk
from rmq_spark.client.remoting import broker as req
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.acl import Credentials
from rmq_spark.client.remoting.connection import ConnectionPool, PendingRequest
from rmq_spark.client.remoting.frame import RemotingCommand
from rmq_spark.client.remoting.message_codec import OutgoingMessage, decode_messages
from rmq_spark.client.remoting.namesrv import NameServerClient, parse_name_servers

T = TypeVar("T")


class PendingPull:
    """A pull in flight; ``result()`` waits for it and returns the PullResult."""

    __slots__ = ("queue", "offset", "max_nums", "_pending", "_address")

    def __init__(self, queue: MessageQueue, offset: int, max_nums: int, pending: PendingRequest,
                 address: str) -> None:
        self.queue, self.offset, self.max_nums = queue, offset, max_nums
        self._pending, self._address = pending, address

    def result(self) -> PullResult:
        return req.pull_result(self._pending.result(), self.queue, self._address)


def _tls_context(tls: bool | ssl.SSLContext) -> ssl.SSLContext | None:
    if isinstance(tls, ssl.SSLContext):
        return tls
    return ssl.create_default_context() if tls else None


class RemotingClient(BaseClient):
    """A RocketMQ client over the native remoting protocol (name server and brokers). Thread-safe."""

    def __init__(self, name_server: str | list[str], *, credentials: Credentials | None = None,
                 tls: bool | ssl.SSLContext = False, request_timeout: float = 10.0, connect_timeout: float = 5.0,
                 route_ttl: float = 30.0) -> None:
        super().__init__(route_ttl=route_ttl)
        addresses = parse_name_servers(name_server) if isinstance(name_server, str) else list(name_server)
        self.request_timeout = request_timeout
        self._pool = ConnectionPool(connect_timeout=connect_timeout, tls=_tls_context(tls),
                                    signer=credentials.sign if credentials else None)
        self._namesrv = NameServerClient(self._pool, addresses, timeout=request_timeout)

    def close(self) -> None:
        """Close every connection."""
        self._pool.close()

    # -- routing ---------------------------------------------------------------------------------------------
    def _fetch_route(self, topic: str) -> TopicRoute:
        return self._namesrv.route(topic)

    def topics(self) -> list[str]:
        """Every topic known to the name server."""
        return self._namesrv.topics()

    def broker_address(self, topic: str, broker_name: str) -> str:
        """The master address of ``broker_name`` for ``topic``; refreshes the route once if it is missing."""
        for refresh in (False, True):
            broker = self.route(topic, refresh=refresh).broker(broker_name)
            if broker is not None and broker.master_address:
                return broker.master_address
        raise ConnectionLostError(f"broker {broker_name!r} has no master in the route of topic {topic!r}: "
                                  "it may be down or the topic is not on it")

    # -- request plumbing ------------------------------------------------------------------------------------
    def _call(self, mq: MessageQueue, make: Callable[[], RemotingCommand],
              parse: Callable[[RemotingCommand, str], T]) -> T:
        """One request to the queue's master, retried once on a fresh connection and route if the first broke."""
        for attempt in (0, 1):
            address = self.broker_address(mq.topic, mq.broker_name)
            try:
                return parse(self._pool.request(address, make(), self.request_timeout), address)
            except ConnectionLostError:
                if attempt:
                    raise
                self.route(mq.topic, refresh=True)
        raise AssertionError("unreachable")

    def _gather(self, mqs: Iterable[MessageQueue], make: Callable[[MessageQueue], RemotingCommand],
                parse: Callable[[MessageQueue, RemotingCommand, str], T]) -> dict[MessageQueue, T]:
        """The same request for many queues, all in flight at once (every broker asked concurrently)."""
        sent = []
        for mq in mqs:
            address = self.broker_address(mq.topic, mq.broker_name)
            try:
                sent.append((mq, address, self._pool.send(address, make(mq), self.request_timeout)))
            except ConnectionLostError:
                sent.append((mq, address, None))
        out = {}
        for mq, address, pending in sent:
            if pending is None:
                out[mq] = self._call(mq, lambda: make(mq), lambda r, a: parse(mq, r, a))
                continue
            try:
                out[mq] = parse(mq, pending.result(), address)
            except ConnectionLostError:
                out[mq] = self._call(mq, lambda: make(mq), lambda r, a: parse(mq, r, a))
        return out

    # -- offsets ---------------------------------------------------------------------------------------------
    def min_offsets(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """The first offset still held by the broker, per queue."""
        return self._gather(mqs, lambda mq: req.offset_request(codes.GET_MIN_OFFSET, mq),
                            lambda mq, r, a: req.header_long(r, "offset", f"min offset of {mq}", a))

    def max_offsets(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """The offset after the last message (exclusive end), per queue."""
        return self._gather(mqs, lambda mq: req.offset_request(codes.GET_MAX_OFFSET, mq, committed="true"),
                            lambda mq, r, a: req.header_long(r, "offset", f"max offset of {mq}", a))

    def search_offsets(self, mqs: Iterable[MessageQueue], timestamp: int,
                       boundary: str = "lower") -> dict[MessageQueue, int]:
        """Per queue, the offset of the first (``lower``) or last (``upper``) message stored at or after / at or
        before ``timestamp`` ms, as the broker's SEARCH_OFFSET_BY_TIMESTAMP defines it."""
        if boundary not in ("lower", "upper"):
            raise ValueError(f"boundary must be 'lower' or 'upper', not {boundary!r}")
        return self._gather(
            mqs, lambda mq: req.offset_request(codes.SEARCH_OFFSET_BY_TIMESTAMP, mq, timestamp=str(int(timestamp)),
                                               boundaryType=boundary.upper()),
            lambda mq, r, a: req.header_long(r, "offset", f"offset by timestamp of {mq}", a))

    def earliest_store_time(self, mq: MessageQueue) -> int:
        """Store time (ms) of the queue's oldest message."""
        return self._call(mq, lambda: req.offset_request(codes.GET_EARLIEST_MSG_STORETIME, mq),
                          lambda r, a: req.header_long(r, "timestamp", f"earliest store time of {mq}", a))

    # -- consumer offsets ------------------------------------------------------------------------------------
    def query_consumer_offsets(self, group: str, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int | None]:
        """The group's committed (next-to-consume) offset per queue, None where the group has none."""
        def parse(mq: MessageQueue, r: RemotingCommand, a: str) -> int | None:
            if r.code == codes.QUERY_NOT_FOUND:
                return None
            return req.header_long(r, "offset", f"consumer offset of group {group!r} on {mq}", a)
        return self._gather(mqs, lambda mq: req.query_consumer_offset_request(group, mq), parse)

    def _store_consumer_offsets(self, group: str, offsets: dict[MessageQueue, int]) -> list[MessageQueue]:
        def parse(mq: MessageQueue, r: RemotingCommand, a: str) -> bool:
            if r.code == codes.SUBSCRIPTION_GROUP_NOT_EXIST:
                return False
            req.check(r, f"update of group {group!r} offset on {mq}", a)
            return True
        stored = self._gather(offsets, lambda mq: req.update_consumer_offset_request(group, mq, offsets[mq]), parse)
        return [mq for mq, ok in stored.items() if not ok]

    # -- pull ------------------------------------------------------------------------------------------------
    def pull_async(self, mq: MessageQueue, offset: int, max_nums: int = codes.DEFAULT_PULL_BATCH, *,
                   group: str = DEFAULT_GROUP, expression: str = "*", expression_type: str = "TAG",
                   suspend_ms: int = 0) -> PendingPull:
        """Send a pull and return at once. With ``suspend_ms`` > 0 the broker holds it until messages arrive or the
        suspension ends (long polling); the request timeout is extended past it."""
        address = self.broker_address(mq.topic, mq.broker_name)
        cmd = req.pull_request(mq, group, offset, max_nums, expression=expression,
                               expression_type=expression_type, suspend_ms=suspend_ms)
        timeout = self.request_timeout + suspend_ms / 1000.0
        try:
            pending = self._pool.send(address, cmd, timeout)
        except ConnectionLostError:
            address = self.broker_address(mq.topic, mq.broker_name)
            pending = self._pool.send(address, cmd, timeout)
        return PendingPull(mq, offset, max_nums, pending, address)

    def _range_messages(self, chunk: RangeChunk, mq: MessageQueue, tags: frozenset[str] | None) -> list[Message]:
        return decode_messages(chunk.body, mq.broker_name, tags=tags)

    # -- admin and produce (tests, benchmarks, the later sink) ----------------------------------------------
    def create_topic(self, topic: str, queues: int = 4, *, broker_names: Iterable[str] | None = None,
                     seed_topic: str = "TBW102") -> None:
        """Create or update ``topic`` with ``queues`` read/write queues on the masters of the cluster (found
        through ``seed_topic``'s route, or the given brokers)."""
        route = self.route(seed_topic, refresh=True)
        names = set(broker_names) if broker_names is not None else {b.broker_name for b in route.brokers}
        for b in route.brokers:
            if b.broker_name in names and b.master_address:
                r = self._pool.request(b.master_address, req.create_topic_request(topic, queues, queues),
                                       self.request_timeout)
                req.check(r, f"create topic {topic!r}", b.master_address)

    def send(self, mq: MessageQueue, messages: OutgoingMessage | list[OutgoingMessage],
             *, group: str = "rmq_spark_producer") -> SendResult:
        """Send one message or a batch to one queue."""
        batch = [messages] if isinstance(messages, OutgoingMessage) else list(messages)
        if not batch:
            raise ValueError("send needs at least one message")
        batch = [m.with_unique_id() for m in batch]
        return self._call(mq, lambda: req.send_request(group, mq, batch),
                          lambda r, a: req.send_result(r, mq, a, batch))
