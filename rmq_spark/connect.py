"""Build the RocketMQ client for a set of options; one shared client per process on the executor side."""
from __future__ import annotations

import threading

from rmq_spark.client.base import BaseClient
from rmq_spark.client.grpc.client import GrpcClient
from rmq_spark.client.remoting.acl import Credentials
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.options import SourceOptions

_shared: dict[tuple, BaseClient] = {}
_shared_lock = threading.Lock()


def _settings(o: SourceOptions) -> tuple:
    return (o.name_server, o.endpoint, o.access_key, o.secret_key, o.security_token, o.tls, o.request_timeout_ms,
            o.connect_timeout_ms)


def new_client(o: SourceOptions) -> BaseClient:
    """A fresh client of the transport the options select (the caller closes it)."""
    credentials = Credentials(o.access_key, o.secret_key or "", o.security_token) if o.access_key else None
    if o.endpoint:
        return GrpcClient(o.endpoint, credentials=credentials, tls=o.tls, request_timeout=o.request_timeout_ms / 1000,
                          connect_timeout=o.connect_timeout_ms / 1000, max_message_bytes=o.max_message_bytes)
    return RemotingClient(o.name_server or "", credentials=credentials, tls=o.tls,
                          request_timeout=o.request_timeout_ms / 1000, connect_timeout=o.connect_timeout_ms / 1000,
                          max_message_bytes=o.max_message_bytes)


def shared_client(o: SourceOptions) -> BaseClient:
    """A client kept for the life of this (reused) Python worker, so tasks share connections to the brokers."""
    key = _settings(o)
    with _shared_lock:
        client = _shared.get(key)
        if client is None:
            client = _shared[key] = new_client(o)
        return client
