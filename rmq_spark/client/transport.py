"""The transport contract: what a RocketMQ transport (remoting, gRPC) must answer for the client. The per-queue
primitives (``*_call``, ``pull_async``, ``hold_async``, ``send_async``) send one request and return at once with a
call (``Call``) that waits for its answer; the route lookups (``_fetch_route(s)``) and the cluster's administrative
requests answer directly. The policies over these requests (the route cache, the fan-out over queues, offsets,
range reads) live in modules of their own, each taking only the requests it sends, and ``BaseClient`` puts them
together. A request a transport cannot make raises UnsupportedError by default here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from rmq_spark.client.errors import AuthError, RocketMQError, UnsupportedError
from rmq_spark.client.model import (
    DEFAULT_GROUP,
    DEFAULT_PRODUCER_GROUP,
    EVERY_MESSAGE,
    SLOT,
    Boundary,
    FilterExpression,
    HalfMessage,
    MessageQueue,
    OutgoingMessage,
    TopicRoute,
)


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


class Bursts(Protocol):
    """What sends the requests a thread makes inside ``burst()`` together, where it can (``Transport.burst``)."""

    def burst(self) -> AbstractContextManager[None]: ...


class Transport:
    """The requests a transport answers. A subclass implements the primitives that raise NotImplementedError and
    the optional ones it can make."""

    request_timeout: float

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

    def refuses_permission(self, e: AuthError) -> bool:
        """Whether ``e`` is the server refusing this user a permission (not its credentials). This default: no
        transport's refusal is told apart."""
        return False

    def v4_release(self, topic: str) -> str | None:
        """The release of ``topic``'s brokers where they are RocketMQ 4.x ("4.9.7"), which lack 5.x features
        (timer messages among them); None for 5.x brokers."""
        return None
