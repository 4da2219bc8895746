"""What every transport's client shares: the route cache, single-queue shortcuts, group creation on offset
update and exact range reads. A transport supplies the primitives (``_fetch_route``, ``_store_consumer_offsets``,
``pull_async``, the offset fan-outs)."""
from __future__ import annotations

import threading
import time
from typing import Iterable, Iterator, Sequence

from rmq_spark.client import hints
from rmq_spark.client.errors import BrokerError, RocketMQError
from rmq_spark.client.model import Message, MessageQueue, PullResult, TopicRoute
from rmq_spark.client.range_reader import SLOT, RangeChunk, RangeReader, tag_set

DEFAULT_GROUP = "rmq_spark_reader"


class BaseClient:
    """The transport-neutral half of a RocketMQ client. Holds live connections, so it is never pickled: each
    process (driver, executor task) builds its own from the same settings."""

    request_timeout: float

    def __init__(self, *, route_ttl: float = 30.0) -> None:
        self._route_ttl = route_ttl
        self._routes: dict[str, tuple[float, TopicRoute]] = {}
        self._routes_lock = threading.Lock()

    def __reduce__(self):
        raise TypeError(f"{type(self).__name__} holds connections and cannot be pickled; build one where it is used")

    def close(self) -> None:
        """Close every connection."""

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport primitives --------------------------------------------------------------------------------
    def _fetch_route(self, topic: str) -> TopicRoute:
        raise NotImplementedError

    def _store_consumer_offsets(self, group: str, offsets: dict[MessageQueue, int]) -> list[MessageQueue]:
        """Store each offset; return the queues whose broker does not know ``group`` (nothing stored there)."""
        raise NotImplementedError

    def _range_messages(self, chunk: RangeChunk, mq: MessageQueue,
                        tags: frozenset[str] | None) -> Sequence[Message]:
        """The messages of one pulled chunk (all of them; the caller keeps those in the chunk's window)."""
        raise NotImplementedError

    def pull_async(self, mq: MessageQueue, offset: int, max_nums: int = SLOT, *, group: str = DEFAULT_GROUP,
                   expression: str = "*", expression_type: str = "TAG", suspend_ms: int = 0):
        raise NotImplementedError

    def min_offsets(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        raise NotImplementedError

    def max_offsets(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        raise NotImplementedError

    def search_offsets(self, mqs: Iterable[MessageQueue], timestamp: int,
                       boundary: str = "lower") -> dict[MessageQueue, int]:
        raise NotImplementedError

    def query_consumer_offsets(self, group: str, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, int | None]:
        raise NotImplementedError

    # -- routing ---------------------------------------------------------------------------------------------
    def route(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        """The topic's route, cached for ``route_ttl`` seconds."""
        now = time.monotonic()
        with self._routes_lock:
            cached = self._routes.get(topic)
        if cached and not refresh and now - cached[0] < self._route_ttl:
            return cached[1]
        route = self._fetch_route(topic)
        with self._routes_lock:
            self._routes[topic] = (now, route)
        return route

    def queues(self, topic: str, *, refresh: bool = False) -> list[MessageQueue]:
        """The readable queues of a topic, sorted."""
        return self.route(topic, refresh=refresh).read_queues()

    # -- single-queue shortcuts ------------------------------------------------------------------------------
    def min_offset(self, mq: MessageQueue) -> int:
        return self.min_offsets([mq])[mq]

    def max_offset(self, mq: MessageQueue) -> int:
        return self.max_offsets([mq])[mq]

    def search_offset(self, mq: MessageQueue, timestamp: int, boundary: str = "lower") -> int:
        return self.search_offsets([mq], timestamp, boundary)[mq]

    def query_consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        return self.query_consumer_offsets(group, [mq])[mq]

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self.update_consumer_offsets(group, {mq: offset})

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = SLOT, **kw) -> PullResult:
        """Pull once and wait for the result."""
        return self.pull_async(mq, offset, max_nums, **kw).result()

    # -- consumer offsets ------------------------------------------------------------------------------------
    def update_consumer_offsets(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        """Store the group's next-to-consume offset for each queue (as RemoteBrokerOffsetStore.persistAll does).
        A group the broker does not know yet is created the way brokers create groups: by a pull in its name."""
        for mq in self._store_consumer_offsets(group, offsets):
            try:
                self.pull(mq, offsets[mq], 1, group=group)
            except RocketMQError as e:
                raise RocketMQError(f"consumer group {group!r} does not exist on broker {mq.broker_name} and could "
                                    f"not be created by a pull ({e}); {hints.GROUP}",
                                    code=e.code, remark=e.remark) from e
            if self._store_consumer_offsets(group, {mq: offsets[mq]}):
                raise BrokerError(f"update of group {group!r} offset on {mq} failed: {hints.GROUP}")

    # -- exact range reads -----------------------------------------------------------------------------------
    def read_range(self, mq: MessageQueue, start: int, end: int, *, depth: int = 8, group: str = DEFAULT_GROUP,
                   expression: str = "*", expression_type: str = "TAG",
                   fail_on_data_loss: bool = True) -> Iterator[Message]:
        """Every message of ``mq`` with ``start <= queueOffset < end`` that matches the filter, in order,
        with ``depth`` pulls in flight."""
        tags = tag_set(expression) if expression_type.upper() == "TAG" else None
        reader = RangeReader(self, mq, start, end, depth=depth, group=group, expression=expression,
                             expression_type=expression_type, fail_on_data_loss=fail_on_data_loss)
        for chunk in reader:
            for m in self._range_messages(chunk, mq, tags):
                if chunk.low <= m.queue_offset < chunk.high:
                    yield m
