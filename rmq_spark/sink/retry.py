"""The sink's one rule for transient failures: try again with backoff until brokerRetryTimeoutMs has passed since
the first failure, then fail naming the option."""

from __future__ import annotations

import time

from rmq_spark.client.errors import RocketMQError
from rmq_spark.compiled import backoff_delay


class Retries:
    """The failures in a row of one thing being tried (a send, a queue's END_TRANSACTION)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._since: float | None = None
        self._attempts = 0

    def wait(self, error: RocketMQError, what: str) -> None:
        """Sleep before the next try after ``error``; past the deadline, raise an error of its kind naming ``what``
        and the option instead."""
        now = time.monotonic()
        if self._since is None:
            self._since = now
        if now - self._since > self.timeout:
            raise type(error)(
                f"{what} kept failing for {now - self._since:.0f} s, past option brokerRetryTimeoutMs "
                f"({self.timeout * 1000:.0f} ms): {error}",
                code=error.code,
                remark=error.remark,
            ) from error
        time.sleep(backoff_delay(self._attempts))
        self._attempts += 1

    def reset(self) -> None:
        """The last try succeeded."""
        self._since, self._attempts = None, 0
