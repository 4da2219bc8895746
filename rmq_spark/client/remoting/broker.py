"""Broker requests: build each request command and read its response (no connection or routing logic here)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, fields

from rmq_spark.client.errors import InvalidFilterError, RocketMQError
from rmq_spark.client.model import (
    EVERY_MESSAGE,
    FilterExpression,
    HalfMessage,
    MessageQueue,
    OutgoingMessage,
    PullResult,
    SendResult,
)
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.frame import RemotingCommand, parse_loose_json
from rmq_spark.client.remoting.send_codec import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    commit_log_offset,
    encode_batch,
    encode_properties,
)
from rmq_spark.client.remoting.status import check
from rmq_spark.client.remoting.versions import is_v4
from rmq_spark.client.time_search import NearOffset
from rmq_spark.compiled import PullStatus, first_offset, pull_status


def _queue_fields(mq: MessageQueue) -> dict[str, str]:
    """A queue's header fields. ``bname`` (RocketMQ 5's RpcRequestHeader) names the broker group: brokers ignore it,
    the RocketMQ 5 proxy forwards the request to that group's master by it and refuses a request without it."""
    return {"topic": mq.topic, "queueId": str(mq.queue_id), "bname": mq.broker_name}


def pull_request(
    mq: MessageQueue,
    group: str,
    offset: int,
    max_nums: int,
    *,
    expression: FilterExpression = EVERY_MESSAGE,
    suspend_ms: int = 0,
) -> RemotingCommand:
    """PULL_MESSAGE carrying its subscription, so the broker needs no heartbeat from us."""
    sys_flag = codes.PULL_FLAG_SUBSCRIPTION | (codes.PULL_FLAG_SUSPEND if suspend_ms > 0 else 0)
    return RemotingCommand(
        code=codes.PULL_MESSAGE,
        ext_fields={
            "consumerGroup": group,
            **_queue_fields(mq),
            "queueOffset": str(offset),
            "maxMsgNums": str(max_nums),
            "sysFlag": str(sys_flag),
            "commitOffset": "0",
            "suspendTimeoutMillis": str(suspend_ms),
            "subscription": expression.expression,
            "subVersion": str(int(time.time() * 1000)),
            "expressionType": expression.type,
        },
    )


# how often a broker checks whether its held pulls have timed out (PullRequestHoldService)
HOLD_CHECK_S = 5.0


def hold_timeout(request_timeout: float, hold_ms: int) -> float:
    """How long the answer to a pull held ``hold_ms`` may take: the hold, the broker's check of it, a request's
    timeout."""
    return request_timeout + hold_ms / 1000.0 + HOLD_CHECK_S


def pull_result(
    response: RemotingCommand, mq: MessageQueue, address: str, offset: int, *, messages: bool = True
) -> PullResult:
    """The PullResult of a pull at ``offset``; its status is the compiled core's reading of the code and remark
    (the one the native pull loop uses). An error code raises the error it maps to. Without ``messages`` (a held
    pull, a doorbell), what its header tells only: no body, no first offset."""
    h = response.ext_fields
    try:
        next_offset = int(h.get("nextBeginOffset", -1))
        status = pull_status(response.code, response.remark, next_offset, offset)
        if status is None:
            check(response, f"pull of {mq}", address)
            raise RocketMQError(
                f"pull of {mq} at {address}: unexpected response code {response.code}",
                code=response.code,
                remark=response.remark,
            )
        found = messages and status == PullStatus.FOUND
        delta = int(h.get("offsetDelta") or 0)  # a logic queue's: stored offsets to logic ones
        first = first_offset(response.body) if found else -1
        return PullResult(
            status=status,
            next_begin_offset=next_offset,
            min_offset=int(h.get("minOffset", -1)),
            max_offset=int(h.get("maxOffset", -1)),
            body=response.body if found else b"",
            suggest_which_broker_id=int(h.get("suggestWhichBrokerId", 0)),
            first_offset=first + delta if first >= 0 else first,
            offset_delta=delta,
        )
    except ValueError as e:
        raise RocketMQError(f"pull of {mq} at {address}: malformed response header {h!r}") from e


def offset_request(code: int, mq: MessageQueue, **extra: str) -> RemotingCommand:
    """GET_MIN_OFFSET / GET_MAX_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP / GET_EARLIEST_MSG_STORETIME."""
    return RemotingCommand(code=code, ext_fields={**_queue_fields(mq), **extra})


