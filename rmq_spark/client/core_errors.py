"""The compiled core's errors as the package's: the one place they are translated."""

from __future__ import annotations

from rmq_spark.client.errors import (
    BrokerUnavailableError,
    ConnectionLostError,
    DataLossError,
    MessageTooLargeError,
    ProtocolError,
    RequestTimeoutError,
    RocketMQError,
)
from rmq_spark.compiled import (
    BodyTooLargeError,
    CoreError,
    DataLostError,
    MalformedError,
    PipeLostError,
    PipeTimeoutError,
    RefusedError,
    UnavailableError,
    UnreadableError,
)

# The core's errors, as the package's.
_PACKAGE_ERRORS: dict[type[CoreError], type[RocketMQError]] = {
    MalformedError: ProtocolError,
    UnreadableError: ProtocolError,
    PipeLostError: ConnectionLostError,
    PipeTimeoutError: RequestTimeoutError,
    DataLostError: DataLossError,
    RefusedError: RocketMQError,
    UnavailableError: BrokerUnavailableError,
}


def package_error(e: CoreError, message: str | None = None) -> RocketMQError:
    """The package's exception for ``e``, an error of the compiled core, saying ``message`` (default: the core's
    text)."""
    if isinstance(e, BodyTooLargeError):
        text, limit = e.args
        return MessageTooLargeError(text if message is None else message, limit=limit)
    return _PACKAGE_ERRORS[type(e)](str(e) if message is None else message)
