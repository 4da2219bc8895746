"""ACL: a cluster with authentication on accepts signed requests with the right key and refuses a wrong secret
with an AuthError that says so and never shows the secret."""

from __future__ import annotations

import pytest

from rmq_spark.client import AuthError, Credentials, MessageQueue, RemotingClient
from rmq_spark.client.grpc.client import GrpcClient
from tests.conftest import TRANSPORTS, new_client
from tests.integration.clusters import seeded_cluster

AK, SK = "rmqspark-admin", "right-secret-0123456789"


@pytest.fixture(scope="module")
def secured():
    yield from seeded_cluster("Secured", queues=2, count=5, prefix="s", access_key=AK, secret_key=SK)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_right_key_reads_and_commits(secured, transport):
    group = f"secured-group-{transport}"
    with new_client(secured, transport, credentials=Credentials(AK, SK)) as client:
        mq = MessageQueue("Secured", "broker-a", 0)
        assert client.max_offset(mq) == 5
        assert [m.body for m in client.read_range(mq, 0, 5)] == [f"s{i}".encode() for i in range(5)]
        client.update_consumer_offset(group, mq, 3)
        assert secured.query_consumer_offset(group, "Secured", "broker-a", 0) == 3
        assert client.query_consumer_offset(group, mq) == 3


@pytest.mark.parametrize(
    "credentials, remark",
    [
        (Credentials(AK, "wrong-secret-value"), "signature"),
        (Credentials("nobody", "wrong-secret-value"), "not found"),
        (None, "username cannot be null"),
    ],
)
def test_bad_credentials_are_an_auth_error_without_the_secret(secured, credentials, remark):
    with RemotingClient(secured.name_server, credentials=credentials) as client:
        mq = MessageQueue("Secured", "broker-a", 0)
        with pytest.raises(AuthError, match=remark) as e:
            client.pull(mq, 0)
        assert "wrong-secret-value" not in str(e.value) and "wrong-secret-value" not in repr(credentials)
        assert "accessKey" in str(e.value)


@pytest.mark.parametrize(
    "credentials", [Credentials(AK, "wrong-secret-value"), Credentials("nobody", "wrong-secret-value"), None]
)
def test_the_gateway_refuses_bad_credentials_without_showing_the_secret(secured, credentials):
    with GrpcClient(secured.gateway, credentials=credentials) as client:
        mq = MessageQueue("Secured", "broker-a", 0)
        for call in (lambda: client.pull(mq, 0), lambda: client.max_offset(mq), lambda: client.queues("Secured")):
            with pytest.raises(AuthError, match="UNAUTHORIZED") as e:
                call()
            assert "wrong-secret-value" not in str(e.value) and "accessKey" in str(e.value)


def test_a_spark_read_through_the_gateway_signs_with_the_options(spark, secured):
    base = spark.read.format("rocketmq").option("endpoint", secured.gateway).option("topic", "Secured")
    assert base.option("accessKey", AK).option("secretKey", SK).load().count() == 5
    with pytest.raises(Exception, match="UNAUTHORIZED.*accessKey") as e:
        base.option("accessKey", AK).option("secretKey", "wrong-secret-value").load().collect()
    assert "wrong-secret-value" not in str(e.value)