def header_long(response: RemotingCommand, name: str, what: str, address: str, *ok: int) -> int:
    check(response, what, address, *ok)
    try:
        return int(response.ext_fields[name])
    except (KeyError, ValueError) as e:
        raise RocketMQError(f"{what} at {address}: response has no valid {name!r} field") from e


def searched_offset(response: RemotingCommand, what: str, address: str, *, logic: bool = False) -> int | NearOffset:
    """A SEARCH_OFFSET_BY_TIMESTAMP answer. A 4.x broker has no boundary type: its offset is that of the message
    stored nearest the time, on either side (``time_search`` finds the boundary from it). Neither is the answer for a
    ``logic`` queue (a static topic's) the boundary: its leader passes over an item whose boundary is its first
    offset (AdminBrokerProcessor takes only offsets above 0)."""
    offset = header_long(response, "offset", what, address)
    return NearOffset(offset) if is_v4(response) or logic else offset


def consumer_offset(response: RemotingCommand, what: str, address: str) -> int | None:
    """A QUERY_CONSUMER_OFFSET answer: the group's offset, None where it has none. A 4.x broker answers 0, not
    QUERY_NOT_FOUND, for a group without an offset while the queue's first message is in memory
    (ConsumerManageProcessor), so 0 from it is none (a group that stored 0 had consumed nothing)."""
    if response.code == codes.QUERY_NOT_FOUND:
        return None
    offset = header_long(response, "offset", what, address)
    return None if offset == 0 and is_v4(response) else offset


def query_consumer_offset_request(group: str, mq: MessageQueue) -> RemotingCommand:
    return RemotingCommand(
        code=codes.QUERY_CONSUMER_OFFSET,
        ext_fields={"consumerGroup": group, **_queue_fields(mq), "setZeroIfNotFound": "false"},
    )


def update_consumer_offset_request(group: str, mq: MessageQueue, offset: int) -> RemotingCommand:
    return RemotingCommand(
        code=codes.UPDATE_CONSUMER_OFFSET,
        ext_fields={"consumerGroup": group, **_queue_fields(mq), "commitOffset": str(offset)},
    )


def check_client_config_request(group: str, topic: str, expression: FilterExpression) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG: whether the broker can filter ``topic`` with the subscription (it compiles SQL92)."""
    subscription = {
        "topic": topic,
        "subString": expression.expression,
        "expressionType": expression.type,
        "tagsSet": [],
        "codeSet": [],
        "subVersion": int(time.time() * 1000),
        "classFilterMode": False,
    }
    body = {"clientId": "rmq-spark", "group": group, "subscriptionData": subscription}
    return RemotingCommand(code=codes.CHECK_CLIENT_CONFIG, body=json.dumps(body).encode("utf-8"))


def check_client_config(response: RemotingCommand, expression: FilterExpression, address: str) -> None:
    what = f"filter expression {expression.expression!r}"
    if response.code == codes.SYSTEM_ERROR and "filter" in (response.remark or ""):
        raise InvalidFilterError(
            f"{what}: the broker at {address} does not filter by it ({response.remark}); "
            "SQL92 needs enablePropertyFilter=true on the brokers",
            code=response.code,
        )
    check(response, what, address)


def consumer_list_request(group: str) -> RemotingCommand:
    """GET_CONSUMER_LIST_BY_GROUP: the client ids of the group's consumers connected to this broker."""
    return RemotingCommand(code=codes.GET_CONSUMER_LIST_BY_GROUP, ext_fields={"consumerGroup": group})


def consumer_list(response: RemotingCommand, group: str, address: str) -> list[str]:
    """The ids of a consumer list answer; the broker answers SYSTEM_ERROR "no consumer ..." for none, the RocketMQ 5
    proxy (which knows only its own clients) SYSTEM_ERROR with a NullPointerException on its "consumerGroupInfo"."""
    remark = response.remark or ""
    if response.code == codes.SYSTEM_ERROR and ("no consumer" in remark or '"consumerGroupInfo" is null' in remark):
        return []
    check(response, f"consumers of group {group!r}", address)
    data = parse_loose_json(response.body.decode("utf-8", "replace")) if response.body else {}
    return sorted(data.get("consumerIdList") or [])


