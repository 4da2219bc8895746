"""The client both transports share: ``BaseClient`` puts the transport's primitives (``transport.Transport``) and
the policies over them together behind one public API. Each policy lives in a module of its own and takes only the
requests it uses: the route cache (``routes``), the per-queue fan-out (``fan_out``), first and end offsets
(``offset_edges``), offsets by time (``time_search``), consumer offsets (``consumer_offsets``), held pulls
(``holds``) and exact range reads (``range_reader``, their messages gathered by the native core). This module adds
the single-queue shortcuts and the defaults a transport may replace."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence

from rmq_spark.client import consumer_offsets, time_search
from rmq_spark.client.defaults import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_PULL_DEPTH, DEFAULT_RETRY_TIMEOUT
from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.fan_out import Answers
from rmq_spark.client.gathering import MessageCollector
from rmq_spark.client.holds import CallHolds, Holds
from rmq_spark.client.model import (
    DEFAULT_GROUP,
    DEFAULT_PRODUCER_GROUP,
    EVERY_MESSAGE,
    SLOT,
    Boundary,
    FilterExpression,
    Message,
    MessageQueue,
    MessageType,
    OutgoingMessage,
    PullResult,
    SendResult,
    TopicRoute,
)
from rmq_spark.client.namespaces import NO_NAMESPACE, Namespace
from rmq_spark.client.offset_edges import OffsetEdges
from rmq_spark.client.outages import OutageLog
from rmq_spark.client.range_reader import PullSession, RangeReader, SharedPulls
from rmq_spark.client.routes import RouteCache
from rmq_spark.client.transport import Transport

log = logging.getLogger(__name__)


def outside(gaps: Sequence[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The non-empty parts of ``[start, end)`` outside ``gaps`` (``remapping_gaps``)."""
    out = []
    for low, high in sorted(gaps):
        if low > start:
            out.append((start, min(low, end)))
        start = max(start, high)
    out.append((start, end))
    return [(a, b) for a, b in out if b > a]


class BaseClient(Transport):
    """The transport-neutral half of a RocketMQ client. Holds live connections, so it is never pickled: each
    process (driver, executor task) builds its own from the same settings."""

    def __init__(
        self,
        *,
        route_ttl: float = 30.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        namespace: Namespace = NO_NAMESPACE,
    ) -> None:
        self.namespace = namespace  # topics and groups go to the brokers in it; the client's callers never see it
        self.max_message_bytes = max_message_bytes
        self.outages = OutageLog(log)
        self._route_cache = RouteCache(self, route_ttl)
        # the group pulls for offsets name, where the Get requests are refused (the reader's pull group)
        self.pull_group = DEFAULT_GROUP
        self._edges = OffsetEdges(self)

    def __reduce__(self):
        raise TypeError(f"{type(self).__name__} holds connections and cannot be pickled; build one where it is used")

    def close(self) -> None:
        """Close every connection."""
        self._route_cache.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- defaults a transport may replace --------------------------------------------------------------------
    def _create_group(self, group: str, mq: MessageQueue, offset: int) -> None:
        """Make the broker of ``mq`` know ``group`` the way brokers create groups: by a pull in its name."""
        self.pull(mq, offset, 1, group=group)

    def holds(self, group: str, hold_ms: int) -> Holds:
        """The held pulls of ``group``, each held ``hold_ms`` at most; this default keeps them over ``hold_async``."""
        return CallHolds(self, group, hold_ms)

    def check_filter(self, mq: MessageQueue, group: str, expression: FilterExpression) -> None:
        """InvalidFilterError when the broker of ``mq`` cannot filter by the expression. This default pulls one
        message with it (a server that checks filters refuses the pull)."""
        self.pull(mq, 0, 1, group=group, expression=expression)

    def topic_message_type(self, topic: str) -> MessageType | None:
        """The topic's RocketMQ 5 message.type where the server tells it, else None. This default: what the route
        says."""
        return self.route(topic).message_type

    # -- routing (``routes.RouteCache``) ---------------------------------------------------------------------
    def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        """The topic's route, cached for ``route_ttl`` seconds and looked up again in the background past that
        (``RouteCache.route``); with ``refresh`` the lookup is waited for."""
        return self._route_cache.route(topic, refresh=refresh)

    def recheck_route(self, topic: str) -> TopicRoute:
        """The topic's route looked up again, waiting at most ROUTE_WAIT_S for it (``RouteCache.recheck_route``)."""
        return self._route_cache.recheck_route(topic)

    def refresh_routes(self, topics: Sequence[str]) -> dict[str, TopicRoute | RocketMQError]:
        """``route(topic, refresh=True)`` of every topic, asked together where the transport can: each topic's
        route, or the error its lookup raised."""
        return self._route_cache.refresh_routes(topics)

    def invalidate_route(self, topic: str) -> None:
        """Have the topic's route looked up again at its next use (``RouteCache.invalidate_route``)."""
        self._route_cache.invalidate_route(topic)

    def cached_route(self, topic: str) -> TopicRoute | None:
        """The last route fetched for ``topic``, however old, or None (``RouteCache.cached_route``)."""
        return self._route_cache.cached_route(topic)

    def queues(self, topic: str, *, refresh: bool = False) -> list[MessageQueue]:
        """The readable queues of a topic, sorted."""
        return self.route(topic, refresh=refresh).read_queues()

    # -- offsets of many queues, each asked in one fan-out (``fan_out``) -------------------------------------
    def min_offsets(self, mqs: Iterable[MessageQueue], *, partial: bool = False) -> Answers:
        """The first offset still held by the broker, per queue (``OffsetEdges``)."""
        return self._edges.min_offsets(mqs, partial=partial)

    def max_offsets(self, mqs: Iterable[MessageQueue], *, partial: bool = False) -> Answers:
        """The offset after the last message (exclusive end), per queue (``OffsetEdges``)."""
        return self._edges.max_offsets(mqs, partial=partial)

    def search_offsets(
        self, mqs: Iterable[MessageQueue], timestamp: int, boundary: Boundary = Boundary.LOWER, *, partial: bool = False
    ) -> Answers:
        """Per queue, the offset of the first (``LOWER``) or last (``UPPER``) message stored at or after / at or
        before ``timestamp`` ms (``time_search.search_offsets``)."""
        return time_search.search_offsets(self, mqs, timestamp, boundary, partial=partial)

    def query_consumer_offsets(self, group: str, mqs: Iterable[MessageQueue], *, partial: bool = False) -> Answers:
        """The group's committed (next-to-consume) offset per queue, None where the group has none."""
        return consumer_offsets.query_consumer_offsets(self, group, mqs, partial=partial)

    def update_consumer_offsets(
        self, group: str, offsets: Mapping[MessageQueue, int], *, partial: bool = False
    ) -> Answers:
        """Store the group's next-to-consume offset for each queue on its broker's master, creating the group where
        a broker does not know it (``consumer_offsets.update_consumer_offsets``); with ``partial``, queues whose
        master is unavailable are left in ``Answers.failed``."""
        return consumer_offsets.update_consumer_offsets(self, group, offsets, partial=partial)

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
