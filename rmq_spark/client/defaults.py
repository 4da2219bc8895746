"""The client layer's defaults, one per setting: the clients' keyword arguments and the connector's options
(``options.py``, which must not import the transports or the native core) both take theirs from here."""

from __future__ import annotations

DEFAULT_REQUEST_TIMEOUT = 10.0  # s, option requestTimeoutMs
DEFAULT_CONNECT_TIMEOUT = 5.0  # s, option connectTimeoutMs
# s, option brokerRetryTimeoutMs: how long a range read or a send waits for a broker that went away or is busy
DEFAULT_RETRY_TIMEOUT = 600.0
DEFAULT_PULL_DEPTH = 8  # pulls in flight per range read, option pullDepth
# A message body may decompress to at most this (option maxMessageBytes): four times the broker's default
# maxMessageSize (4 MiB), which the Java producer checks before it compresses.
DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