def topic_config_request(topic: str, *, mapping: bool = False) -> RemotingCommand:
    """GET_TOPIC_CONFIG: the topic's configuration on this broker, attributes included; with ``mapping`` (``lo``)
    a static topic's queue mapping too."""
    return RemotingCommand(code=codes.GET_TOPIC_CONFIG, ext_fields={"topic": topic, "lo": str(mapping).lower()})


def topic_attributes(response: RemotingCommand, topic: str, address: str) -> dict[str, str]:
    check(response, f"configuration of topic {topic!r}", address)
    data = parse_loose_json(response.body.decode("utf-8", "replace")) if response.body else {}
    return {str(k): str(v) for k, v in (data.get("attributes") or {}).items()}


@dataclass(frozen=True)
class MappingItem:
    """One mapping item of a static topic's logic queue (LogicQueueMappingItem): logic offsets from
    ``logic_offset`` on are stored in queue ``queue_id`` of broker group ``broker_name`` from ``start_offset`` on,
    up to ``end_offset`` (exclusive; -1 while not decided)."""

    broker_name: str
    queue_id: int
    logic_offset: int
    start_offset: int
    end_offset: int


def mapping_items(response: RemotingCommand, topic: str, address: str) -> dict[int, list[MappingItem]]:
    """From a GET_TOPIC_CONFIG answer with the queue mapping, the mapping items of each logic queue this broker
    hosts, oldest first, those whose logic offsets are decided only."""
    check(response, f"queue mapping of topic {topic!r}", address)
    data = parse_loose_json(response.body.decode("utf-8", "replace")) if response.body else {}
    hosted = (data.get("mappingDetail") or {}).get("hostedQueues") or {}
    try:
        return {
            int(logic_id): [
                MappingItem(
                    str(i["bname"]),
                    int(i["queueId"]),
                    int(i["logicOffset"]),
                    int(i.get("startOffset", 0)),
                    int(i.get("endOffset", -1)),
                )
                for i in items
                if int(i.get("logicOffset", -1)) >= 0
            ]
            for logic_id, items in hosted.items()
        }
    except (KeyError, TypeError, ValueError) as e:
        raise RocketMQError(f"queue mapping of topic {topic!r} at {address}: malformed item ({e!r})") from e


def create_topic_request(topic: str, read_queues: int, write_queues: int, perm: int = 6) -> RemotingCommand:
    return RemotingCommand(
        code=codes.UPDATE_AND_CREATE_TOPIC,
        ext_fields={
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": str(read_queues),
            "writeQueueNums": str(write_queues),
            "perm": str(perm),
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        },
    )


@dataclass(frozen=True)
class SendHeader:
    """SendMessageRequestHeaderV2 by field name; on the wire each field travels under its one-letter key."""

    producer_group: str
    topic: str
    queue_id: int
    broker_name: str
    properties: str = ""
    sys_flag: int = 0
    flag: int = 0
    batch: bool = False
    born_timestamp: int = 0
    default_topic: str = "TBW102"
    default_topic_queue_nums: int = 4
    reconsume_times: int = 0
    unit_mode: bool = False

    _WIRE = {
        "producer_group": "a",
        "topic": "b",
        "default_topic": "c",
        "default_topic_queue_nums": "d",
        "queue_id": "e",
        "sys_flag": "f",
        "born_timestamp": "g",
        "flag": "h",
        "properties": "i",
        "reconsume_times": "j",
        "unit_mode": "k",
        "batch": "m",
        "broker_name": "n",
    }

    def ext_fields(self) -> dict[str, str]:
        return {key: _wire_value(getattr(self, name)) for name, key in self._WIRE.items()}


@dataclass(frozen=True)
class EndTransactionHeader:
    """EndTransactionRequestHeader: which half message (its producer group, queue offset in the half topic and
    commit-log offset, which the broker all checks) and whether it is committed or rolled back."""

    producerGroup: str
    tranStateTableOffset: int
    commitLogOffset: int
    commitOrRollback: int
    msgId: str
    transactionId: str
    topic: str
    fromTransactionCheck: bool = False

    def ext_fields(self) -> dict[str, str]:
        return {f.name: _wire_value(getattr(self, f.name)) for f in fields(self)}


