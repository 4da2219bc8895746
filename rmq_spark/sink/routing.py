"""Which queue each message goes to: the sharding key's queue (as the Java producer's SelectMessageQueueByHash
picks it, so Java and Spark producers of one key agree), an explicit brokerName/queueId, or round robin."""

from __future__ import annotations

import pyarrow as pa

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import TopicNotFoundError
from rmq_spark.client.model import MessageQueue
from rmq_spark.sink.row_rules import RowRule


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, in int32)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def queue_for_key(key: str, queues: list[MessageQueue]) -> MessageQueue:
    """SelectMessageQueueByHash: ``abs(hashCode % n)`` (Java's remainder) over the topic's write queues in route
    order, which equals ``abs(hashCode) % n``."""
    return queues[abs(java_string_hash(key)) % len(queues)]


def _named(topic: str, broker: str | None, queue_id: int | None) -> MessageQueue:
    return MessageQueue(topic, broker or "", -1 if queue_id is None else queue_id)


class Router:
    """Queues of the topics a task writes to, looked up once per topic; round robin starts at ``start`` (the task's
    partition id), so a replayed task routes its rows as before. ``turn`` is the next round-robin position (the
    native encoder moves it too)."""

    def __init__(self, client: BaseClient, start: int = 0) -> None:
        self._client = client
        self._queues: dict[str, list[MessageQueue]] = {}
        self.turn = start

    def write_queues(self, topic: str) -> list[MessageQueue]:
        queues = self._queues.get(topic)
        if queues is None:
            try:
                queues = self._client.route(topic).write_queues()
            except TopicNotFoundError as e:
                raise TopicNotFoundError(
                    f"cannot write to topic {topic!r}: the name servers have no route for it; "
                    "create the topic (mqadmin updateTopic) or check its name"
                ) from e
            if not queues:
                raise TopicNotFoundError(
                    f"cannot write to topic {topic!r}: it has no writable queue now (its "
                    "brokers are read-only, down or without a master)"
                )
            # the Java producer orders publish queues by broker name, then queue id, as the route lists them
            self._queues[topic] = queues
        return queues

    def named_queues(self, default_topic: str | None) -> RowRule:
        """The rule that a row naming a queue (brokerName, queueId) names one of its topic's writable queues now."""

        def bad(batch: pa.RecordBatch) -> int:
            names = batch.schema.names
            if "brokerName" not in names:
                return 0
            n = len(batch)
            topics = batch.column("topic").to_pylist() if "topic" in names else [default_topic] * n
            named = zip(
                topics, batch.column("brokerName").to_pylist(), batch.column("queueId").to_pylist(), strict=True
            )
            return sum(
                1
                for topic, broker, queue_id in named
                if topic is not None
                and (broker is not None or queue_id is not None)
                and _named(topic, broker, queue_id) not in self.write_queues(topic)
            )

        return RowRule(
            "a brokerName and queueId that are not one of the writable queues of their topic now",
            "name a queue of the topic's route (mqadmin topicRoute), or leave both null to spread the rows round robin",
            bad,
        )

    def route(
        self, topic: str, sharding_key: str | None = None, broker: str | None = None, queue_id: int | None = None
    ) -> MessageQueue:
        queues = self.write_queues(topic)
        if broker is not None or queue_id is not None:
            return _named(topic, broker, queue_id)  # one of ``queues``: rows keep ``named_queues`` first
        if sharding_key is not None:
            return queue_for_key(sharding_key, queues)
        mq = queues[self.turn % len(queues)]
        self.turn += 1
        return mq
