"""Build the RocketMQ client for a set of options; on the executor side, clients shared by the tasks of a Python
worker: leased per task, closed once idle, at most a few at a time, and keyed by a digest of their settings (no
secret kept in clear in the table)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rmq_spark.client.base import BaseClient
from rmq_spark.client.model import Credentials
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.options import ConnectionOptions

MAX_SHARED = 8  # clients (connection pools) one worker keeps at most, beyond those in use
IDLE_S = 300.0  # a shared client unused this long is closed
_REAP_EVERY_S = 60.0


def new_client(o: ConnectionOptions) -> BaseClient:
    """A fresh client of the transport the options select (the caller closes it). The gRPC transport (grpcio and
    protobuf, a tenth of a second) is imported only by the processes whose options select it."""
    credentials = Credentials(o.access_key, o.secret_key or "", o.security_token) if o.access_key else None
    if o.endpoint:
        from rmq_spark.client.grpc.client import GrpcClient

        return GrpcClient(
            o.endpoint,
            credentials=credentials,
            tls=o.tls_config,
            request_timeout=o.request_timeout_ms / 1000,
            connect_timeout=o.connect_timeout_ms / 1000,
            max_message_bytes=o.max_message_bytes,
            namespace=o.wire_namespace,
        )
    return RemotingClient(
        o.name_server or "",
        credentials=credentials,
        tls=o.tls_config,
        request_timeout=o.request_timeout_ms / 1000,
        connect_timeout=o.connect_timeout_ms / 1000,
        max_message_bytes=o.max_message_bytes,
        namespace=o.wire_namespace,
    )


def settings_key(o: ConnectionOptions) -> str:
    """A digest of everything that makes two clients differ (the secret included, but not readable from it)."""
    settings = (
        o.name_server,
        o.endpoint,
        o.access_key,
        o.secret_key,
        o.security_token,
        o.namespace,
        o.tls_config,
        o.request_timeout_ms,
        o.connect_timeout_ms,
        o.max_message_bytes,
    )
    return hashlib.sha256(repr(settings).encode("utf-8")).hexdigest()


@dataclass
class _Shared:
    client: BaseClient
    users: int = 0
    last_used: float = field(default_factory=time.monotonic)


_shared: dict[str, _Shared] = {}
_lock = threading.Lock()
_reaper: threading.Thread | None = None


def _close_unused(now: float, *, keep: int) -> list[BaseClient]:
    """Remove (under _lock) the idle clients, then the least recently used unused ones beyond ``keep``."""
    unused = sorted((e.last_used, k) for k, e in _shared.items() if e.users == 0)
    drop = [k for used, k in unused if now - used >= IDLE_S]
    extra = len(_shared) - len(drop) - keep
    drop += [k for _, k in unused if k not in drop][: max(0, extra)]
    return [_shared.pop(k).client for k in drop]


def _reap_forever() -> None:
    while True:
        time.sleep(_REAP_EVERY_S)
        with _lock:
            closing = _close_unused(time.monotonic(), keep=MAX_SHARED)
        for c in closing:
            c.close()


@contextmanager
def shared_client(o: ConnectionOptions) -> Iterator[BaseClient]:
    """A client shared by the tasks of this (reused) Python worker, leased for the ``with`` block: tasks share
    connections to the brokers, and a client nobody has used for IDLE_S is closed."""
    global _reaper
    key = settings_key(o)
    with _lock:
        entry = _shared.get(key)
        if entry is None:
            closing = _close_unused(time.monotonic(), keep=MAX_SHARED - 1)
            entry = _shared[key] = _Shared(new_client(o))
        else:
            closing = []
        entry.users += 1
        if _reaper is None:
            _reaper = threading.Thread(target=_reap_forever, name="rmq-client-reaper", daemon=True)
            _reaper.start()
    for c in closing:
        c.close()
    try:
        yield entry.client
    finally:
        with _lock:
            entry.users -= 1
            entry.last_used = time.monotonic()
