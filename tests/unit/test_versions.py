"""Answers of RocketMQ 4.x brokers, told by the release each answer carries (client/remoting/versions.py)."""

from __future__ import annotations

import pytest

from rmq_spark.client.errors import AuthError
from rmq_spark.client.remoting import broker as req
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.frame import RemotingCommand
from rmq_spark.client.remoting.status import error_for
from rmq_spark.client.remoting.versions import is_v4, release_name
from rmq_spark.client.time_search import NearOffset

V4_9_7, V5_3_0, UNSTAMPED = 407, 473, 0


def _answer(version: int, offset: int, code: int = codes.SUCCESS) -> RemotingCommand:
    return RemotingCommand(code=code, flag=1, ext_fields={"offset": str(offset)}, version=version)


@pytest.mark.parametrize(
    "version, name, v4",
    [
        (V4_9_7, "4.9.7", True),
        (406, "4.9.7-SNAPSHOT", True),
        (393, "4.9.0", True),
        (300, "4.x", True),
        (V5_3_0, "5.x or later", False),
        (UNSTAMPED, "unknown", False),
    ],
)
def test_the_release_of_an_answer(version, name, v4):
    assert release_name(version) == name
    assert is_v4(RemotingCommand(code=0, version=version)) is v4


@pytest.mark.parametrize(
    "version, offset, expected", [(V4_9_7, 0, None), (V4_9_7, 7, 7), (V5_3_0, 0, 0), (UNSTAMPED, 0, 0)]
)
def test_a_consumer_offset_of_0_from_a_4x_broker_is_none(version, offset, expected):
    assert req.consumer_offset(_answer(version, offset), "offset", "127.0.0.1:1") == expected


def test_a_consumer_offset_not_found_is_none_on_every_release():
    for version in (V4_9_7, V5_3_0):
        assert req.consumer_offset(_answer(version, 0, codes.QUERY_NOT_FOUND), "offset", "127.0.0.1:1") is None


def test_a_4x_timestamp_search_answers_an_offset_near_the_time_only():
    assert req.searched_offset(_answer(V4_9_7, 4), "search", "127.0.0.1:1") == NearOffset(4)
    assert req.searched_offset(_answer(V5_3_0, 4), "search", "127.0.0.1:1") == 4


@pytest.mark.parametrize(
    "remark",
    [
        "org.apache.rocketmq.acl.common.AclException: No accessKey is configured, org.apache.rocketmq.acl.plain.Plain"
        "PermissionManager.validate(PlainPermissionManager.java:663)",
        "org.apache.rocketmq.acl.common.AclException: Need admin permission for request code=17, but accessKey=reader is "
        "not, org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:580)",
    ],
)
def test_a_4x_acl_refusal_is_an_auth_error(remark):
    """RocketMQ 4.x's ACL 1.0 answers every refusal as SYSTEM_ERROR with the AclException in the remark."""
    error = error_for(
        RemotingCommand(code=codes.SYSTEM_ERROR, flag=1, remark=remark, version=V4_9_7),
        "pull of T:broker-a/0",
        "127.0.0.1:1",
    )
    assert isinstance(error, AuthError) and "accessKey/secretKey and the user's permissions" in str(error)
    assert "AclException" in error.remark
