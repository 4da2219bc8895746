"""RocketMQ 5.5's LiteTopic (message.type=LITE): its messages cannot be read or written by queue offset, so every
use of one is refused by name, at planning and before a sink's first send."""

from __future__ import annotations

from rmq_spark.client import hints
from rmq_spark.client.errors import RETRYABLE, UnsupportedError
from rmq_spark.client.model import MessageType


def lite_refusal(topic: str) -> UnsupportedError:
    """The error that refuses LiteTopic ``topic``."""
    return UnsupportedError(f"topic {topic!r} is {hints.LITE_TOPIC}")


def refuse_lite(client, topic: str) -> None:
    """UnsupportedError when ``topic`` is a LiteTopic. A broker that cannot tell now (away) refuses nothing: its
    queues are then unavailable to the query anyway, and their first pull meets the check again at planning."""
    try:
        kind = client.topic_message_type(topic)
    except RETRYABLE:
        return
    if kind is MessageType.LITE:
        raise lite_refusal(topic)
