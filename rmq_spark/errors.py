"""Every error rmq-spark raises, in one public module: ``from rmq_spark.errors import DataLossError``.

All are ``RocketMQError``s. The client's are defined in ``rmq_spark.client.errors`` (the client stands on its own
and imports nothing above it) and re-exported here; the connector's (options, rows of a write, commits of the
sink) are defined here. Each class's text starts with its condition, ``[ROCKETMQ_...]`` (its ``condition``), which
stays the same across releases: grep and alert on it where Spark shows an error as text. The README lists them.
"""

from __future__ import annotations

from rmq_spark.client.errors import (
    AddressError,
    AuthError,
    BrokerBusyError,
    BrokerError,
    BrokerUnavailableError,
    ConnectionLostError,
    DataLossError,
    InvalidFilterError,
    MessageRejectedError,
    MessageTooLargeError,
    OffsetMovedError,
    ProtocolError,
    RequestTimeoutError,
    RocketMQError,
    TopicNotFoundError,
    UnsupportedError,
)

__all__ = [
    "AddressError",
    "AuthError",
    "BrokerBusyError",
    "BrokerError",
    "BrokerUnavailableError",
    "CommitError",
    "ConnectionLostError",
    "DataLossError",
    "InvalidFilterError",
    "InvalidRowError",
    "MessageRejectedError",
    "MessageTooLargeError",
    "OffsetMovedError",
    "OptionError",
    "ProtocolError",
    "RequestTimeoutError",
    "RocketMQError",
    "TopicNotFoundError",
    "UnsupportedError",
]


class OptionError(RocketMQError, condition="ROCKETMQ_INVALID_OPTION"):
    """An option is unknown, missing, malformed or contradicts another option (or the schema, the columns of a
    write, the topic's kind)."""


class InvalidRowError(RocketMQError, condition="ROCKETMQ_INVALID_ROW"):
    """Rows of a write that cannot become messages: ``count`` rows of Spark partition ``partition`` have
    ``problem``; ``fix`` says what to do."""

    def __init__(self, problem: str, fix: str, partition: int, count: int) -> None:
        rows = "1 row of" if count == 1 else f"{count} rows of"
        super().__init__(f"{rows} Spark partition {partition} {'has' if count == 1 else 'have'} {problem}: {fix}")
        self.problem, self.fix, self.partition, self.count = problem, fix, partition, count

    def __reduce__(self):
        return type(self), (self.problem, self.fix, self.partition, self.count)


class CommitError(RocketMQError, condition="ROCKETMQ_COMMIT_FAILED"):
    """Ending a batch's half messages did not finish: some may be committed. Restarting the query completes the
    batch exactly once (streaming); a batch write must be checked."""
