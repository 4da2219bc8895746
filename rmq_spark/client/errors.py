"""The one exception hierarchy of rmq_spark: every failure the client can raise is a ``RocketMQError`` (the
compiled core's errors become one of them in ``core_errors.package_error``). Users import them from
``rmq_spark.errors``, which adds the connector's own; the client imports nothing above itself.

Each class names its condition, a stable prefix of its text (``[ROCKETMQ_DATA_LOSS] ...``), which users grep and
alert on where Spark shows errors as text; the README lists them with their fixes."""

from __future__ import annotations

import re
from typing import ClassVar

_QUOTED_CONDITION = re.compile(r"\[ROCKETMQ_[A-Z_]+\] ")


class RocketMQError(Exception):
    """A RocketMQ failure; ``code`` and ``remark`` are the broker's response code and remark when there is one."""

    condition: ClassVar[str] = "ROCKETMQ_ERROR"

    def __init_subclass__(cls, *, condition: str, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.condition = condition

    def __init__(self, message: str, *, code: int | None = None, remark: str | None = None) -> None:
        self.code = code
        self.remark = remark
        # a message quoting another error keeps one prefix, its own (str() adds it)
        detail = _QUOTED_CONDITION.sub("", message) if "[ROCKETMQ_" in message else message
        if code is not None:
            detail += f" (code {code}" + (f": {remark}" if remark else "") + ")"
        super().__init__(detail)

    def __str__(self) -> str:
        return f"[{self.condition}] {super().__str__()}"


class ProtocolError(RocketMQError, condition="ROCKETMQ_PROTOCOL_ERROR"):
    """Bytes that do not follow the RocketMQ wire format (truncated or malformed frame, header or message)."""


class AddressError(RocketMQError, ValueError, condition="ROCKETMQ_INVALID_ADDRESS"):
    """A server address is not ``host:port``."""


class MessageTooLargeError(ProtocolError, condition="ROCKETMQ_MESSAGE_TOO_LARGE"):
    """A message body decompresses to more than the limit (option maxMessageBytes)."""

    def __init__(self, message: str, *, limit: int = -1, code: int | None = None, remark: str | None = None) -> None:
        super().__init__(message, code=code, remark=remark)
        self.limit = limit


class ConnectionLostError(RocketMQError, condition="ROCKETMQ_CONNECTION_LOST"):
    """The connection closed or broke while a request was pending, or could not be opened."""


class BrokerUnavailableError(ConnectionLostError, condition="ROCKETMQ_BROKER_UNAVAILABLE"):
    """No member of a broker group can serve the request now: it is missing from the route (stopped, restarting)
    or none of its addresses answers. Unavailable, not lost: retry later."""


class RequestTimeoutError(RocketMQError, condition="ROCKETMQ_REQUEST_TIMEOUT"):
    """No response arrived within the request's timeout."""


class TopicNotFoundError(RocketMQError, condition="ROCKETMQ_TOPIC_NOT_FOUND"):
    """The name server has no route for the topic."""


class AuthError(RocketMQError, condition="ROCKETMQ_AUTH_FAILED"):
    """Authentication failed or the credentials lack the permission for the request."""


class OffsetMovedError(RocketMQError, condition="ROCKETMQ_OFFSET_MOVED"):
    """The requested offset is outside what the broker holds (deleted or beyond the end)."""

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        remark: str | None = None,
        next_begin_offset: int = -1,
        min_offset: int = -1,
        max_offset: int = -1,
    ) -> None:
        super().__init__(message, code=code, remark=remark)
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset


class BrokerError(RocketMQError, condition="ROCKETMQ_BROKER_ERROR"):
    """The broker answered a request with an error code not covered by a more specific class."""


class BrokerBusyError(BrokerError, condition="ROCKETMQ_BROKER_BUSY"):
    """The broker asked the client to back off (SYSTEM_BUSY, FLOW_CONTROL, SERVICE_NOT_AVAILABLE): transient,
    retried with backoff."""


class MessageRejectedError(BrokerError, condition="ROCKETMQ_MESSAGE_REJECTED"):
    """The broker refused to store a message: too large, malformed, or a kind it does not accept (a timer
    message on a broker without a timer wheel)."""


class InvalidFilterError(RocketMQError, condition="ROCKETMQ_INVALID_FILTER"):
    """The broker cannot filter with the subscription's expression: it does not compile, or the broker does not
    support its type (SQL92 needs enablePropertyFilter)."""


class UnsupportedError(RocketMQError, condition="ROCKETMQ_UNSUPPORTED"):
    """The transport has no such call (e.g. the topic list over the v2 gRPC API)."""


class DataLossError(RocketMQError, condition="ROCKETMQ_DATA_LOSS"):
    """Messages that a planned range asked for are no longer on the broker."""


def with_note(e: RocketMQError, note: str) -> RocketMQError:
    """``e`` told with ``note`` after its text: an error of the same class with the same code and remark (``e``
    itself when it is of a class with fields of its own, or already has the note)."""
    detail = str(e.args[0]) if e.args else ""
    if note in detail or type(e).__init__ is not RocketMQError.__init__:
        return e
    noted = type(e)(f"{detail}; {note}")
    noted.code, noted.remark = e.code, e.remark
    return noted


# Failures that say "not now" rather than "never": a caller may retry them (with backoff, up to a deadline).
RETRYABLE = (ConnectionLostError, RequestTimeoutError, BrokerBusyError)
