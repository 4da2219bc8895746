"""The remoting-protocol client: routes, offsets, pulls, consumer offsets and sends over name server and brokers."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Generic, NoReturn, TypeVar

from rmq_spark.client.addresses import address_list
from rmq_spark.client.base import BaseClient
from rmq_spark.client.core_errors import package_error
from rmq_spark.client.defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_REQUEST_TIMEOUT
from rmq_spark.client.errors import (
    AuthError,
    BrokerBusyError,
    BrokerError,
    BrokerUnavailableError,
    ConnectionLostError,
    RocketMQError,
    TopicNotFoundError,
    with_note,
)
from rmq_spark.client.holds import Holds
from rmq_spark.client.model import (
    DEFAULT_GROUP,
    DEFAULT_PRODUCER_GROUP,
    EVERY_MESSAGE,
    MASTER_ID,
    SLOT,
    Boundary,
    BrokerData,
    Credentials,
    FilterExpression,
    HalfMessage,
    MessageQueue,
    MessageType,
    OutgoingMessage,
    PullResult,
    TopicRoute,
)
from rmq_spark.client.namespaces import NO_NAMESPACE, Namespace
from rmq_spark.client.range_reader import PullSession
from rmq_spark.client.remoting import acl, codes
from rmq_spark.client.remoting import broker as req
from rmq_spark.client.remoting.connection import (
    ConnectionPool,
    DirectConnection,
    DirectPending,
    PendingRequest,
    burst,
    next_opaque,
    pipe_failure,
)
from rmq_spark.client.remoting.frame import RemotingCommand, command_of, encode_command, request_template
from rmq_spark.client.remoting.namesrv import NameServerClient
from rmq_spark.client.remoting.native_holds import NativeHolds
from rmq_spark.client.remoting.send_codec import compressed_for_send
from rmq_spark.client.remoting.versions import is_v4, release_name
from rmq_spark.client.system_topics import cluster_topics
from rmq_spark.client.tls import TlsConfig
from rmq_spark.compiled import (
    BlockGatherer,
    Frame,
    MalformedError,
    PipeLostError,
    PipeTimeoutError,
    PullStatus,
    RangeCursor,
    Step,
    UnreadableError,
)

T = TypeVar("T")
W = TypeVar("W", str, MessageQueue)
# what a call waits on: a pooled connection's request, or a direct one's
P = TypeVar("P", PendingRequest, DirectPending)

COMPACTION = ("cleanup.policy", "COMPACTION")
MESSAGE_TYPE = "message.type"
_PULL_VARY = ("queueOffset", "maxMsgNums")


class RemotingCall(Generic[P]):
    """A request in flight to one broker; ``result()`` waits for the response and parses it. A broken connection,
    or a broker that no longer leads the logic queue asked for, makes the client look the topic's route up again
    before the next request."""

    __slots__ = ("_client", "_topic", "_pending", "_parse", "_address", "replica")

    def __init__(
        self,
        client: RemotingClient,
        topic: str,
        pending: P,
        parse: Callable[[RemotingCommand, str], T],
        address: str,
        replica: bool,
    ) -> None:
        self._client, self._topic, self._parse, self._address = client, topic, parse, address
        self._pending: P = pending
        self.replica = replica

    def result(self):
        try:
            return self._parse(self._pending.result(), self._address)
        except RocketMQError as e:
            if isinstance(e, ConnectionLostError):
                self._client.reroute(self._topic, e)
            self._client.raise_routed(e, self._address)

    def cancel(self) -> None:
        self._pending.cancel()

    @property
    def ended_at(self: RemotingCall[PendingRequest]) -> float:
        """Once it ended: the earliest time its answer may have come."""
        return self._pending.ended_at

    def add_done_callback(self: RemotingCall[PendingRequest], fn: Callable[[], None]) -> None:
        """``fn()`` once the answer is in (or the request failed), on the thread that completed it."""
        self._pending.add_done_callback(fn)


class DirectSends:
    """A task's half messages (framed by the native core, ``sink.native_sends``) and a commit's END_TRANSACTIONs,
    each sent to the master of its queue over direct connections of the caller's own (one per broker): a burst's
    frames in one write per connection, the answers read on the caller's thread, no reader thread in between.
    Unsigned and plain TCP only; one thread uses it; ``close`` gives the connections back."""

    def __init__(self, client: RemotingClient) -> None:
        self._client = client
        self._conns: dict[str, DirectConnection] = {}

    def send_half(self, mq: MessageQueue, frame: bytes, opaque: int, msg_id: str) -> RemotingCall[DirectPending]:
        """Send the SEND_MESSAGE_V2 ``frame`` (request ``opaque``) of the half message ``msg_id`` for ``mq``; the
        call answers its HalfMessage. A frame sent again (after a transient failure) keeps its opaque: its first
        request is answered or its connection closed by then."""
        return self._send(mq, frame, opaque, codes.SEND_MESSAGE_V2, lambda r, a: req.half_result(r, mq, a, msg_id))

    def end_transaction(self, half: HalfMessage, *, commit: bool, group: str) -> RemotingCall[DirectPending]:
        """As ``RemotingClient.end_transaction_async``."""
        wire_group, wire_queue = self._client._wire(group, half.queue)
        cmd = req.end_transaction_request(wire_group, replace(half, queue=wire_queue), commit)
        cmd.opaque = next_opaque()
        return self._send(
            half.queue,
            encode_command(cmd),
            cmd.opaque,
            codes.END_TRANSACTION,
            lambda r, a: req.end_transaction_result(r, half, commit, a),
        )

    def _send(
        self, mq: MessageQueue, frame: bytes, opaque: int, code: int, parse: Callable[[RemotingCommand, str], T]
    ) -> RemotingCall[DirectPending]:
        client = self._client
        address = client.master_address(mq)
        conn = self._conns.get(address)
        # a connection the broker closed between two rounds (a restart) must not take a request: one written onto
        # it fails as sent, and a commit that may have been sent is never sent again
        if conn is None or not conn.open_when_idle():
            try:
                conn = self._conns[address] = client._pool.dial(address)
            except ConnectionLostError as e:
                client.invalidate_route(mq.topic)
                client.raise_routed(e, address)
        pending = conn.send_frame(frame, opaque, code, client.request_timeout)
        return RemotingCall(client, mq.topic, pending, parse, address, replica=False)

    def close(self) -> None:
        for conn in self._conns.values():
            self._client._pool.release(conn)
        self._conns.clear()


class DirectPulls:
    """The pulls of one range read over direct connections of its own (one per member of the queue's broker group
    it reads from). Unsigned, the core's native loop sends them from a template rendered once (each pull sets its
    offset and count) and reads the answers with the GIL released (``run``); signed requests (ACL: the signature
    covers every field) are built whole and sent one by one (``pull_async``). The member is chosen as for any read,
    again whenever its connection closed or the broker suggested another member."""

    def __init__(self, client: RemotingClient, mq: MessageQueue, *, group: str, expression: FilterExpression) -> None:
        self._client, self._mq = client, mq
        self._wire = client.namespace.queue(mq)
        self._group, self._expression = client.namespace.wrap(group), expression
        self._conns: dict[str, DirectConnection] = {}
        self._conn: DirectConnection | None = None
        self._replica = False
        self._suggested = MASTER_ID
        # a logic queue's answers need their offsetDelta applied, which the native loop does not know
        self.native = not client._pool.signs and not mq.logic
        self._template = request_template(self._pull_request(0, 0), _PULL_VARY)

    def _pull_request(self, offset: int, max_nums: int) -> RemotingCommand:
        return req.pull_request(self._wire, self._group, offset, max_nums, expression=self._expression)

    def _connection(self) -> DirectConnection:
        """The connection to the member reads of the queue go to now: chosen again when it closed, the broker
        suggested another member, or the route changed (a master back while a slave was read)."""
        client, mq = self._client, self._mq
        try:
            address, replica = client._read_address(mq)
            if self._conn is None or self._conn.closed or self._conn.address != address:
                conn = self._conns.get(address)
                if conn is None or conn.closed:
                    conn = self._conns[address] = client._pool.dial(address)
                self._conn, self._replica = conn, replica
        except ConnectionLostError:
            client.invalidate_route(mq.topic)
            raise
        self._suggested = client._suggested.get(mq, MASTER_ID)
        return self._conn

    def run(self, cursor: RangeCursor, gatherer: BlockGatherer | None, rows: int, nbytes: int) -> Step:
        """The core's pull loop for ``cursor`` (``RangeCursor.run``) over the member's connection; a failed
        connection raises its error (a ConnectionLostError makes the client look the route up again)."""
        conn = self._connection()
        try:
            return cursor.run(
                conn.pipe, self._template, gatherer, rows, nbytes, self._client.request_timeout, self._suggested
            )
        except UnreadableError as e:  # an answer whose records do not read
            raise package_error(e) from None
        except (PipeLostError, PipeTimeoutError, MalformedError) as e:
            error = pipe_failure(e, conn.address, codes.PULL_MESSAGE)
        if isinstance(error, ConnectionLostError):
            self._client.invalidate_route(self._mq.topic)
        raise error

    def forget(self, tags: list[int]) -> None:
        """Drop the answers of the pulls ``tags`` when they come."""
        if self._conn is not None:
            for tag in tags:
                self._conn.pipe.forget(tag)

    def suggest(self, broker_id: int) -> None:
        """The broker suggests member ``broker_id`` for the queue's next pulls."""
        self._client._suggested[self._mq] = broker_id

    def answer(self, offset: int, frame: Frame) -> PullResult:
        """The PullResult of a response to the pull at ``offset`` that the core left to Python (``Step.Answer``):
        raises the error an error code maps to."""
        assert self._conn is not None, "an answer comes only over the connection run() chose"
        return self._client._pull_parse(self._mq, offset)(command_of(frame), self._conn.address)

    def pull_async(self, offset: int, max_nums: int) -> RemotingCall[DirectPending]:
        client, mq = self._client, self._mq
        conn = self._connection()
        try:
            pending = conn.send(self._pull_request(offset, max_nums), client.request_timeout)
        except ConnectionLostError:
            client.invalidate_route(mq.topic)
            raise
        return RemotingCall(client, mq.topic, pending, client._pull_parse(mq, offset), conn.address, self._replica)

    def close(self) -> None:
        """Give the connections back to the client's pool (kept for the next read when nothing is in flight)."""
        for conn in self._conns.values():
            self._client._pool.release(conn)


