"""Numbered messages for the stock tests, sent with the project's client."""

from __future__ import annotations

from rmq_spark.client.model import OutgoingMessage
from rmq_spark.client.remoting.client import RemotingClient

BATCH = 100


def send_numbered(name_server: str, topic: str, per_queue: int) -> int:
    """Send ``per_queue`` messages to every queue of ``topic``, each with its number in property ``n`` (unique over
    the topic) and in its body; returns how many were sent."""
    with RemotingClient(name_server) as client:
        n = 0
        for mq in client.queues(topic, refresh=True):
            for start in range(0, per_queue, BATCH):
                batch = [
                    OutgoingMessage(body=f"message {n + i}".encode(), properties={"n": str(n + i)})
                    for i in range(min(BATCH, per_queue - start))
                ]
                client.send(mq, batch)
                n += len(batch)
        return n