def _wire_value(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def send_request(
    group: str, mq: MessageQueue, messages: list[OutgoingMessage], *, sys_flag: int = 0
) -> RemotingCommand:
    """SEND_MESSAGE_V2 for one message, SEND_BATCH_MESSAGE for several (all to one queue; ``sys_flag`` applies to
    every message of a batch, so a compressed batch holds compressed bodies only)."""
    batch = len(messages) > 1
    first = messages[0]
    header = SendHeader(
        group,
        mq.topic,
        mq.queue_id,
        mq.broker_name,
        properties="" if batch else encode_properties(first.wire_properties()),
        sys_flag=sys_flag,
        flag=first.flag,
        batch=batch,
        born_timestamp=int(time.time() * 1000),
    )
    body = encode_batch(messages) if batch else first.body
    return RemotingCommand(
        code=codes.SEND_BATCH_MESSAGE if batch else codes.SEND_MESSAGE_V2, ext_fields=header.ext_fields(), body=body
    )


def encoded_send_request(group: str, mq: MessageQueue, body: bytes, *, sys_flag: int = 0) -> RemotingCommand:
    """SEND_BATCH_MESSAGE of a body already encoded (``send_codec.encode_batch``'s layout, or the native core's)."""
    header = SendHeader(
        group,
        mq.topic,
        mq.queue_id,
        mq.broker_name,
        properties="",
        sys_flag=sys_flag,
        flag=0,
        batch=True,
        born_timestamp=int(time.time() * 1000),
    )
    return RemotingCommand(code=codes.SEND_BATCH_MESSAGE, ext_fields=header.ext_fields(), body=body)


def send_result(
    response: RemotingCommand, mq: MessageQueue, address: str, messages: list[OutgoingMessage]
) -> SendResult:
    check(response, f"send to {mq}", address)
    h = response.ext_fields
    return SendResult(
        msg_id=",".join(m.unique_id or "" for m in messages),
        queue=MessageQueue(mq.topic, mq.broker_name, int(h.get("queueId", mq.queue_id))),
        queue_offset=int(h.get("queueOffset", -1)),
        offset_msg_id=h.get("msgId", ""),
    )


def half_request(group: str, mq: MessageQueue, message: OutgoingMessage, *, sys_flag: int = 0) -> RemotingCommand:
    """SEND_MESSAGE_V2 of a transaction's half message: stored aside by the broker, invisible to consumers until
    END_TRANSACTION commits it (as TransactionMQProducer sends it)."""
    props = {**message.wire_properties(), PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: group}
    header = SendHeader(
        group,
        mq.topic,
        mq.queue_id,
        mq.broker_name,
        properties=encode_properties(props),
        sys_flag=sys_flag | TRANSACTION_PREPARED_TYPE,
        flag=message.flag,
        born_timestamp=int(time.time() * 1000),
    )
    return RemotingCommand(code=codes.SEND_MESSAGE_V2, ext_fields=header.ext_fields(), body=message.body)


def half_result(response: RemotingCommand, mq: MessageQueue, address: str, msg_id: str) -> HalfMessage:
    """The handle of the stored half message whose UNIQ_KEY is ``msg_id``. Its commit-log offset is the tail of the
    broker's offset message id."""
    check(response, f"send of a transactional half message to {mq}", address)
    h = response.ext_fields
    try:
        return HalfMessage(
            queue=mq,
            msg_id=msg_id,
            transaction_id=h.get("transactionId") or "",
            commit_log_offset=commit_log_offset(h["msgId"]),
            half_queue_offset=int(h["queueOffset"]),
        )
    except (KeyError, ValueError) as e:
        raise RocketMQError(
            f"send of a half message to {mq} at {address}: the answer has no valid msgId and queueOffset ({h!r})"
        ) from e


def end_transaction_request(group: str, half: HalfMessage, commit: bool) -> RemotingCommand:
    """END_TRANSACTION: commit (the message appears in its queue) or roll back one half message."""
    header = EndTransactionHeader(
        producerGroup=group,
        tranStateTableOffset=half.half_queue_offset,
        commitLogOffset=half.commit_log_offset,
        commitOrRollback=TRANSACTION_COMMIT_TYPE if commit else TRANSACTION_ROLLBACK_TYPE,
        msgId=half.msg_id,
        transactionId=half.transaction_id or half.msg_id,
        topic=half.queue.topic,
    )
    return RemotingCommand(code=codes.END_TRANSACTION, ext_fields=header.ext_fields())


def end_transaction_result(response: RemotingCommand, half: HalfMessage, commit: bool, address: str) -> None:
    check(response, f"{'commit' if commit else 'rollback'} of half message {half.msg_id} for {half.queue}", address)
