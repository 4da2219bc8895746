"""A consumer group's committed offsets on the brokers: queried and stored for many queues at once (one fan-out),
as RocketMQ's RemoteBrokerOffsetStore does. A broker that does not know the group yet has it created the way brokers
create groups, by a pull in its name, and the offset stored again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from rmq_spark.client import hints
from rmq_spark.client.errors import RETRYABLE, BrokerError, RocketMQError
from rmq_spark.client.fan_out import Answers, gather
from rmq_spark.client.model import MessageQueue
from rmq_spark.client.transport import Bursts, Call


class OffsetStore(Bursts, Protocol):
    """The requests on a group's offsets, and the one that creates the group on a broker."""

    def _consumer_offset_call(self, group: str, mq: MessageQueue) -> Call: ...

    def _store_offset_call(self, group: str, mq: MessageQueue, offset: int) -> Call: ...

    def _create_group(self, group: str, mq: MessageQueue, offset: int) -> None: ...


def query_consumer_offsets(
    client: OffsetStore, group: str, mqs: Iterable[MessageQueue], *, partial: bool = False
) -> Answers:
    """The group's committed (next-to-consume) offset per queue, None where the group has none."""
    return gather(
        client,
        f"offsets of consumer group {group!r}",
        mqs,
        lambda mq: client._consumer_offset_call(group, mq),
        partial=partial,
    )


def update_consumer_offsets(
    client: OffsetStore, group: str, offsets: Mapping[MessageQueue, int], *, partial: bool = False
) -> Answers:
    """Store the group's next-to-consume offset for each queue on its broker's master (as
    RemoteBrokerOffsetStore.persistAll does). A group the broker does not know yet is created the way brokers
    create groups: by a pull in its name. With ``partial``, queues whose master is unavailable are left in
    ``Answers.failed`` (nothing stored for them)."""
    stored = gather(
        client,
        f"offset update of consumer group {group!r}",
        offsets,
        lambda mq: client._store_offset_call(group, mq, offsets[mq]),
        partial=partial,
    )
    for mq in [mq for mq, ok in stored.items() if not ok]:
        try:
            client._create_group(group, mq, offsets[mq])
            ok = client._store_offset_call(group, mq, offsets[mq]).result()
        except RETRYABLE as e:
            if not partial:
                raise
            del stored[mq]
            stored.failed[mq] = e
            continue
        except RocketMQError as e:
            raise RocketMQError(
                f"consumer group {group!r} does not exist on broker {mq.broker_name} and could "
                f"not be created by a pull ({e}); {hints.GROUP}",
                code=e.code,
                remark=e.remark,
            ) from e
        if not ok:
            raise BrokerError(f"update of group {group!r} offset on {mq} failed: {hints.GROUP}")
        stored[mq] = True
    return stored
