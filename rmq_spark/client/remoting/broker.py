"""Broker requests: build each request command and read its response (no connection or routing logic here)."""
from __future__ import annotations

import json
import struct
import time

from rmq_spark.client.errors import InvalidFilterError, RocketMQError
from rmq_spark.client.model import MessageQueue, PullResult, PullStatus, SendResult
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.frame import RemotingCommand, parse_loose_json
from rmq_spark.client.remoting.message_codec import OutgoingMessage, encode_batch, encode_properties
from rmq_spark.client.remoting.status import check

_PULL_STATUS = {
    codes.SUCCESS: PullStatus.FOUND,
    codes.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    codes.PULL_RETRY_IMMEDIATELY: PullStatus.RETRY_IMMEDIATELY,
    codes.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
# A stored message record begins with totalSize, magicCode, bodyCRC, queueId, flag, then its queue offset.
_RECORD_QUEUE_OFFSET = struct.Struct(">q")
_QUEUE_OFFSET_AT = 20


def _queue_fields(mq: MessageQueue) -> dict[str, str]:
    return {"topic": mq.topic, "queueId": str(mq.queue_id)}


def pull_request(mq: MessageQueue, group: str, offset: int, max_nums: int, *, expression: str = "*",
                 expression_type: str = "TAG", suspend_ms: int = 0) -> RemotingCommand:
    """PULL_MESSAGE carrying its subscription, so the broker needs no heartbeat from us."""
    sys_flag = codes.PULL_FLAG_SUBSCRIPTION | (codes.PULL_FLAG_SUSPEND if suspend_ms > 0 else 0)
    return RemotingCommand(code=codes.PULL_MESSAGE, ext_fields={
        "consumerGroup": group, **_queue_fields(mq), "queueOffset": str(offset), "maxMsgNums": str(max_nums),
        "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": str(suspend_ms),
        "subscription": expression, "subVersion": str(int(time.time() * 1000)), "expressionType": expression_type,
    })


def pull_result(response: RemotingCommand, mq: MessageQueue, address: str, offset: int) -> PullResult:
    """The PullResult of a pull at ``offset``. PULL_RETRY_IMMEDIATELY is a filter span only when the broker says
    NO_MATCHED_MESSAGE and moved on; any other cause (a slave that cannot serve the offset, a commit-log file being
    deleted) means the same offset must be pulled again."""
    status = _PULL_STATUS.get(response.code)
    if status is None:
        check(response, f"pull of {mq}", address)
        raise RocketMQError(f"pull of {mq} at {address}: unexpected response code {response.code}",
                            code=response.code, remark=response.remark)
    h = response.ext_fields
    try:
        next_offset = int(h.get("nextBeginOffset", -1))
        if (status is PullStatus.RETRY_IMMEDIATELY and next_offset > offset
                and response.remark in (codes.NO_MATCHED_MESSAGE, None, "")):
            status = PullStatus.NO_MATCHED_MSG
        found = status is PullStatus.FOUND
        return PullResult(status=status, next_begin_offset=next_offset,
                          min_offset=int(h.get("minOffset", -1)), max_offset=int(h.get("maxOffset", -1)),
                          body=response.body if found else b"",
                          suggest_which_broker_id=int(h.get("suggestWhichBrokerId", 0)),
                          first_offset=_first_offset(response.body) if found else -1)
    except ValueError as e:
        raise RocketMQError(f"pull of {mq} at {address}: malformed response header {h!r}") from e


def _first_offset(block: bytes) -> int:
    """The queue offset of the first record of a pulled block (-1 when the block is too short to hold one)."""
    if len(block) < _QUEUE_OFFSET_AT + 8:
        return -1
    return _RECORD_QUEUE_OFFSET.unpack_from(block, _QUEUE_OFFSET_AT)[0]


def offset_request(code: int, mq: MessageQueue, **extra: str) -> RemotingCommand:
    """GET_MIN_OFFSET / GET_MAX_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP / GET_EARLIEST_MSG_STORETIME."""
    return RemotingCommand(code=code, ext_fields={**_queue_fields(mq), **extra})


def header_long(response: RemotingCommand, name: str, what: str, address: str, *ok: int) -> int:
    check(response, what, address, *ok)
    try:
        return int(response.ext_fields[name])
    except (KeyError, ValueError) as e:
        raise RocketMQError(f"{what} at {address}: response has no valid {name!r} field") from e


def query_consumer_offset_request(group: str, mq: MessageQueue) -> RemotingCommand:
    return RemotingCommand(code=codes.QUERY_CONSUMER_OFFSET,
                           ext_fields={"consumerGroup": group, **_queue_fields(mq), "setZeroIfNotFound": "false"})


def update_consumer_offset_request(group: str, mq: MessageQueue, offset: int) -> RemotingCommand:
    return RemotingCommand(code=codes.UPDATE_CONSUMER_OFFSET,
                           ext_fields={"consumerGroup": group, **_queue_fields(mq), "commitOffset": str(offset)})


def check_client_config_request(group: str, topic: str, expression: str, expression_type: str) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG: whether the broker can filter ``topic`` with the subscription (it compiles SQL92)."""
    subscription = {"topic": topic, "subString": expression, "expressionType": expression_type, "tagsSet": [],
                    "codeSet": [], "subVersion": int(time.time() * 1000), "classFilterMode": False}
    body = {"clientId": "rmq-spark", "group": group, "subscriptionData": subscription}
    return RemotingCommand(code=codes.CHECK_CLIENT_CONFIG, body=json.dumps(body).encode("utf-8"))


def check_client_config(response: RemotingCommand, expression: str, address: str) -> None:
    what = f"filter expression {expression!r}"
    if response.code == codes.SYSTEM_ERROR and "filter" in (response.remark or ""):
        raise InvalidFilterError(f"{what}: the broker at {address} does not filter by it ({response.remark}); "
                                 "SQL92 needs enablePropertyFilter=true on the brokers", code=response.code)
    check(response, what, address)


def consumer_list_request(group: str) -> RemotingCommand:
    """GET_CONSUMER_LIST_BY_GROUP: the client ids of the group's consumers connected to this broker."""
    return RemotingCommand(code=codes.GET_CONSUMER_LIST_BY_GROUP, ext_fields={"consumerGroup": group})


def consumer_list(response: RemotingCommand, group: str, address: str) -> list[str]:
    """The ids of a consumer list answer; the broker answers SYSTEM_ERROR "no consumer ..." for none."""
    if response.code == codes.SYSTEM_ERROR and "no consumer" in (response.remark or ""):
        return []
    check(response, f"consumers of group {group!r}", address)
    data = parse_loose_json(response.body.decode("utf-8", "replace")) if response.body else {}
    return sorted(data.get("consumerIdList") or [])


def topic_config_request(topic: str) -> RemotingCommand:
    """GET_TOPIC_CONFIG: the topic's configuration on this broker, attributes included."""
    return RemotingCommand(code=codes.GET_TOPIC_CONFIG, ext_fields={"topic": topic, "lo": "false"})


def topic_attributes(response: RemotingCommand, topic: str, address: str) -> dict[str, str]:
    check(response, f"configuration of topic {topic!r}", address)
    data = parse_loose_json(response.body.decode("utf-8", "replace")) if response.body else {}
    return {str(k): str(v) for k, v in (data.get("attributes") or {}).items()}


def create_topic_request(topic: str, read_queues: int, write_queues: int, perm: int = 6) -> RemotingCommand:
    return RemotingCommand(code=codes.UPDATE_AND_CREATE_TOPIC, ext_fields={
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(read_queues),
        "writeQueueNums": str(write_queues), "perm": str(perm), "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false"})


def send_request(group: str, mq: MessageQueue, messages: list[OutgoingMessage]) -> RemotingCommand:
    """SEND_MESSAGE_V2 for one message, SEND_BATCH_MESSAGE for several (all to one queue)."""
    batch = len(messages) > 1
    first = messages[0]
    fields = {
        "a": group, "b": mq.topic, "c": "TBW102", "d": "4", "e": str(mq.queue_id), "f": "0",
        "g": str(int(time.time() * 1000)), "h": str(first.flag),
        "i": "" if batch else encode_properties(first.wire_properties()), "j": "0", "k": "false",
        "m": "true" if batch else "false", "n": mq.broker_name,
    }
    body = encode_batch(messages) if batch else first.body
    return RemotingCommand(code=codes.SEND_BATCH_MESSAGE if batch else codes.SEND_MESSAGE_V2,
                           ext_fields=fields, body=body)


def send_result(response: RemotingCommand, mq: MessageQueue, address: str,
                messages: list[OutgoingMessage]) -> SendResult:
    check(response, f"send to {mq}", address)
    h = response.ext_fields
    return SendResult(msg_id=",".join(m.unique_id or "" for m in messages),
                      queue=MessageQueue(mq.topic, mq.broker_name, int(h.get("queueId", mq.queue_id))),
                      queue_offset=int(h.get("queueOffset", -1)), offset_msg_id=h.get("msgId", ""))
