"""The gRPC client: the client interface of the remoting transport over one apache.rocketmq.v2 endpoint."""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import grpc
import grpc.experimental

from rmq_spark.client import hints
from rmq_spark.client.addresses import host_port
from rmq_spark.client.base import BaseClient
from rmq_spark.client.core_errors import package_error
from rmq_spark.client.defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_REQUEST_TIMEOUT
from rmq_spark.client.errors import ProtocolError, RocketMQError, UnsupportedError
from rmq_spark.client.grpc import messages, status
from rmq_spark.client.grpc.auth import Metadata
from rmq_spark.client.grpc.v2 import definition_pb2 as pb
from rmq_spark.client.grpc.v2 import service_pb2 as svc
from rmq_spark.client.model import (
    DEFAULT_GROUP,
    DEFAULT_PRODUCER_GROUP,
    EVERY_MESSAGE,
    PERM_READ,
    PERM_WRITE,
    SLOT,
    Boundary,
    BrokerData,
    Credentials,
    FilterExpression,
    MessageQueue,
    MessageType,
    OutgoingMessage,
    PullResult,
    QueueData,
    SendResult,
    TopicRoute,
)
from rmq_spark.client.namespaces import NO_NAMESPACE, Namespace
from rmq_spark.client.tls import TlsConfig
from rmq_spark.client.transport import HeldCall
from rmq_spark.compiled import MalformedError, PullStatus, v2_queue_offset

T = TypeVar("T")
SERVICE = "/apache.rocketmq.v2.MessagingService/"
CLIENT_VERSION = "rmq-spark-0.1"
# One PullMessage answer frame holds one message, sent decompressed: at most maxMessageBytes plus its properties.
FRAME_HEADROOM = 1 << 20
_PERMS = {pb.READ: PERM_READ, pb.WRITE: PERM_WRITE, pb.READ_WRITE: PERM_READ | PERM_WRITE}
_FILTER_TYPES = {"TAG": pb.TAG, "SQL92": pb.SQL}
_MESSAGE_TYPES = {v2: kind for kind, v2 in messages.V2_MESSAGE_TYPES.items()}
# The first byte of a PullMessageResponse frame that holds a message (field 2, length-delimited): such frames are
# kept as they are, for the native gatherer; the two others of a pull (status, next offset) are parsed here.
_MESSAGE_FIELD = b"\x12"


def _endpoints(host: str, port: int) -> pb.Endpoints:
    try:
        scheme = pb.IPv6 if ipaddress.ip_address(host).version == 6 else pb.IPv4
    except ValueError:
        scheme = pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


def _queue(mq: MessageQueue) -> pb.MessageQueue:
    return pb.MessageQueue(topic=pb.Resource(name=mq.topic), id=mq.queue_id, broker=pb.Broker(name=mq.broker_name))


def message_type_of(accepts: Iterable[pb.MessageType]) -> MessageType | None:
    """A topic's message.type from the message types its queues accept (a MIXED topic's accept all four); None
    when they name none."""
    kinds = {_MESSAGE_TYPES[t] for t in accepts if t in _MESSAGE_TYPES}
    if not kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else MessageType.MIXED


def route_from_queues(topic: str, endpoint: str, queues: Iterable[pb.MessageQueue]) -> TopicRoute:
    """A TopicRoute from QueryRoute's queues: per broker, the leading run of readable / writable queue ids, and
    the topic's message type from the types they accept."""
    perms: dict[str, dict[int, int]] = {}
    accepts: set[pb.MessageType] = set()
    for q in queues:
        perms.setdefault(q.broker.name, {})[q.id] = _PERMS.get(q.permission, 0)
        accepts.update(q.accept_message_types)

    def leading(ids: dict[int, int], bit: int) -> int:
        n = 0
        while ids.get(n, 0) & bit:
            n += 1
        return n

    brokers = tuple(BrokerData(name, {0: endpoint}) for name in sorted(perms))
    datas = []
    for name in sorted(perms):
        r, w = leading(perms[name], PERM_READ), leading(perms[name], PERM_WRITE)
        datas.append(QueueData(name, r, w, (PERM_READ if r else 0) | (PERM_WRITE if w else 0)))
    return TopicRoute(topic, brokers, tuple(datas), message_type=message_type_of(accepts))


