"""Turn an error response into the matching ``RocketMQError`` subclass, in one place."""

from __future__ import annotations

from rmq_spark.client import hints
from rmq_spark.client.errors import (
    AuthError,
    BrokerBusyError,
    BrokerError,
    InvalidFilterError,
    MessageRejectedError,
    RocketMQError,
    TopicNotFoundError,
)
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.frame import RemotingCommand

_HINTS = {
    codes.TOPIC_NOT_EXIST: (TopicNotFoundError, hints.TOPIC),
    codes.NO_PERMISSION: (AuthError, hints.AUTH),
    codes.USER_NOT_EXIST: (AuthError, hints.UNKNOWN_USER),
    codes.SUBSCRIPTION_GROUP_NOT_EXIST: (BrokerError, hints.GROUP),
    codes.SUBSCRIPTION_PARSE_FAILED: (InvalidFilterError, hints.FILTER),
    codes.REQUEST_CODE_NOT_SUPPORTED: (BrokerError, hints.NOT_REMOTING),
    codes.MESSAGE_ILLEGAL: (MessageRejectedError, hints.TOO_LARGE),
    **{code: (BrokerBusyError, hints.BUSY) for code in codes.BACK_OFF},
}


def check(response: RemotingCommand, what: str, address: str, *ok: int) -> RemotingCommand:
    """Return ``response`` when its code is SUCCESS or one of ``ok``; else raise the mapped error."""
    if response.code == codes.SUCCESS or response.code in ok:
        return response
    raise error_for(response, what, address)


def error_for(response: RemotingCommand, what: str, address: str) -> RocketMQError:
    cls, hint = _HINTS.get(response.code, (BrokerError, ""))
    lines = (response.remark or "").strip().splitlines()
    remark = lines[0][:300] if lines else ""  # a Java exception's first line; the rest is its stack or an FAQ link
    if "timer message is not enabled" in remark:
        cls, hint = MessageRejectedError, hints.TIMER_OFF
    if "TopicMessageType validate failed" in remark:  # the proxy's answer, under the code of a message too large
        cls, hint = MessageRejectedError, hints.MESSAGE_TYPE
    if cls is BrokerError and ("signature" in remark.lower() or "authenticat" in remark.lower()):
        cls, hint = AuthError, "check accessKey/secretKey"
    elif cls is BrokerError and "AclException" in remark:  # RocketMQ 4.x answers an ACL refusal as SYSTEM_ERROR
        cls, hint = AuthError, hints.AUTH
    message = f"{what} failed at {address}" + (f": {hint}" if hint else "")
    return cls(message, code=response.code, remark=remark)
