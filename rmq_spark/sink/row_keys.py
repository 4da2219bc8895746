"""The key an exactly-once streaming write puts on each row, so that the recovery of a batch cut by a crash can
tell which of the replayed rows are already stored. A key names the query, the micro-batch and the row's content,
never the task: a replay with other partitioning (another minPartitions, a cluster of another size) yields the same
keys. Identical rows share a key; the recovery counts them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from rmq_spark.client.model import PROPERTY_UNIQ_KEY, OutgoingMessage

ROW_KEY_PROPERTY = "rmqSparkRow"
_DIGEST_BITS = 96  # a row's content hash is 12 bytes


def query_tag(query: str) -> str:
    """A short digest of a streaming query's id: enough to keep two queries' rows apart in one producer group."""
    return hashlib.blake2b(query.encode("utf-8"), digest_size=4).hexdigest()


def batch_prefix(group: str, query: str | None, batch_id: int) -> str:
    """The start of the row keys of micro-batch ``batch_id`` of ``query`` under producer group ``group``; ``None``
    for the keys of releases that did not name the query."""
    return f"{group}/{batch_id}/" if query is None else f"{group}/{query_tag(query)}/{batch_id}/"


def content_of(key: str) -> str:
    """The content hash at the end of a row key."""
    return key.rpartition("/")[2]


def row_key(
    group: str, query: str, batch_id: int, topic: str, m: OutgoingMessage, queue: tuple[str, int] | None = None
) -> str:
    """The key of a row of micro-batch ``batch_id`` of ``query``: its topic, content and sharding key, and ``queue``
    (broker group, queue id) where the row names its queue itself."""
    h = hashlib.blake2b(digest_size=_DIGEST_BITS // 8)
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
    return batch_prefix(group, query, batch_id) + h.hexdigest()


@dataclass(frozen=True)
class RowsDigest:
    """How many rows a batch has and a digest of their contents that ignores their order: two runs of a batch are
    the same rows when both match, whatever their partitioning."""

    count: int
    digest: str

    def __str__(self) -> str:
        return f"{self.count} rows, digest {self.digest}"


def rows_digest(keys: Iterable[str]) -> RowsDigest:
    """The digest of the rows with ``keys``: the count and the sum of their content hashes."""
    count, total = 0, 0
    for key in keys:
        count += 1
        total += int(content_of(key), 16)
    return RowsDigest(count, format(total % (1 << _DIGEST_BITS), "024x"))
