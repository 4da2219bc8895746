"""The standalone pull gateway is safe by default (jvm-shim/gateway/README.md): it binds loopback and refuses another
address without caller authentication, takes secrets from files only, answers an unknown key and a wrong signature
alike, refuses a replayed signature, grants each user only its topics and groups, and bounds a GZIP send's body."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import time

import pytest

from rmq_spark.client import AuthError, Credentials, GrpcClient, MessageQueue
from rmq_spark.client.errors import MessageTooLargeError
from rmq_spark.client.grpc import auth
from rmq_spark.client.grpc import client as grpc_client
from rmq_spark.client.grpc.v2 import definition_pb2 as pb
from rmq_spark.client.grpc.v2 import service_pb2 as svc
from rmq_spark.client.model import OutgoingMessage
from rmq_spark_testing.embedded import GATEWAY_JAR, jvm_command
from tests.conftest import unique_topic

USERS = {"reader": "reader-secret-0123", "writer": "writer-secret-4567", "admin": "admin-secret-89ab"}


def start_gateway(*args: str, env: dict | None = None) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        jvm_command(*args, heap="256m", jar=GATEWAY_JAR),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.wait(timeout=30)
        raise AssertionError(f"the gateway did not start: {line!r} {proc.stderr.read()[-3000:]}")
    return proc, json.loads(line[len("READY ") :])


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def topics(rocketmq, request):
    base = unique_topic(request)
    names = {"readable": f"{base}-r", "hidden": f"{base}-h"}
    for t in names.values():
        rocketmq.create_topic(t, queues=1, broker="broker-a")
        rocketmq.produce(t, [{"body": f"m{i}", "broker": "broker-a", "queueId": 0} for i in range(3)])
    return names


@pytest.fixture(scope="module")
def gateway(rocketmq, topics, tmp_path_factory):
    users = tmp_path_factory.mktemp("gw") / "users.json"
    users.write_text(
        json.dumps(
            {
                "users": [
                    {
                        "accessKey": "reader",
                        "secretKey": USERS["reader"],
                        "read": [topics["readable"]],
                        "commit": ["ok-*"],
                    },
                    {"accessKey": "writer", "secretKey": USERS["writer"], "write": [topics["readable"]]},
                    {"accessKey": "admin", "secretKey": USERS["admin"], "read": ["*"], "write": ["*"], "commit": ["*"]},
                ]
            }
        )
    )
    proc, ready = start_gateway(
        "--namesrv",
        rocketmq.name_server,
        "--port",
        "0",
        "--users-file",
        str(users),
        "--max-message-bytes",
        str(1 << 20),
    )
    yield proc, ready["gateway"]
    stop(proc)


def client(address: str, user: str | None, secret: str | None = None) -> GrpcClient:
    creds = Credentials(user, secret or USERS[user]) if user else None
    return GrpcClient(address, credentials=creds, connect_timeout=5)


@pytest.mark.parametrize(
    "flag, value",
    [("--user", "a:s3cr3t-user"), ("--broker-access-key", "AK-0123"), ("--broker-secret-key", "SK-s3cr3t")],
)
def test_a_secret_on_the_command_line_is_refused(flag, value):
    # secrets come from files only: a command line is readable by every user of the host (/proc/PID/cmdline)
    out = subprocess.run(
        jvm_command("--namesrv", "127.0.0.1:1", flag, value, heap="64m", jar=GATEWAY_JAR),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and f"{flag} is not accepted: a secret on the command line" in out.stderr
    assert value not in out.stderr


def test_a_non_loopback_bind_needs_caller_authentication():
    out = subprocess.run(
        jvm_command("--namesrv", "127.0.0.1:1", "--bind", "0.0.0.0", heap="64m", jar=GATEWAY_JAR),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "refusing to serve 0.0.0.0 without caller authentication" in out.stderr
    assert "--allow-anonymous-remote-callers" in out.stderr


def test_an_unknown_key_and_a_wrong_secret_read_the_same(gateway, topics):
    _, address = gateway
    mq = MessageQueue(topics["readable"], "broker-a", 0)
    answers = []
    for user, secret in (("nobody", "whatever-secret"), ("reader", "wrong-secret-value")):
        with client(address, user, secret) as c, pytest.raises(AuthError, match="UNAUTHORIZED") as e:
            c.max_offset(mq)
        answers.append(e.value.remark)
    assert answers[0] == answers[1] == "authentication failed: unknown access key or wrong signature"


def test_a_replayed_signature_is_refused(gateway, topics):
    _, address = gateway
    with client(address, "reader") as c:
        assert c.max_offset(MessageQueue(topics["readable"], "broker-a", 0)) == 3  # a fresh signature works
        stale = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() - 600))  # captured ten minutes ago
        metadata = (
            ("x-mq-date-time", stale),
            (
                "authorization",
                f"{auth.ALGORITHM} Credential=reader, "
                f"SignedHeaders=x-mq-date-time, Signature={auth.signature(USERS['reader'], stale)}",
            ),
        )
        request = svc.QueryRouteRequest(topic=pb.Resource(name=topics["readable"]))
        answer = c._method("QueryRoute", svc.QueryRouteResponse)(request, timeout=10, metadata=metadata)
    assert answer.status.code == pb.Code.UNAUTHORIZED
    assert "s away from the gateway's clock" in answer.status.message and "replayed" in answer.status.message


def test_each_user_gets_only_its_topics_and_groups(gateway, topics):
    _, address = gateway
    readable, hidden = (MessageQueue(topics[k], "broker-a", 0) for k in ("readable", "hidden"))
    with client(address, "reader") as c:
        assert [m.body for m in c.read_range(readable, 0, 3)] == [b"m0", b"m1", b"m2"]
        c.update_consumer_offset("ok-group", readable, 2)
        for denied, what in (
            (lambda: c.max_offset(hidden), f"may not read topic {hidden.topic}"),
            (lambda: list(c.read_range(hidden, 0, 3)), f"may not read topic {hidden.topic}"),
            (lambda: c.update_consumer_offset("other-group", readable, 2), "may not commit group"),
            (lambda: c.send(readable, OutgoingMessage(b"x")), "may not write topic"),
        ):
            with pytest.raises(AuthError, match=f"FORBIDDEN.*access key reader {what}"):
                denied()
    with client(address, "writer") as c:
        assert c.send(readable, OutgoingMessage(b"written")).queue_offset == 3
        with pytest.raises(AuthError, match="may not read topic"):
            c.max_offset(readable)


def test_a_gzip_bomb_send_is_refused_with_bounded_memory(gateway, topics):
    proc, address = gateway
    bomb = gzip.compress(b"\0" * (512 << 20), compresslevel=9)  # 512 MiB in ~0.5 MiB: the gateway has 256 MiB
    message = grpc_client.messages.to_v2(topics["readable"], 0, [OutgoingMessage(b"").with_unique_id()])[0]
    message.body = bomb
    message.system_properties.body_encoding = pb.GZIP
    with client(address, "admin") as c:
        with pytest.raises(MessageTooLargeError, match="MESSAGE_BODY_TOO_LARGE.*expands past 1048576 bytes"):
            answer = c._unary(
                "SendMessage", svc.SendMessageResponse, svc.SendMessageRequest(messages=[message]), "bomb send"
            )
            grpc_client.status.check(answer.status, "bomb send", address)
        assert c.max_offset(MessageQueue(topics["readable"], "broker-a", 0)) >= 3  # still serving
    assert proc.poll() is None
