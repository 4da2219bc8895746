"""The stream driver's verdicts on the queues that left the route (docs/DESIGN.md §10), kept between batches. Only
the end offset a master answers once the newest route no longer has a queue proves it *drained* (read to its end:
it keeps its offset in every batch's end, so a topic that grows back resumes it there; RocketMQ keeps the consume
queues of a shrunk topic) or *lost* (the data-loss rule). Only a group the newest route lists is asked (a route read
for the verdict, never the client's cached one, which may still list a group the topic was deleted from: its answer
about a queue it no longer has proves nothing). A slave's answer (it may lag behind its master) or none proves
nothing: the queue is unavailable, its offset carried, and its master is asked again every few seconds. The one
answer per queue that the stream reader plans with is ``queue_access.py``'s, which asks this module."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from rmq_spark.client.base import Answers, BaseClient
from rmq_spark.client.errors import RETRYABLE, RocketMQError
from rmq_spark.client.model import MessageQueue, TopicRoute
from rmq_spark.client.outages import master_of
from rmq_spark.options import SourceOptions
from rmq_spark.source.planning import data_loss, reads_queue
from rmq_spark.source.queue_watch import QueueWatch

log = logging.getLogger(__name__)

WAITS = "its queues that left the route wait until it tells whether they were read to their end"
SLAVE = "only a slave answered, which may lag behind its master"
UNLISTED = "the topic's route does not list it now (the topic was deleted there, or the group is away)"


class VanishedQueues:
    """What the driver has proven about the queues of a query that are no longer in the route."""

    def __init__(self, client: BaseClient, options: SourceOptions) -> None:
        self.client, self.options = client, options
        self._drained: dict[MessageQueue, int] = {}  # proven read to its end, at this offset
        self._waiting: set[MessageQueue] = set()  # out of the route, neither proven drained nor lost

    def remembered(
        self, in_route: frozenset[MessageQueue], begin: Mapping[MessageQueue, int]
    ) -> tuple[set[MessageQueue], set[MessageQueue]]:
        """(drained, waiting) among the queues of ``begin``, from the verdicts kept: those proven read to their end
        at their offset in ``begin``, and those no master has judged yet whose master is not due to be asked again.
        A verdict stands until the queue is back in the route (``in_route``): then it is dropped."""
        drained: set[MessageQueue] = set()
        waiting: set[MessageQueue] = set()
        if self._drained:
            self._drained = {mq: o for mq, o in self._drained.items() if mq not in in_route}
            drained = {mq for mq, o in self._drained.items() if begin.get(mq) == o}
        if self._waiting:
            self._waiting -= in_route
            waiting = self._waiting & begin.keys()
            due = {b for b in {mq.broker_name for mq in waiting} if self.client.outages.due(master_of(b))}
            waiting = {mq for mq in waiting if mq.broker_name not in due}
        return drained, waiting

    def judge(
        self, watch: QueueWatch, vanished: set[MessageQueue], begin: Mapping[MessageQueue, int]
    ) -> tuple[set[MessageQueue], set[MessageQueue], set[MessageQueue]]:
        """(unproven, drained, gone) among ``vanished`` (queues of ``begin`` that ``watch.classify`` found out of
        the route), from the end offsets their masters answer now; only the queues whose group the topic's route read
        now lists are asked. Unproven: no master answered (unavailable, asked again on the outage clock); drained:
        proven read to their end, kept at their offset; gone: they leave the offsets (proven lost, after the
        data-loss rule, which raises under failOnDataLoss; or drained of a topic the options no longer name)."""
        if not vanished:
            return set(), set(), set()
        listed = self._listed(watch, vanished)
        try:
            ends = self.client.max_offsets(sorted(listed), partial=True) if listed else Answers()
        except RocketMQError as e:  # e.g. the gRPC gateway refuses a queue outside the route
            ends = Answers(failed={mq: e for mq in listed})
        masters = {mq: o for mq, o in ends.items() if mq not in ends.replica}
        unproven = vanished - masters.keys()
        failed = {mq.broker_name: ends.failed.get(mq, SLAVE if mq in listed else UNLISTED) for mq in unproven}
        self.client.outages.report((mq.broker_name for mq in vanished), failed, master_of, WAITS)
        self._waiting = (self._waiting - vanished) | unproven
        drained = {mq for mq, o in masters.items() if o == begin[mq]}
        for mq in sorted(drained):
            log.info("rocketmq source: %s left the topic route after it was read to its end (offset %d)", mq, begin[mq])
        kept = {mq for mq in drained if reads_queue(self.options, mq)}
        self._drained.update({mq: begin[mq] for mq in kept})
        lost = sorted(masters.keys() - drained)
        if lost:
            what = (
                "queues "
                + ", ".join(f"{mq} (read to {begin[mq]}, end {masters[mq]})" for mq in lost)
                + " are no longer in the topic route although their masters are up (the topic shrank or was "
                "deleted); messages not yet read from them may be lost"
            )
            data_loss(what, self.options.fail_on_data_loss, remedy="go on without them", action="going on without them")
        return unproven, kept, (drained - kept) | set(lost)

    @staticmethod
    def _listed(watch: QueueWatch, vanished: set[MessageQueue]) -> set[MessageQueue]:
        """The queues of ``vanished`` whose group (a logic queue's leader) the route of their topic, read now, lists
        with an address; none of a topic whose route cannot be read now."""
        routes: dict[str, TopicRoute | None] = {}
        for topic in {mq.topic for mq in vanished}:
            try:
                routes[topic] = watch.route_now(topic)
            except RETRYABLE:
                routes[topic] = None  # cannot tell now: wait
        listed = set()
        for mq in vanished:
            route = routes[mq.topic]
            broker = route.broker_of(mq) if route is not None else None
            if broker is not None and broker.addresses:
                listed.add(mq)
        return listed