class RemotingClient(BaseClient):
    """A RocketMQ client over the native remoting protocol (name server and brokers). Thread-safe.

    Reads (pulls, offset queries) go to the member of a broker group the broker last suggested for the queue,
    else the master, else a slave (as RocketMQ's PullAPIWrapper picks), skipping members that just failed to
    connect; consumer offsets and sends go to the master only."""

    def __init__(
        self,
        name_server: str | list[str],
        *,
        credentials: Credentials | None = None,
        tls: TlsConfig | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        route_ttl: float = 30.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        namespace: Namespace = NO_NAMESPACE,
    ) -> None:
        super().__init__(route_ttl=route_ttl, max_message_bytes=max_message_bytes, namespace=namespace)
        addresses = address_list(name_server) if isinstance(name_server, str) else list(name_server)
        self.request_timeout = request_timeout
        self._pool = ConnectionPool(
            connect_timeout=connect_timeout,
            tls=tls.ssl_context() if tls else None,
            server_name=tls.server_name if tls else None,
            signer=functools.partial(acl.sign, credentials) if credentials else None,
        )
        self._namesrv = NameServerClient(self._pool, addresses, timeout=request_timeout)
        self._name_servers = addresses
        # the broker id each queue's broker last suggested for its next pull (PullAPIWrapper.pullFromWhichNodeTable)
        self._suggested: dict[MessageQueue, int] = {}
        # topic -> (when asked, known attributes): planning's checks of a new topic share one GET_TOPIC_CONFIG
        self._attributes: dict[str, tuple[float, dict[str, str]]] = {}

    def close(self) -> None:
        """Close every connection."""
        super().close()
        self._pool.close()

    def burst(self) -> AbstractContextManager[None]:
        """One write per connection for the requests sent inside (``connection.burst``)."""
        return burst()

    # -- routing ---------------------------------------------------------------------------------------------
    def _fetch_route(self, topic: str) -> TopicRoute:
        route = self._namesrv.route(self.namespace.wrap(topic))
        return replace(route, topic=topic) if self.namespace else route

    def _fetch_routes(self, topics: Sequence[str]) -> list[TopicRoute | RocketMQError]:
        """All in one write to the name server (``NameServerClient.routes``)."""
        routes = self._namesrv.routes([self.namespace.wrap(topic) for topic in topics])
        if not self.namespace:
            return routes
        return [replace(r, topic=t) if isinstance(r, TopicRoute) else r for t, r in zip(topics, routes, strict=True)]

    def topics(self) -> list[str]:
        """Every topic of the client's namespace (every topic, without one) known to the name server."""
        ns = self.namespace
        return sorted(ns.unwrap(t) for t in self._namesrv.topics() if ns.owns(t))

    def live_brokers(self) -> set[str]:
        return self._namesrv.live_brokers()

    def put_name_server_value(self, namespace: str, key: str, value: str) -> list[str]:
        return self._namesrv.put_value(namespace, key, value)

    def name_server_values(self, namespace: str, key: str) -> dict[str, str | None]:
        return self._namesrv.values(namespace, key)

    def cluster_topics(self) -> set[str]:
        """See BaseClient; none in a namespace (the topic list shows only the namespace's topics)."""
        return set() if self.namespace else cluster_topics(self._namesrv.clusters())

    def _members(self, mq: MessageQueue) -> BrokerData:
        """The addresses of ``mq``'s broker group; BrokerUnavailableError when the route has none now."""
        for again in (False, True):
            try:
                route = self.recheck_route(mq.topic) if again else self.route(mq.topic)
                broker = route.broker_of(mq)
            except TopicNotFoundError:
                if self.cached_route(mq.topic) is None:
                    raise
                # the topic had a route: its brokers are all down or restarting (or it was deleted; the driver
                # tells those apart)
                broker = None
            if broker is not None and broker.addresses:
                return broker
        raise BrokerUnavailableError(
            f"broker {mq.broker_name!r} is not in the route of topic {mq.topic!r} now: it "
            "is stopped, restarting or unreachable from the name servers"
        )

    def refuses_permission(self, e: AuthError) -> bool:
        """See BaseClient: the broker's NO_PERMISSION (ACL 2.0's answer to a user without the policy)."""
        return e.code == codes.NO_PERMISSION

    def routed(self, e: RocketMQError, address: str) -> RocketMQError:
        """``e``, raised at broker ``address``, telling where that address came from when the user did not give
        it: behind RocketMQ 5's proxy the routes name the address the proxy advertises, not the one in option
        nameServer."""
        if address in self._name_servers:
            return e
        given = ", ".join(self._name_servers)
        return with_note(
            e,
            f"{address} is the broker address that name server {given} (option nameServer) routed to; behind "
            "RocketMQ 5's proxy it is the address the proxy advertises (its remotingAccessAddr, by default its "
            "host's own IP), which must be reachable from Spark: set remotingAccessAddr in the proxy's "
            "rmq-proxy.json to an address Spark reaches",
        )

    def raise_routed(self, e: RocketMQError, address: str) -> NoReturn:
        """Raise ``e`` (being handled), with ``routed``'s note where it has one."""
        noted = self.routed(e, address)
        if noted is e:
            raise e
        raise noted from e

    def broker_address(self, topic: str, broker_name: str) -> str:
        """The master address of ``broker_name`` for ``topic``."""
        return self.master_address(MessageQueue(topic, broker_name, 0))

    # -- request plumbing ------------------------------------------------------------------------------------
    def _wire(self, group: str, where: W) -> tuple[str, W]:
        """A group and a queue (or a topic) as the brokers know them: in the client's namespace."""
        ns = self.namespace
        if isinstance(where, str):
            return ns.wrap(group), ns.wrap(where)
        return ns.wrap(group), ns.queue(where)

    def _read_address(self, mq: MessageQueue) -> tuple[str, bool]:
        """Where a read of ``mq`` goes (the member the broker last suggested, else the master, else a slave,
        skipping members that just failed to connect), and whether that is a slave. While the route has no master,
        it is looked up again every ROUTE_RETRY_S, so that reads go back to the master as soon as it is back."""
        members = self._members(mq)
        if members.master_address is None:
            self.invalidate_route(mq.topic)
            members = self._members(mq)
        candidates = members.read_candidates(self._suggested.get(mq, MASTER_ID))
        address = candidates[0]
        if len(candidates) > 1:
            address = next((a for a in candidates if not self._pool.recently_failed(a)), address)
        return address, address != members.master_address

    def master_address(self, mq: MessageQueue) -> str:
        """The address of the master of ``mq``'s broker group; BrokerUnavailableError while the route has none."""
        address = self._members(mq).master_address
        if address is None:
            raise BrokerUnavailableError(
                f"broker {mq.broker_name!r} has no master in the route of topic {mq.topic!r} now (a slave serves "
                "reads only)"
            )
        return address

    def reroute(self, topic: str, e: ConnectionLostError) -> None:
        """Look ``topic``'s route up again after a request failed with ``e``: now when the broker said it does not
        lead the queue asked for, else at the next request."""
        if e.code == codes.NOT_LEADER_FOR_QUEUE:
            self.route(topic, refresh=True)
        else:
            self.invalidate_route(topic)

    def _request(
        self,
        mq: MessageQueue,
        cmd: RemotingCommand,
        parse: Callable[[RemotingCommand, str], T],
        *,
        master: bool = False,
        timeout: float | None = None,
    ) -> RemotingCall:
        """Send ``cmd`` to a member of ``mq``'s broker group (the master with ``master``) on the shared connection
        to it and return at once."""
        if master:
            address, replica = self.master_address(mq), False
        else:
            address, replica = self._read_address(mq)
        try:
            pending = self._pool.send(address, cmd, self.request_timeout if timeout is None else timeout)
        except ConnectionLostError as e:
            self.invalidate_route(mq.topic)
            self.raise_routed(e, address)
        return RemotingCall(self, mq.topic, pending, parse, address, replica)

    # -- per-queue requests (the fan-out is BaseClient's) ----------------------------------------------------
    def _min_offset_call(self, mq: MessageQueue) -> RemotingCall:
        return self._request(
            mq,
            req.offset_request(codes.GET_MIN_OFFSET, self.namespace.queue(mq)),
            lambda r, a: req.header_long(r, "offset", f"min offset of {mq}", a),
        )

    def _max_offset_call(self, mq: MessageQueue) -> RemotingCall:
        return self._request(
            mq,
            req.offset_request(codes.GET_MAX_OFFSET, self.namespace.queue(mq), committed="true"),
            lambda r, a: req.header_long(r, "offset", f"max offset of {mq}", a),
        )

    def _search_offset_call(self, mq: MessageQueue, timestamp: int, boundary: Boundary) -> RemotingCall:
        return self._request(
            mq,
            req.offset_request(
                codes.SEARCH_OFFSET_BY_TIMESTAMP,
                self.namespace.queue(mq),
                timestamp=str(timestamp),
                boundaryType=boundary.name,
            ),
            lambda r, a: req.searched_offset(r, f"offset by timestamp of {mq}", a, logic=mq.logic),
        )

    def _consumer_offset_call(self, group: str, mq: MessageQueue) -> RemotingCall:
        return self._request(
            mq,
            req.query_consumer_offset_request(*self._wire(group, mq)),
            lambda r, a: req.consumer_offset(r, f"consumer offset of group {group!r} on {mq}", a),
        )

    def _store_offset_call(self, group: str, mq: MessageQueue, offset: int) -> RemotingCall:
        def parse(r: RemotingCommand, a: str) -> bool:
            if r.code == codes.SUBSCRIPTION_GROUP_NOT_EXIST:
                return False
            req.check(r, f"update of group {group!r} offset on {mq}", a)
            return True

        return self._request(mq, req.update_consumer_offset_request(*self._wire(group, mq), offset), parse, master=True)

    def _create_group(self, group: str, mq: MessageQueue, offset: int) -> None:
        # the pull goes to the master, where the offset update will go
        wire_group, wire_queue = self._wire(group, mq)
        self._request(
            mq,
            req.pull_request(wire_queue, wire_group, offset, 1),
            lambda r, a: req.pull_result(r, mq, a, offset, messages=False),
            master=True,
        ).result()

    def earliest_store_time(self, mq: MessageQueue) -> int:
        """Store time (ms) of the queue's oldest message."""
        return self._request(
            mq,
            req.offset_request(codes.GET_EARLIEST_MSG_STORETIME, self.namespace.queue(mq)),
            lambda r, a: req.header_long(r, "timestamp", f"earliest store time of {mq}", a),
        ).result()

    # -- topic and group facts -------------------------------------------------------------------------------
    def topic_attributes(self, topic: str) -> dict[str, str]:
        """The topic's attributes (RocketMQ 5), asked of one of its brokers; empty where it has none."""
        route = self.route(topic)
        queues = route.read_queues() or route.write_queues()
        if not queues:
            return {}
        return self._request(
            queues[0],
            req.topic_config_request(self.namespace.wrap(topic)),
            lambda r, a: req.topic_attributes(r, topic, a),
        ).result()

    def _known_attributes(self, topic: str) -> dict[str, str]:
        """``topic_attributes``, empty where the broker has no topic attributes (RocketMQ 4 has no
        GET_TOPIC_CONFIG) or does not let this user read them; kept as long as a route is."""
        cached = self._attributes.get(topic)
        if cached is not None and time.monotonic() - cached[0] < self._route_cache.ttl:
            return cached[1]
        try:
            known = self.topic_attributes(topic)
        except (AuthError, BrokerError) as e:
            if not (isinstance(e, AuthError) or e.code == codes.REQUEST_CODE_NOT_SUPPORTED):
                raise
            known = {}
        self._attributes[topic] = (time.monotonic(), known)
        return known

    def v4_release(self, topic: str) -> str | None:
        """The release of ``topic``'s brokers where they are RocketMQ 4.x ("4.9.7"), told by one master's answer."""
        route = self.route(topic)
        queues = route.write_queues() or route.read_queues()
        if not queues:
            return None
        cmd = req.offset_request(codes.GET_MAX_OFFSET, self.namespace.queue(queues[0]))
        return self._request(
            queues[0], cmd, lambda r, a: release_name(r.version) if is_v4(r) else None, master=True
        ).result()

    def remapping_gaps(self, mqs: Iterable[MessageQueue]) -> dict[MessageQueue, list[tuple[int, int]]]:
        """See BaseClient. The mapping items come from each leading broker group (GET_TOPIC_CONFIG with the
        mapping); an item that a remapping closed ends where its broker's queue ends (asked of it by physical queue,
        ``lo=false``) until the broker writes its end into the item."""
        leaders: dict[tuple[str, str | None], list[MessageQueue]] = {}
        for mq in mqs:
            if mq.logic:
                leaders.setdefault((mq.topic, self.route(mq.topic).serving_broker(mq)), []).append(mq)
        out = {}
        for (topic, _), queues in leaders.items():

            def answer(r: RemotingCommand, a: str, t: str = topic) -> dict[int, list[req.MappingItem]]:
                return req.mapping_items(r, t, a)

            items = self._request(
                queues[0], req.topic_config_request(self.namespace.wrap(topic), mapping=True), answer
            ).result()
            for mq in queues:
                gaps = self._gaps_between(topic, items.get(mq.queue_id, []))
                if gaps:
                    out[mq] = gaps
        return out

    def _gaps_between(self, topic: str, items: list[req.MappingItem]) -> list[tuple[int, int]]:
        """The logic offsets between consecutive mapping items of one logic queue that no message has."""
        gaps = []
        for item, after in zip(items, items[1:], strict=False):
            end = item.end_offset
            if end < item.start_offset:
                stored = MessageQueue(topic, item.broker_name, item.queue_id)
                cmd = req.offset_request(codes.GET_MAX_OFFSET, self.namespace.queue(stored), lo="false")
                what = f"end of queue {item.queue_id} of broker group {item.broker_name}"
                end = self._request(stored, cmd, functools.partial(_header_offset, what=what)).result()
            last = item.logic_offset + end - item.start_offset
            if last < after.logic_offset:
                gaps.append((last, after.logic_offset))
        return gaps

    def is_compacted(self, topic: str) -> bool:
        """True when ``topic`` has the cleanup policy COMPACTION (never on a broker without topic attributes)."""
        return self._known_attributes(topic).get(COMPACTION[0], "").upper() == COMPACTION[1]

    def topic_message_type(self, topic: str) -> MessageType | None:
        """The topic's attribute message.type; None where it has none, or the broker has no topic attributes
        (RocketMQ 4) or does not let this user read them."""
        value = self._known_attributes(topic).get(MESSAGE_TYPE)
        try:
            return MessageType(value.upper()) if value else None
        except ValueError:
            return None  # UNSPECIFIED, or a type newer than this client: nothing to check against

    def check_filter(self, mq: MessageQueue, group: str, expression: FilterExpression) -> None:
        """InvalidFilterError when the broker of ``mq`` cannot filter by the expression (CHECK_CLIENT_CONFIG, as the
        Java consumer checks its subscriptions): a broker handed a SQL92 filter it cannot compile in a pull drops
        the filter and answers every message."""
        self._request(
            mq,
            req.check_client_config_request(*self._wire(group, mq.topic), expression),
            lambda r, a: req.check_client_config(r, expression, a),
        ).result()

    def online_consumers(self, group: str, topics: Iterable[str]) -> list[str]:
        """The client ids of ``group``'s consumers connected to the masters of ``topics``' brokers now."""
        masters = {}
        for topic in topics:
            for b in self.route(topic).brokers:
                if b.master_address:
                    masters[b.broker_name] = MessageQueue(topic, b.broker_name, 0)
        wire = self.namespace.wrap(group)
        calls = [
            self._request(mq, req.consumer_list_request(wire), lambda r, a: req.consumer_list(r, group, a), master=True)
            for mq in masters.values()
        ]
        return sorted({cid for c in calls for cid in c.result()})

    def serves_reads(self, mq: MessageQueue, offset: int, group: str) -> bool:
        """Whether the member reads of ``mq`` go to now serves pulls. A master does; a slave with
        slaveReadEnable=false (RocketMQ's default) refuses every pull: SYSTEM_BUSY (5.x) or PULL_RETRY_IMMEDIATELY
        pointing at the master (4.x). Asked with one pull at ``offset``, the queue's end (no message comes back)."""
        if not self._read_address(mq)[1]:
            return True
        try:
            wire_group, wire_queue = self._wire(group, mq)
            result = self._request(
                mq, req.pull_request(wire_queue, wire_group, offset, 1), lambda r, a: req.pull_result(r, mq, a, offset)
            ).result()
        except BrokerBusyError:
            return False
        return not (result.status is PullStatus.RETRY_IMMEDIATELY and result.suggest_which_broker_id == MASTER_ID)

    # -- pull ------------------------------------------------------------------------------------------------
    def pull_async(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = SLOT,
        *,
        group: str = DEFAULT_GROUP,
        expression: FilterExpression = EVERY_MESSAGE,
        suspend_ms: int = 0,
    ) -> RemotingCall:
        """Send a pull and return at once. With ``suspend_ms`` > 0 the broker holds it until messages arrive or the
        suspension ends (long polling); the request timeout is extended past it."""
        wire_group, wire_queue = self._wire(group, mq)
        cmd = req.pull_request(wire_queue, wire_group, offset, max_nums, expression=expression, suspend_ms=suspend_ms)
        return self._request(mq, cmd, self._pull_parse(mq, offset), timeout=self.request_timeout + suspend_ms / 1000.0)

    def hold_async(self, mq: MessageQueue, offset: int, *, group: str, hold_ms: int) -> RemotingCall:
        """A pull at ``offset`` (the queue's end) that the master holds until a message arrives or ``hold_ms``
        pass (a slave, one acting as master included, is never asked: it learns of messages late, and a queue whose
        master is away is polled). The broker looks at its held pulls every HOLD_CHECK_S (``broker``), so the
        answer may come that much after the hold."""
        wire_group, wire_queue = self._wire(group, mq)
        cmd = req.pull_request(wire_queue, wire_group, offset, 1, suspend_ms=hold_ms)
        return self._request(
            mq,
            cmd,
            lambda r, a: req.pull_result(r, mq, a, offset, messages=False),
            master=True,
            timeout=req.hold_timeout(self.request_timeout, hold_ms),
        )

    def holds(self, group: str, hold_ms: int) -> Holds:
        """Over plain TCP, unsigned: in the compiled core's hold lines (``NativeHolds``); else over ``hold_async``
        on the shared connections (a reader thread each)."""
        if self._pool.direct and not self._pool.signs:
            return NativeHolds(self, group, hold_ms)
        return super().holds(group, hold_ms)

    def _pull_parse(self, mq: MessageQueue, offset: int) -> Callable[[RemotingCommand, str], PullResult]:
        """The parse of the answer to a pull of ``mq`` at ``offset``; it notes the member the broker suggests
        for the next pull."""

        def parse(r: RemotingCommand, a: str) -> PullResult:
            result = req.pull_result(r, mq, a, offset)
            self._suggested[mq] = result.suggest_which_broker_id
            return result

        return parse

    def pull_session(
        self, mq: MessageQueue, *, group: str = DEFAULT_GROUP, expression: FilterExpression = EVERY_MESSAGE
    ) -> DirectPulls | PullSession:
        """Direct connections of the reader's own over plain TCP; the shared ones with TLS (the compiled core
        speaks plain TCP only)."""
        if self._pool.direct:
            return DirectPulls(self, mq, group=group, expression=expression)
        return super().pull_session(mq, group=group, expression=expression)

    # -- admin and produce (tests, benchmarks, the later sink) ----------------------------------------------
    def create_topic(
        self, topic: str, queues: int = 4, *, broker_names: Iterable[str] | None = None, seed_topic: str = "TBW102"
    ) -> None:
        """Create or update ``topic`` with ``queues`` read/write queues on the masters of the cluster (found
        through ``seed_topic``'s route, or the given brokers)."""
        route = self.route(seed_topic, refresh=True)
        names = set(broker_names) if broker_names is not None else {b.broker_name for b in route.brokers}
        for b in route.brokers:
            if b.broker_name in names and b.master_address:
                r = self._pool.request(
                    b.master_address,
                    req.create_topic_request(self.namespace.wrap(topic), queues, queues),
                    self.request_timeout,
                )
                req.check(r, f"create topic {topic!r}", b.master_address)

    def wire_message(self, message: OutgoingMessage) -> tuple[OutgoingMessage, int]:
        """Large bodies zlib-compressed and flagged, as the Java producer sends them."""
        return compressed_for_send(message)

    def send_async(
        self,
        mq: MessageQueue,
        messages: Sequence[OutgoingMessage],
        *,
        group: str = DEFAULT_PRODUCER_GROUP,
        sys_flag: int = 0,
    ) -> RemotingCall:
        batch = list(messages)
        return self._request(
            mq,
            req.send_request(*self._wire(group, mq), batch, sys_flag=sys_flag),
            lambda r, a: req.send_result(r, mq, a, batch),
            master=True,
        )

    def send_encoded_async(
        self, mq: MessageQueue, body: bytes, *, group: str = DEFAULT_PRODUCER_GROUP, sys_flag: int = 0
    ) -> RemotingCall:
        """Send a SEND_BATCH_MESSAGE body already encoded (each message carrying its UNIQ_KEY) to ``mq``; the call
        answers a SendResult without the messages' ids."""
        return self._request(
            mq,
            req.encoded_send_request(*self._wire(group, mq), body, sys_flag=sys_flag),
            lambda r, a: req.send_result(r, mq, a, []),
            master=True,
        )

    def direct_sends(self) -> DirectSends | None:
        """Direct connections for half messages the native core frames; None where requests are signed or go
        over TLS (the core's frames are unsigned, its connections plain TCP)."""
        return DirectSends(self) if self._pool.direct and not self._pool.signs else None

    def send_half_async(
        self, mq: MessageQueue, message: OutgoingMessage, *, group: str = DEFAULT_PRODUCER_GROUP, sys_flag: int = 0
    ) -> RemotingCall:
        return self._request(
            mq,
            req.half_request(*self._wire(group, mq), message, sys_flag=sys_flag),
            lambda r, a: req.half_result(r, mq, a, message.unique_id or ""),
            master=True,
        )

    def end_transaction_async(
        self, half: HalfMessage, *, commit: bool, group: str = DEFAULT_PRODUCER_GROUP
    ) -> RemotingCall:
        wire_group, wire_queue = self._wire(group, half.queue)
        return self._request(
            half.queue,
            req.end_transaction_request(wire_group, replace(half, queue=wire_queue), commit),
            lambda r, a: req.end_transaction_result(r, half, commit, a),
            master=True,
        )


def _header_offset(response: RemotingCommand, address: str, *, what: str) -> int:
    """The ``offset`` header of a GET_MAX_OFFSET answer about ``what``."""
    return req.header_long(response, "offset", what, address)
