"""Turn a v2 ``Status`` or a failed gRPC call into the matching ``RocketMQError`` subclass, in one place."""

from __future__ import annotations

import grpc

from rmq_spark.client import hints
from rmq_spark.client.errors import (
    AuthError,
    BrokerBusyError,
    BrokerError,
    ConnectionLostError,
    InvalidFilterError,
    MessageTooLargeError,
    RequestTimeoutError,
    RocketMQError,
    TopicNotFoundError,
)
from rmq_spark.client.grpc.v2 import definition_pb2 as pb

Code = pb.Code

_HINTS: dict[int, tuple[type[RocketMQError], str]] = {
    Code.TOPIC_NOT_FOUND: (TopicNotFoundError, hints.TOPIC),
    Code.ILLEGAL_TOPIC: (TopicNotFoundError, hints.TOPIC),
    Code.UNAUTHORIZED: (AuthError, hints.AUTH),
    Code.FORBIDDEN: (AuthError, hints.AUTH),
    Code.CONSUMER_GROUP_NOT_FOUND: (BrokerError, hints.GROUP),
    Code.ILLEGAL_CONSUMER_GROUP: (BrokerError, "check consumerGroup"),
    Code.ILLEGAL_FILTER_EXPRESSION: (InvalidFilterError, hints.FILTER),
    Code.PROXY_TIMEOUT: (RequestTimeoutError, "the server did not hear back from the broker in time"),
    Code.REQUEST_TIMEOUT: (RequestTimeoutError, ""),
    Code.TOO_MANY_REQUESTS: (BrokerBusyError, hints.BUSY),
    Code.MESSAGE_BODY_TOO_LARGE: (
        MessageTooLargeError,
        "a message body is larger than the gateway or this client allows (--max-message-bytes, option maxMessageBytes)",
    ),
    Code.NOT_IMPLEMENTED: (RocketMQError, hints.NO_PULL_API),
    Code.UNSUPPORTED: (RocketMQError, hints.NO_PULL_API),
}


def code_name(code: int) -> str:
    try:
        return Code.Name(code)
    except ValueError:
        return str(code)


def check(status: pb.Status, what: str, endpoint: str, *ok: int) -> None:
    """Return when ``status`` is OK or one of ``ok``; else raise the mapped error."""
    if status.code != Code.OK and status.code not in ok:
        raise error_for(status, what, endpoint)


def error_for(status: pb.Status, what: str, endpoint: str) -> RocketMQError:
    cls, hint = _HINTS.get(status.code, (BrokerError, ""))
    message = f"{what} failed at {endpoint}: {code_name(status.code)}" + (f"; {hint}" if hint else "")
    return cls(message, code=status.code, remark=status.message or None)


# gRPC core's details when it could not build a TLS handshaker from the channel's certificates
HANDSHAKER_FAILED = "Failed to create security handshaker"


def details_of(e: grpc.RpcError) -> str:
    """gRPC core's description of why a call failed."""
    return (e.details() if hasattr(e, "details") else None) or str(e)


def rpc_error(e: grpc.RpcError, what: str, endpoint: str) -> RocketMQError:
    """The error for a gRPC call that failed as a call (not with a v2 Status in its answer)."""
    code = e.code() if hasattr(e, "code") else None
    details = details_of(e)
    name = code.name if code is not None else "UNKNOWN"
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return RocketMQError(f"{what} failed at {endpoint}: gRPC UNIMPLEMENTED; {hints.NO_PULL_API}", remark=details)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimeoutError(f"{what}: no answer from {endpoint} in time", remark=details)
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return AuthError(f"{what} refused at {endpoint} ({name}): {hints.AUTH}", remark=details)
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
        return MessageTooLargeError(
            f"{what}: {endpoint} sent a message larger than this client accepts ({details}); "
            "the limit is option maxMessageBytes",
            limit=-1,
        )
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return BrokerBusyError(f"{what}: {endpoint} is busy ({details}); {hints.BUSY}")
    tls = _tls_hint(details)
    if tls and code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN):
        return ConnectionLostError(f"{what}: the TLS handshake with {endpoint} failed ({details}); {tls}")
    if code is grpc.StatusCode.UNAVAILABLE:
        return ConnectionLostError(f"{what}: could not talk gRPC to {endpoint} ({details}); {hints.NOT_GRPC}")
    return RocketMQError(f"{what} failed at {endpoint}: gRPC {name}", remark=details)


def _tls_hint(details: str) -> str | None:
    """The fix for a failed TLS handshake, from gRPC core's details; None when it was not one."""
    if HANDSHAKER_FAILED in details:
        return hints.TLS_FILES
    if "CERTIFICATE_VERIFY_FAILED" in details or "Hostname Verification" in details:
        return hints.TLS_SERVER
    if "CERTIFICATE_REQUIRED" in details or "BAD_CERTIFICATE" in details or "TSI_DATA_CORRUPTED" in details:
        return hints.TLS_CLIENT
    return None