class PendingGrpcPull:
    """A PullMessage call in flight (the call starts when this is made); ``result()`` reads its stream."""

    __slots__ = ("queue", "offset", "max_nums", "_client", "_call")
    replica = False  # the gateway picks the broker group's member

    def __init__(self, client: GrpcClient, queue: MessageQueue, offset: int, max_nums: int, call) -> None:
        self.queue, self.offset, self.max_nums = queue, offset, max_nums
        self._client, self._call = client, call

    def result(self) -> PullResult:
        """The pull's status and next offset, and the frames that hold its messages as they came (the tag
        re-check is the reader's, as for a remoting block)."""
        what = f"pull of {self.queue} at offset {self.offset}"
        endpoint = self._client.endpoint
        code = None
        found: list[bytes] = []
        next_offset = None
        try:
            for frame in self._call:
                if frame[:1] == _MESSAGE_FIELD:
                    found.append(frame)
                    continue
                try:
                    answer = svc.PullMessageResponse.FromString(frame)
                except Exception as e:  # protobuf's DecodeError (its class differs between implementations)
                    raise ProtocolError(
                        f"{what}: {endpoint} sent a PullMessage answer frame that does not parse "
                        f"({e}); {hints.NOT_GRPC}"
                    ) from None
                kind = answer.WhichOneof("content")
                if kind == "status":
                    code = answer.status.code
                    status.check(
                        answer.status, what, endpoint, status.Code.MESSAGE_NOT_FOUND, status.Code.ILLEGAL_OFFSET
                    )
                elif kind == "message":
                    found.append(frame)
                elif kind == "next_offset":
                    next_offset = answer.next_offset
        except grpc.RpcError as e:
            raise self._client.rpc_error(e, what) from None
        if code is None or next_offset is None:
            raise RocketMQError(
                f"{what}: {endpoint} ended the PullMessage stream without "
                f"{'a status' if code is None else 'a next offset'}; {hints.NOT_GRPC}"
            )
        if code == status.Code.MESSAGE_NOT_FOUND:
            # nothing at this offset now (not stored yet, or the server says pull it again): same offset again
            return PullResult(PullStatus.NO_NEW_MSG, next_offset, -1, -1)
        if code == status.Code.ILLEGAL_OFFSET:
            low, high = self._client.min_offset(self.queue), self._client.max_offset(self.queue)
            return PullResult(PullStatus.OFFSET_ILLEGAL, next_offset, low, high)
        # OK: the gateway has checked that the queue's first offset is not past `offset` (else ILLEGAL_OFFSET)
        if not found:
            return PullResult(PullStatus.NO_MATCHED_MSG, next_offset, -1, -1)
        try:
            first = v2_queue_offset(found[0])
        except MalformedError as e:
            raise package_error(e, f"{what}: {endpoint} sent a message frame that does not parse ({e})") from None
        return PullResult(PullStatus.FOUND, next_offset, -1, -1, frames=tuple(found), first_offset=first)

    def cancel(self) -> None:
        self._call.cancel()


class GrpcCall:
    """A unary call in flight; ``result()`` waits for its answer, checks it and parses it."""

    __slots__ = ("_client", "_future", "_what", "_parse")
    replica = False  # the gateway picks the broker group's member

    def __init__(self, client: GrpcClient, future, what: str, parse: Callable[[object], T]) -> None:
        self._client, self._future, self._what, self._parse = client, future, what, parse

    def result(self):
        try:
            answer = self._future.result()
        except grpc.RpcError as e:
            raise self._client.rpc_error(e, self._what) from None
        return self._parse(answer)

    def cancel(self) -> None:
        self._future.cancel()


