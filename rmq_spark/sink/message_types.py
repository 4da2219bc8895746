"""RocketMQ 5's rule for a topic's message.type, checked by the sink before a topic's first send of each kind of
message: a topic takes messages of its own type, a MIXED topic every type. The proxy refuses other sends; brokers
reached over remoting store them, so the sink refuses them itself, naming the topic, its type and the fix."""

from __future__ import annotations

from rmq_spark.client.base import BaseClient
from rmq_spark.client.defaults import DEFAULT_RETRY_TIMEOUT
from rmq_spark.client.lite_topics import lite_refusal
from rmq_spark.client.model import MessageType, OutgoingMessage
from rmq_spark.options import OptionError
from rmq_spark.sink.transaction_check import refuse_unended_transactions

# what makes a row of each kind, and how to write it as another
_WHY = {
    MessageType.TRANSACTION: (
        "deliveryGuarantee=exactly_once sends half messages (TRANSACTION)",
        "use deliveryGuarantee=at_least_once",
    ),
    MessageType.DELAY: ("rows with a deliverTimeMs are timer messages (DELAY)", "leave deliverTimeMs null"),
    MessageType.FIFO: (
        "rows with a shardingKey are ordered messages of that message group (FIFO)",
        "drop the shardingKey column",
    ),
    MessageType.NORMAL: (
        "rows without a shardingKey or deliverTimeMs are NORMAL messages",
        "give every row a shardingKey (FIFO) or write to another topic",
    ),
}


def refuse_timers(client: BaseClient, topic: str) -> None:
    """OptionError when ``topic``'s brokers have no timer messages (RocketMQ 4.x stores a row with a deliverTimeMs
    as a plain message, delivered at once)."""
    release = client.v4_release(topic)
    if release is not None:
        raise OptionError(
            f"topic {topic!r} is on RocketMQ {release} brokers, which have no timer messages (they "
            "came with RocketMQ 5): a row with a deliverTimeMs would be delivered at once. Leave "
            "deliverTimeMs null (drop the column), or write to a topic on RocketMQ 5 brokers"
        )


class TopicTypes:
    """The message.type of each topic a task writes to, asked once per topic (None where the broker has none:
    nothing to check); in a transactional write (of ``group``), also whether the topic's servers end transactions
    (asked for up to ``retry_timeout`` seconds, option brokerRetryTimeoutMs; a check that gave up is not kept)."""

    def __init__(
        self, client: BaseClient, *, transactional: bool, group: str, retry_timeout: float = DEFAULT_RETRY_TIMEOUT
    ) -> None:
        self._client = client
        self._transactional = transactional
        self._group = group
        self._retry_timeout = retry_timeout
        self._types: dict[str, MessageType | None] = {}
        self._taken: set[tuple[str, MessageType]] = set()

    def check(self, topic: str, message: OutgoingMessage) -> None:
        """OptionError when ``topic`` does not take ``message``'s kind of message."""
        self.check_kind(topic, message.message_type)

    def check_kind(self, topic: str, kind: MessageType) -> None:
        """OptionError when ``topic`` does not take messages of ``kind`` (TRANSACTION in a transactional write)."""
        kind = MessageType.TRANSACTION if self._transactional else kind
        if (topic, kind) in self._taken:
            return
        if topic not in self._types:
            self._types[topic] = self._client.topic_message_type(topic)
        if kind is MessageType.DELAY:
            refuse_timers(self._client, topic)
        declared = self._types[topic]
        if declared is MessageType.LITE:
            raise lite_refusal(topic)
        if declared is not None and not declared.takes(kind):
            why, other = _WHY[kind]
            raise OptionError(
                f"topic {topic!r} has message.type={declared.value}, which does not take {kind.value} "
                f"messages: {why}. Create the topic with message.type={kind.value} or MIXED, or "
                f"{other}"
            )
        if kind is MessageType.TRANSACTION:
            refuse_unended_transactions(self._client, topic, self._group, self._retry_timeout)
        self._taken.add((topic, kind))
