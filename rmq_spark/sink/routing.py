"""Which queue each message goes to: the sharding key's queue (as the Java producer's SelectMessageQueueByHash
picks it, so Java and Spark producers of one key agree), an explicit brokerName/queueId, or round robin."""
from __future__ import annotations

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import TopicNotFoundError
from rmq_spark.client.model import MessageQueue


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


class Router:
    """Queues of the topics a task writes to, looked up once per topic; round robin starts at ``start`` (the task's
    partition id), so a replayed task routes its rows as before."""

    def __init__(self, client: BaseClient, start: int = 0) -> None:
        self._client = client
        self._queues: dict[str, list[MessageQueue]] = {}
        self._next = start

    def write_queues(self, topic: str) -> list[MessageQueue]:
        queues = self._queues.get(topic)
        if queues is None:
            try:
                queues = self._client.route(topic).write_queues()
            except TopicNotFoundError as e:
                raise TopicNotFoundError(f"cannot write to topic {topic!r}: the name servers have no route for it; "
                                         "create the topic (mqadmin updateTopic) or check its name") from e
            if not queues:
                raise TopicNotFoundError(f"cannot write to topic {topic!r}: it has no writable queue now (its "
                                         "brokers are read-only, down or without a master)")
            # the Java producer orders publish queues by broker name, then queue id, as the route lists them
            self._queues[topic] = queues
        return queues

    def route(self, topic: str, sharding_key: str | None = None, broker: str | None = None,
              queue_id: int | None = None) -> MessageQueue:
        queues = self.write_queues(topic)
        if broker is not None or queue_id is not None:
            mq = MessageQueue(topic, broker or "", -1 if queue_id is None else queue_id)
            if mq not in queues:
                raise ValueError(f"row names queue {broker}/{queue_id} of topic {topic!r}, which is not one of its "
                                 "writable queues now: " + ", ".join(q.key for q in queues))
            return mq
        if sharding_key is not None:
            return queue_for_key(sharding_key, queues)
        mq = queues[self._next % len(queues)]
        self._next += 1
        return mq
