"""Where each queue of a batch's start ends, and whether it may be read there now: one answer per queue
(``QueueEnd``), the one place the stream reader asks (docs/DESIGN.md §10). It puts together what the queue watch
sees (the routes, the latest offsets, which of them a slave answered, which brokers are silent: ``queue_watch.py``)
and what the driver has proven about queues that left the route (``vanished.py``), so that every rule of the fault
model that decides whether a queue is read, waits or leaves the offsets is applied here, once."""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from rmq_spark.client.base import BaseClient
from rmq_spark.client.model import MessageQueue
from rmq_spark.options import SourceOptions
from rmq_spark.source.queue_watch import QueueWatch
from rmq_spark.source.vanished import VanishedQueues


class Access(enum.Enum):
    """Whether a queue of a batch's start may be read to its end now, and if not, why."""

    READABLE = "readable"  # read to the end the watch knows
    UNAVAILABLE = "unavailable"  # its broker is missing from the route or silent, or no master judged it: it waits
    DRAINED = "drained"  # left the route after it was read to its end: it keeps its offset
    GONE = "gone"  # leaves the offsets: proven lost (after the data-loss rule), or drained of a topic not named now
    SLAVE_BEHIND = "slave behind"  # only a slave answered, with an end below the query's offset: wait for it


@dataclass(frozen=True, slots=True)
class QueueEnd:
    """One queue's answer: the end offset the watch last knew (None when no broker ever answered it) and whether
    the queue may be read to it now."""

    end: int | None
    access: Access


class QueueEnds(Mapping[MessageQueue, QueueEnd]):
    """The answer for every queue of one batch's start, read at once: ``latest`` is the watch's own map of end
    offsets, which its next poll moves on. Most queues are readable: only the others are stored (``barred``), so the
    usual answer costs no object per queue until one is asked for."""

    def __init__(
        self,
        begin: Mapping[MessageQueue, int],
        latest: Mapping[MessageQueue, int],
        barred: dict[MessageQueue, Access],
    ) -> None:
        self._begin, self.latest, self.barred = begin, latest, barred

    def __getitem__(self, mq: MessageQueue) -> QueueEnd:
        if mq not in self._begin:
            raise KeyError(mq)
        return QueueEnd(self.latest.get(mq), self.barred.get(mq, Access.READABLE))

    def __iter__(self) -> Iterator[MessageQueue]:
        return iter(self._begin)

    def __len__(self) -> int:
        return len(self._begin)

    @property
    def unavailable(self) -> set[MessageQueue]:
        """The queues that wait for their broker."""
        return {mq for mq, access in self.barred.items() if access is Access.UNAVAILABLE}


class QueueAccess:
    """Answers, for the queues of a batch's start, where each ends and whether it may be read now, from the queue
    watch and the verdicts kept on queues that left the route."""

    def __init__(self, client: BaseClient, options: SourceOptions, watch: QueueWatch) -> None:
        self.watch = watch
        self._vanished = VanishedQueues(client, options)

    def ends(self, begin: Mapping[MessageQueue, int]) -> QueueEnds:
        """Each queue of ``begin``'s ``QueueEnd``. A queue the watch finds out of the route is judged by its master
        (``VanishedQueues.judge``: the data-loss rule, which raises under failOnDataLoss, applies there); a queue
        whose end only a slave answered is read to it unless that end is below the queue's offset in ``begin``."""
        watch = self.watch
        drained, waiting = self._vanished.remembered(watch.queue_set, begin)
        judged = drained | waiting
        unavailable, vanished = watch.classify([mq for mq in begin if mq not in judged] if judged else begin)
        unproven, proven, gone = self._vanished.judge(watch, vanished, begin)
        barred = dict.fromkeys(drained | proven, Access.DRAINED)
        barred.update(dict.fromkeys(unavailable | waiting | unproven, Access.UNAVAILABLE))
        barred.update(dict.fromkeys(gone, Access.GONE))
        latest = watch.latest
        for mq in watch.replica:
            b = begin.get(mq)
            if b is not None and mq not in barred and latest.get(mq, b) < b:
                barred[mq] = Access.SLAVE_BEHIND  # a lagging slave: wait for it to catch up
        return QueueEnds(begin, latest, barred)