class GrpcClient(BaseClient):
    """A RocketMQ client over the apache.rocketmq.v2 gRPC API of one endpoint (``host:port``). Thread-safe; the
    channel opens on first use."""

    def __init__(
        self,
        endpoint: str,
        *,
        credentials: Credentials | None = None,
        tls: TlsConfig | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        route_ttl: float = 30.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        namespace: Namespace = NO_NAMESPACE,
    ) -> None:
        """With a ``namespace``, the server puts the calls' topics and groups in it (``x-mq-namespace``) and
        answers them without it."""
        super().__init__(route_ttl=route_ttl, max_message_bytes=max_message_bytes, namespace=namespace)
        self._host, self._port = host_port(endpoint, "endpoint")
        self.endpoint = endpoint.strip()
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self._tls = tls
        self._metadata = Metadata(credentials, CLIENT_VERSION, namespace.name)
        self._channel: grpc.Channel | None = None
        self._credentials: grpc.ChannelCredentials | None = None  # held as long as the channel
        self._methods: dict[str, Callable] = {}
        self._lock = threading.Lock()  # the fan-out's threads make their first calls at once: one channel for all

    def close(self) -> None:
        super().close()
        with self._lock:
            if self._channel is not None:
                self._channel.close()
                self._channel, self._credentials, self._methods = None, None, {}

    def rpc_error(self, e: grpc.RpcError, what: str) -> RocketMQError:
        """The error for a call of this client that failed as a call. When gRPC core could not build a TLS
        handshaker from certificates that OpenSSL accepted (seen intermittently in long-lived processes with
        grpcio 1.85), the channel is dropped, so that the next call, a retry, builds a new one."""
        if status.HANDSHAKER_FAILED in status.details_of(e):
            with self._lock:  # its calls all fail; GC closes it
                self._channel, self._credentials, self._methods = None, None, {}
        return status.rpc_error(e, what, self.endpoint)

    # -- calls -----------------------------------------------------------------------------------------------
    def _open(self) -> grpc.Channel:
        if self._channel is None:
            frame = self.max_message_bytes + FRAME_HEADROOM
            options: list[tuple[str, int | str]] = [
                ("grpc.max_receive_message_length", frame),
                ("grpc.max_send_message_length", frame),
                ("grpc.enable_http_proxy", 0),
                ("grpc.initial_reconnect_backoff_ms", 200),
                ("grpc.max_reconnect_backoff_ms", 2000),
                # gRPC core's lower bound of a connection attempt, i.e. the connect timeout
                ("grpc.min_reconnect_backoff_ms", max(1, int(self.connect_timeout * 1000))),
            ]
            # A pull answers one frame per message. By default gRPC hands each frame from its polling thread to the
            # reader (about 70 us of Python per message); with this option the reading thread polls the call
            # itself: 2.5x the messages per CPU-second. Calls still start (and run) when they are made.
            options.append((grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1))
            target = f"{self._host}:{self._port}" if ":" not in self._host else f"[{self._host}]:{self._port}"
            if self._tls is not None:
                if self._tls.server_name:
                    options.append(("grpc.ssl_target_name_override", self._tls.server_name))
                roots, key, chain = self._tls.grpc_parts()
                self._credentials = grpc.ssl_channel_credentials(
                    root_certificates=roots, private_key=key, certificate_chain=chain
                )
                self._channel = grpc.secure_channel(target, self._credentials, options=options)
            else:
                self._channel = grpc.insecure_channel(target, options=options)
        return self._channel

    def _method(
        self, name: str, response, *, stream: bool = False
    ) -> grpc.UnaryUnaryMultiCallable | grpc.UnaryStreamMultiCallable:
        """The callable of method ``name``; its answers parsed as ``response``, or left as bytes for None."""
        fn = self._methods.get(name)
        if fn is None:
            with self._lock:
                channel = self._open()
                make = channel.unary_stream if stream else channel.unary_unary
                fn = self._methods[name] = make(
                    SERVICE + name,
                    request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=response.FromString if response else None,
                )
        return fn

    def _unary(self, name: str, response, request, what: str, *extra: tuple[str, str]):
        try:
            return self._method(name, response)(request, timeout=self.request_timeout, metadata=self._metadata(*extra))
        except grpc.RpcError as e:
            raise self.rpc_error(e, what) from None

    def _call(
        self, name: str, response, request, what: str, parse: Callable[[object], T], *extra: tuple[str, str]
    ) -> GrpcCall:
        """Start a unary call and return at once."""
        try:
            future = self._method(name, response).future(
                request, timeout=self.request_timeout, metadata=self._metadata(*extra)
            )
        except grpc.RpcError as e:
            raise self.rpc_error(e, what) from None
        return GrpcCall(self, future, what, parse)

    # -- routing ---------------------------------------------------------------------------------------------
    def _fetch_route(self, topic: str) -> TopicRoute:
        what = f"route of topic {topic!r}"
        answer = self._unary(
            "QueryRoute",
            svc.QueryRouteResponse,
            svc.QueryRouteRequest(topic=pb.Resource(name=topic), endpoints=_endpoints(self._host, self._port)),
            what,
        )
        status.check(answer.status, what, self.endpoint)
        return route_from_queues(topic, self.endpoint, answer.message_queues)

    def topics(self) -> list[str]:
        raise UnsupportedError(
            f"the v2 gRPC API of {self.endpoint} has no topic list, so option topicPattern cannot "
            "be used with option endpoint: name the topics (topic, topics), or read through "
            "nameServer"
        )

    # -- per-queue requests (the fan-out is BaseClient's) ----------------------------------------------------
    def _offset_call(
        self, mq: MessageQueue, policy: pb.QueryOffsetPolicy, what: str, timestamp: int | None = None
    ) -> GrpcCall:
        request = svc.QueryOffsetRequest(message_queue=_queue(mq), query_offset_policy=policy)
        if timestamp is not None:
            request.timestamp.FromMilliseconds(int(timestamp))
        what = f"{what} of {mq}"

        def parse(answer) -> int:
            status.check(answer.status, what, self.endpoint)
            return answer.offset

        return self._call("QueryOffset", svc.QueryOffsetResponse, request, what, parse)

    def _min_offset_call(self, mq: MessageQueue) -> GrpcCall:
        return self._offset_call(mq, pb.BEGINNING, "min offset")

    def _max_offset_call(self, mq: MessageQueue) -> GrpcCall:
        return self._offset_call(mq, pb.END, "max offset")

    def _search_offset_call(self, mq: MessageQueue, timestamp: int, boundary: Boundary) -> GrpcCall:
        if boundary is not Boundary.LOWER:
            raise UnsupportedError(
                f"the v2 API of {self.endpoint} searches offsets by time at the lower boundary "
                f"only, not {boundary.value!r}"
            )
        return self._offset_call(mq, pb.TIMESTAMP, "offset by timestamp", timestamp)

    def _consumer_offset_call(self, group: str, mq: MessageQueue) -> GrpcCall:
        what = f"consumer offset of group {group!r} on {mq}"

        def parse(answer) -> int | None:
            if answer.status.code == status.Code.OFFSET_NOT_FOUND:
                return None
            status.check(answer.status, what, self.endpoint)
            return answer.offset

        return self._call(
            "GetOffset",
            svc.GetOffsetResponse,
            svc.GetOffsetRequest(group=pb.Resource(name=group), message_queue=_queue(mq)),
            what,
            parse,
        )

    def _store_offset_call(self, group: str, mq: MessageQueue, offset: int) -> GrpcCall:
        what = f"update of group {group!r} offset on {mq}"

        def parse(answer) -> bool:
            if answer.status.code == status.Code.CONSUMER_GROUP_NOT_FOUND:
                return False
            status.check(answer.status, what, self.endpoint)
            return True

        return self._call(
            "UpdateOffset",
            svc.UpdateOffsetResponse,
            svc.UpdateOffsetRequest(group=pb.Resource(name=group), message_queue=_queue(mq), offset=offset),
            what,
            parse,
        )

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
    ) -> PendingGrpcPull:
        """Start a PullMessage call and return at once; with ``suspend_ms`` > 0 the server may hold it until
        messages arrive (long polling)."""
        request = svc.PullMessageRequest(
            group=pb.Resource(name=group),
            message_queue=_queue(mq),
            offset=offset,
            batch_size=max_nums,
            filter_expression=pb.FilterExpression(
                type=_FILTER_TYPES[expression.type], expression=expression.expression
            ),
        )
        request.long_polling_timeout.FromMilliseconds(max(0, suspend_ms))
        fn = self._method("PullMessage", None, stream=True)  # frames as bytes: PendingGrpcPull reads them
        try:
            call = fn(request, timeout=self.request_timeout + suspend_ms / 1000.0, metadata=self._metadata())
        except grpc.RpcError as e:
            raise self.rpc_error(e, f"pull of {mq} at offset {offset}") from None
        return PendingGrpcPull(self, mq, offset, max_nums, call)

    def hold_async(self, mq: MessageQueue, offset: int, *, group: str, hold_ms: int) -> HeldCall:
        """Not over gRPC: a PullMessage stream that carries a message ends only once its reader has read it, so
        its end cannot ring a bell; the stream driver asks such queues on its clock instead."""
        raise UnsupportedError("held pulls are not offered over gRPC")

    # -- produce ---------------------------------------------------------------------------------------------
    def send_async(
        self,
        mq: MessageQueue,
        batch: Sequence[OutgoingMessage],
        *,
        group: str = DEFAULT_PRODUCER_GROUP,
        sys_flag: int = 0,
    ) -> GrpcCall:
        """Send messages that carry their UNIQ_KEY to one queue (the broker is named in the ``x-mq-broker-name``
        metadata). Bodies go as they are (``wire_message`` leaves them so): no sysFlag travels over the v2 API."""
        if sys_flag:
            raise UnsupportedError(f"the v2 gRPC API of {self.endpoint} carries no sysFlag ({sys_flag:#x})")
        what = f"send to {mq}"

        def parse(answer) -> SendResult:
            status.check(answer.status, what, self.endpoint)
            for entry in answer.entries:
                status.check(entry.status, what, self.endpoint)
            offset = answer.entries[0].offset if answer.entries else -1
            return SendResult(msg_id=",".join(m.unique_id or "" for m in batch), queue=mq, queue_offset=offset)

        return self._call(
            "SendMessage",
            svc.SendMessageResponse,
            svc.SendMessageRequest(messages=messages.to_v2(mq.topic, mq.queue_id, list(batch))),
            what,
            parse,
            ("x-mq-broker-name", mq.broker_name),
        )

    def create_topic(self, topic: str, queues: int = 4, **_: object) -> None:
        raise UnsupportedError(
            f"the v2 gRPC API of {self.endpoint} cannot create topics: create {topic!r} with "
            "mqadmin updateTopic, or through a client with nameServer"
        )
