"""TLS: the client talks TLS to a name server, broker and gateway that accept it (RocketMQ's permissive mode, with
the shim's self-signed certificate); certificate verification stays on by default and fails clearly without the
certificate to trust. With a private CA and mutual TLS (client certificates required), through both transports and
from Spark options."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from rmq_spark.client import ConnectionLostError, MessageQueue, RemotingClient, RocketMQError
from rmq_spark.client.grpc.client import GrpcClient
from rmq_spark.client.tls import TlsConfig
from tests.integration.clusters import seeded_cluster


@pytest.fixture(scope="module")
def tls_cluster():
    yield from seeded_cluster("Encrypted", queues=1, count=3, prefix="e", tls=True)


def test_reads_over_tls(tls_cluster):
    with RemotingClient(tls_cluster.name_server, tls=TlsConfig(ca_file=tls_cluster.tls_ca)) as client:
        mq = MessageQueue("Encrypted", "broker-a", 0)
        assert [m.body for m in client.read_range(mq, 0, client.max_offset(mq))] == [b"e0", b"e1", b"e2"]
        broker = client.broker_address("Encrypted", "broker-a")
        assert isinstance(client._pool.get(broker)._sock, ssl.SSLSocket)
        assert isinstance(client._pool.get(tls_cluster.name_server)._sock, ssl.SSLSocket)


def test_certificate_verification_is_on_by_default(tls_cluster):
    with RemotingClient(tls_cluster.name_server, tls=TlsConfig()) as client:
        with pytest.raises(ConnectionLostError, match="cannot connect to .*CERTIFICATE_VERIFY_FAILED"):
            client.route("Encrypted")


def test_reads_over_tls_through_the_gateway(tls_cluster):
    with GrpcClient(tls_cluster.gateway, tls=TlsConfig(ca_file=tls_cluster.tls_ca, server_name="localhost")) as client:
        mq = MessageQueue("Encrypted", "broker-a", 0)
        assert [m.body for m in client.read_range(mq, 0, client.max_offset(mq))] == [b"e0", b"e1", b"e2"]


def test_the_gateway_certificate_is_verified_and_plaintext_refused(tls_cluster):
    with GrpcClient(tls_cluster.gateway, tls=TlsConfig(), connect_timeout=2) as client:  # system roots only
        with pytest.raises(ConnectionLostError, match="TLS handshake .* failed.*set tlsCaFile"):
            client.route("Encrypted")
    with GrpcClient(tls_cluster.gateway, connect_timeout=2) as client:  # no TLS at all
        with pytest.raises(ConnectionLostError, match="could not talk gRPC to"):
            client.route("Encrypted")


@pytest.fixture(scope="module")
def mtls_cluster():
    """Name server, broker and gateway with certificates of a private CA, requiring a client certificate of it."""
    yield from seeded_cluster("Mutual", queues=1, count=3, prefix="m", mutual_tls=True)


def _mutual(mq, **overrides) -> TlsConfig:
    return TlsConfig(
        **{"ca_file": mq.tls_ca, "cert_file": mq.tls_client_cert, "key_file": mq.tls_client_key, **overrides}
    )


def _clients(mq, tls):
    return RemotingClient(mq.name_server, tls=tls, connect_timeout=3), GrpcClient(
        mq.gateway, tls=tls, connect_timeout=3
    )


def test_mutual_tls_with_a_private_ca_through_both_transports(mtls_cluster):
    for client in _clients(mtls_cluster, _mutual(mtls_cluster)):
        with client:
            mq = MessageQueue("Mutual", "broker-a", 0)
            assert [m.body for m in client.read_range(mq, 0, client.max_offset(mq))] == [b"m0", b"m1", b"m2"]


@pytest.mark.parametrize(
    "case, overrides, error",
    [
        (
            "no client certificate",
            {"cert_file": None, "key_file": None},
            "refused this client's TLS certificate .*set tlsCertFile and tlsKeyFile",
        ),
        ("the system's CAs", {"ca_file": None}, "certificate was not accepted: set tlsCaFile"),
        ("another server name", {"server_name": "broker.example.org"}, "certificate was not accepted: .*tlsServerName"),
    ],
)
def test_mutual_tls_refuses_what_it_must(mtls_cluster, case, overrides, error):
    for client in _clients(mtls_cluster, _mutual(mtls_cluster, **overrides)):
        with client, pytest.raises(ConnectionLostError, match=error):
            client.route("Mutual")
            client.max_offset(MessageQueue("Mutual", "broker-a", 0))  # the broker's own handshake


def test_a_missing_client_certificate_is_named_however_the_first_send_races_the_servers_alert(mtls_cluster):
    """The TLS 1.3 handshake ends before the server checks the client's certificate: its alert may reach the
    reader while the first request is being written, which then sees only EOF (about 1 in 20 connections here)."""
    tls = _mutual(mtls_cluster, cert_file=None, key_file=None)
    for _ in range(80):
        with RemotingClient(mtls_cluster.name_server, tls=tls, connect_timeout=3) as client:
            with pytest.raises(ConnectionLostError, match="refused this client's TLS certificate"):
                client.route("Mutual")


def test_a_key_that_is_not_the_certificates_is_named_before_connecting(mtls_cluster):
    """gRPC core would only log it and fail every handshake; both transports check the files with OpenSSL first."""
    tls = _mutual(mtls_cluster, key_file=str(Path(mtls_cluster.tls_ca).parent / "server-key.pem"))  # not the client's
    match = "options tlsCertFile, tlsKeyFile\\) do not load: .*KEY_VALUES_MISMATCH"
    with pytest.raises(RocketMQError, match=match):
        RemotingClient(mtls_cluster.name_server, tls=tls)
    with GrpcClient(mtls_cluster.gateway, tls=tls) as client, pytest.raises(RocketMQError, match=match):
        client.max_offset(MessageQueue("Mutual", "broker-a", 0))


@pytest.mark.parametrize("source", ["nameServer", "endpoint"])
def test_a_spark_read_over_mutual_tls_from_options(spark, mtls_cluster, source):
    address = mtls_cluster.name_server if source == "nameServer" else mtls_cluster.gateway
    rows = (
        spark.read.format("rocketmq")
        .option(source, address)
        .option("topic", "Mutual")
        .option("tlsCaFile", mtls_cluster.tls_ca)
        .option("tlsCertFile", mtls_cluster.tls_client_cert)
        .option("tlsKeyFile", mtls_cluster.tls_client_key)
        .load()
        .select("body")
        .collect()
    )
    assert sorted(bytes(r[0]) for r in rows) == [b"m0", b"m1", b"m2"]
    with pytest.raises(Exception, match="cannot read '/no/such/ca.pem' \\(option tlsCaFile\\)"):
        (
            spark.read.format("rocketmq")
            .option(source, address)
            .option("topic", "Mutual")
            .option("tlsCaFile", "/no/such/ca.pem")
            .load()
            .collect()
        )


def test_the_standalone_gateway_verifies_the_brokers_certificates(mtls_cluster):
    """--broker-tls verifies the brokers' certificates: with the private CA (and a client certificate, which these
    brokers require) it reads; against the JVM's default CAs it cannot reach them."""
    from tests.integration.test_gateway_security import start_gateway, stop

    mq = MessageQueue("Mutual", "broker-a", 0)
    base = (
        "--namesrv",
        mtls_cluster.name_server,
        "--port",
        "0",
        "--broker-tls",
        "--broker-tls-cert",
        mtls_cluster.tls_client_cert,
        "--broker-tls-key",
        mtls_cluster.tls_client_key,
    )
    proc, ready = start_gateway(*base, "--broker-tls-ca", mtls_cluster.tls_ca)
    try:
        with GrpcClient(ready["gateway"]) as client:
            assert [m.body for m in client.read_range(mq, 0, 3)] == [b"m0", b"m1", b"m2"]
    finally:
        stop(proc)
    proc, ready = start_gateway(*base, "--request-timeout-ms", "3000")
    try:
        with GrpcClient(ready["gateway"]) as client, pytest.raises(RocketMQError, match="PROXY_TIMEOUT"):
            client.max_offset(mq)  # the handshake failed: the broker's certificate is not trusted
    finally:
        stop(proc)
