"""The key an exactly-once streaming write puts on each row, so that the recovery of a batch cut by a crash can
tell which of the replayed rows are already stored. A key names the micro-batch and the row's content, never the
task: a replay with other partitioning (another minPartitions, a cluster of another size) yields the same keys.
Identical rows share a key; the recovery counts them."""

from __future__ import annotations

import hashlib

from rmq_spark.client.model import PROPERTY_UNIQ_KEY, OutgoingMessage

ROW_KEY_PROPERTY = "rmqSparkRow"


def batch_prefix(group: str, batch_id: int) -> str:
    """The start of the row keys of micro-batch ``batch_id`` written under producer group ``group``."""
    return f"{group}/{batch_id}/"


def row_key(group: str, batch_id: int, topic: str, m: OutgoingMessage, queue: tuple[str, int] | None = None) -> str:
    """The key of a row of micro-batch ``batch_id``: its topic, content and sharding key, and ``queue`` (broker
    group, queue id) where the row names its queue itself."""
    h = hashlib.blake2b(digest_size=12)
    parts = (
        topic,
        m.tags or "",
        " ".join(m.keys),
        str(m.flag),
        str(m.deliver_time_ms),
        m.sharding_key or "",
        "" if queue is None else f"{queue[0]}/{queue[1]}",
    )
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    for k in sorted(m.properties):
        if k not in (PROPERTY_UNIQ_KEY, ROW_KEY_PROPERTY):
            h.update(f"{k}\x01{m.properties[k]}\x02".encode())
    h.update(m.body)
    return batch_prefix(group, batch_id) + h.hexdigest()
