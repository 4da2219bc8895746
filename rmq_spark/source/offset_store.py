"""The driver's offset table for a consumer group, mirrored to the brokers as RocketMQ's RemoteBrokerOffsetStore
does: ``update`` changes memory, ``persist_all`` sends UPDATE_CONSUMER_OFFSET for what changed. It is fed only from
Spark's committed batches, so the broker never runs ahead of what the sink has stored; it starts from the group's
stored offsets and only moves them forward, so a group is never rewound."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.model import MessageQueue
from rmq_spark.client.outages import broker_group, master_of

log = logging.getLogger(__name__)


class OffsetStore:
    """Next-offset-to-consume per queue for ``group``; thread-safe."""

    def __init__(self, client: BaseClient, group: str) -> None:
        self.client = client
        self.group = group
        self._table: dict[MessageQueue, int] = {}
        self._persisted: dict[MessageQueue, int] = {}
        self._loaded: set[MessageQueue] = set()
        self._lock = threading.Lock()

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        with self._lock:
            current = self._table.get(mq)
            if current is None or not increase_only or offset > current:
                self._table[mq] = offset

    def update_all(self, offsets: Mapping[MessageQueue, int], *, increase_only: bool = True) -> None:
        for mq, offset in offsets.items():
            self.update(mq, offset, increase_only=increase_only)

    def load(self, queues: Iterable[MessageQueue]) -> None:
        """Read the group's stored offsets of the queues not loaded yet, so that ``update`` never moves them back
        (queues whose broker does not answer now are loaded at a later call, tried again every few seconds)."""
        with self._lock:
            todo = [mq for mq in queues if mq not in self._loaded]
        todo = self._due(todo, broker_group)
        if not todo:
            return
        try:
            stored = self.client.query_consumer_offsets(self.group, todo, partial=True)
        except RocketMQError as e:
            log.warning("could not read the offsets of group %r (tried again in a few seconds): %s", self.group, e)
            return
        with self._lock:
            for mq, offset in stored.items():
                self._loaded.add(mq)
                if offset is not None and offset >= 0 and offset > self._table.get(mq, -1):
                    self._table[mq] = self._persisted[mq] = offset
        self._report(todo, stored.failed, broker_group, "its stored offsets are read when it is back")

    def settled(self) -> bool:
        """Whether every offset held was loaded from the brokers first and is stored."""
        with self._lock:
            loaded = self._loaded.issuperset(self._table)
        return loaded and not self.unstored()

    def unstored(self) -> dict[MessageQueue, int]:
        """The offsets held that the brokers have not stored yet."""
        with self._lock:
            return {mq: o for mq, o in self._table.items() if self._persisted.get(mq) != o}

    def persist_all(self) -> bool:
        """Send every offset that changed since the last successful persist, each to its broker's master; True
        when all were stored. Offsets whose master is unavailable stay pending, tried again every few seconds (the
        outage is logged once); it never raises."""
        changed = self.unstored()
        due = {mq: changed[mq] for mq in self._due(list(changed), master_of)}
        if not due:
            return not changed
        failed: dict[MessageQueue, Exception] = {}
        stored = 0
        for wave in self._waves(due):
            held_back = {_table_of(mq) for mq in failed}
            wave = {mq: o for mq, o in wave.items() if _table_of(mq) not in held_back}
            if not wave:
                continue
            try:
                answers = self.client.update_consumer_offsets(self.group, wave, partial=True)
            except RocketMQError as e:
                log.warning(
                    "could not mirror %d offsets of group %r to the brokers (tried again in a few seconds): %s",
                    len(wave),
                    self.group,
                    e,
                )
                return False
            with self._lock:
                self._persisted.update({mq: wave[mq] for mq in answers})
            stored += len(answers)
            failed.update(answers.failed)
        self._report(list(due), failed, master_of, f"offsets of group {self.group!r} are kept until it is back")
        return stored == len(changed)

    def _waves(self, due: dict[MessageQueue, int]) -> list[dict[MessageQueue, int]]:
        """``due`` in the order a broker can take it. A broker makes a group's offset table of a topic with a get and
        a put (ConsumerOffsetManager.commitOffset), so two first updates of one table at once can keep only one of
        them: a table's first offset goes alone (one per broker and topic in the first wave), its others after it,
        all at once. A static topic's logic queue goes into the table of whichever broker leads it, which the store
        does not know: the logic queues never stored yet go one per topic in each wave."""
        with self._lock:
            made = {_table_of(mq) for mq in self._persisted}
        waves: list[dict[MessageQueue, int]] = [{}]
        rest: dict[MessageQueue, int] = {}
        fresh_logic: dict[str, int] = {}  # per topic: its logic queues never stored, so far
        for mq, offset in due.items():
            table = _table_of(mq)
            if table in made:
                rest[mq] = offset
            elif mq.logic:
                wave = fresh_logic[mq.topic] = fresh_logic.get(mq.topic, -1) + 1
                if wave == len(waves):
                    waves.append({})
                waves[wave][mq] = offset
            else:
                made.add(table)
                waves[0][mq] = offset
        return [w for w in (*waves, rest) if w]

    # -- brokers that are away ---------------------------------------------------------------------------------
    def _due(self, queues: list[MessageQueue], who: Callable[[str], str]) -> list[MessageQueue]:
        """The queues whose broker (as ``who`` names it) may be asked now: one that is away, every few seconds."""
        due = {b for b in {mq.broker_name for mq in queues} if self.client.outages.due(who(b))}
        return [mq for mq in queues if mq.broker_name in due]

    def _report(
        self,
        asked: list[MessageQueue],
        failed: Mapping[MessageQueue, Exception],
        who: Callable[[str], str],
        consequence: str,
    ) -> None:
        self.client.outages.report(
            (mq.broker_name for mq in asked), {mq.broker_name: e for mq, e in failed.items()}, who, consequence
        )


def _table_of(mq: MessageQueue) -> tuple[str, str, int]:
    """The broker's offset table ``mq``'s offset goes into: one per topic and group on each broker; a logic queue's
    is its leader's, known only to the brokers, so each logic queue stands for its own."""
    return mq.broker_name, mq.topic, mq.queue_id if mq.logic else -1
