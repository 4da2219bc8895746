"""A RocketMQ pull client in plain Python: routes, offsets, exact range reads, consumer offsets, sends.

The two clients and the core's PullStatus load on first use (``GrpcClient`` imports grpcio, both the native
core), so that the client's values and errors, and the options built from them, import without either."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from rmq_spark.client.errors import (
    AuthError,
    BrokerBusyError,
    BrokerError,
    BrokerUnavailableError,
    ConnectionLostError,
    DataLossError,
    InvalidFilterError,
    MessageTooLargeError,
    OffsetMovedError,
    ProtocolError,
    RequestTimeoutError,
    RocketMQError,
    TopicNotFoundError,
    UnsupportedError,
)
from rmq_spark.client.model import (
    EVERY_MESSAGE,
    Credentials,
    FilterExpression,
    HalfMessage,
    Message,
    MessageQueue,
    OutgoingMessage,
    PullResult,
    SendResult,
    TopicRoute,
)
from rmq_spark.client.tls import TlsConfig

if TYPE_CHECKING:
    from rmq_spark.client.grpc.client import GrpcClient
    from rmq_spark.client.remoting.client import RemotingClient
    from rmq_spark.compiled import PullStatus

_CLIENTS = {
    "GrpcClient": "rmq_spark.client.grpc.client",
    "RemotingClient": "rmq_spark.client.remoting.client",
    "PullStatus": "rmq_spark.compiled",
}

__all__ = [
    "EVERY_MESSAGE",
    "AuthError",
    "BrokerBusyError",
    "BrokerError",
    "BrokerUnavailableError",
    "ConnectionLostError",
    "Credentials",
    "DataLossError",
    "FilterExpression",
    "GrpcClient",
    "HalfMessage",
    "InvalidFilterError",
    "Message",
    "MessageQueue",
    "MessageTooLargeError",
    "OffsetMovedError",
    "OutgoingMessage",
    "ProtocolError",
    "PullResult",
    "PullStatus",
    "RemotingClient",
    "RequestTimeoutError",
    "RocketMQError",
    "SendResult",
    "TlsConfig",
    "TopicNotFoundError",
    "TopicRoute",
    "UnsupportedError",
]


def __getattr__(name: str):
    if name in _CLIENTS:
        return getattr(importlib.import_module(_CLIENTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
