"""TLS: the client talks TLS to a name server and broker that accept it (RocketMQ's permissive mode with its
self-signed test certificate); certificate verification stays on by default and fails clearly on that one."""
from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from rmq_spark.client import ConnectionLostError, MessageQueue, RemotingClient
from rmq_spark.client.grpc.client import GrpcClient
from rmq_spark.embedded import EmbeddedRocketMQ


@pytest.fixture(scope="module")
def tls_cluster():
    with EmbeddedRocketMQ(1, tls=True) as mq:
        mq.create_topic("Encrypted", queues=1)
        mq.produce("Encrypted", [{"body": f"e{i}", "broker": "broker-a", "queueId": 0} for i in range(3)])
        yield mq


def _trust_any() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the broker's self-signed test certificate
    return ctx


def test_reads_over_tls(tls_cluster):
    with RemotingClient(tls_cluster.name_server, tls=_trust_any()) as client:
        mq = MessageQueue("Encrypted", "broker-a", 0)
        assert [m.body for m in client.read_range(mq, 0, client.max_offset(mq))] == [b"e0", b"e1", b"e2"]
        broker = client.broker_address("Encrypted", "broker-a")
        assert isinstance(client._pool.get(broker)._sock, ssl.SSLSocket)
        assert isinstance(client._pool.get(tls_cluster.name_server)._sock, ssl.SSLSocket)


def test_certificate_verification_is_on_by_default(tls_cluster):
    with RemotingClient(tls_cluster.name_server, tls=True) as client:
        with pytest.raises(ConnectionLostError, match="cannot connect to .*CERTIFICATE_VERIFY_FAILED"):
            client.route("Encrypted")


def test_reads_over_tls_through_the_gateway(tls_cluster):
    cert = Path(tls_cluster.gateway_cert).read_bytes()
    with GrpcClient(tls_cluster.gateway, root_certificates=cert, server_name="localhost") as client:
        mq = MessageQueue("Encrypted", "broker-a", 0)
        assert [m.body for m in client.read_range(mq, 0, client.max_offset(mq))] == [b"e0", b"e1", b"e2"]


def test_the_gateway_certificate_is_verified_and_plaintext_refused(tls_cluster):
    with GrpcClient(tls_cluster.gateway, tls=True, connect_timeout=2) as client:  # system roots only
        with pytest.raises(ConnectionLostError, match="could not talk gRPC to"):
            client.route("Encrypted")
    with GrpcClient(tls_cluster.gateway, connect_timeout=2) as client:  # no TLS at all
        with pytest.raises(ConnectionLostError, match="could not talk gRPC to"):
            client.route("Encrypted")
