"""The one fan-out of per-queue requests and its partial-failure policy: every queue's request in flight at once, a
queue whose broker does not answer asked once more on its own, and what still fails either left in
``Answers.failed`` (with ``partial``) or raised as one BrokerUnavailableError naming the brokers. Offsets, time
searches and consumer offsets all go through it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from rmq_spark.client.errors import RETRYABLE, BrokerUnavailableError, RocketMQError
from rmq_spark.client.model import MessageQueue
from rmq_spark.client.transport import Bursts, Call

# the default of a per-queue mapping: no queue (read-only, so a shared default)
NONE_PER_QUEUE: Mapping[MessageQueue, Any] = MappingProxyType({})


class Answers(dict):
    """A fan-out's answers per queue. ``failed`` holds each queue whose broker could not answer now, with why;
    ``replica`` the queues answered by a slave (which may lag behind its master)."""

    def __init__(
        self,
        answers: Mapping[MessageQueue, Any] = NONE_PER_QUEUE,
        failed: Mapping[MessageQueue, RocketMQError] = NONE_PER_QUEUE,
        replica: Iterable[MessageQueue] = (),
    ):
        super().__init__(answers)
        self.failed: dict[MessageQueue, RocketMQError] = dict(failed)
        self.replica: set[MessageQueue] = set(replica)

    def merge(self, other: Answers) -> Answers:
        """This and ``other``'s answers, failures and replica answers together."""
        out = Answers(self, self.failed, self.replica | other.replica)
        out.update(other)
        out.failed.update(other.failed)
        return out


def unavailable(what: str, failed: Mapping[MessageQueue, RocketMQError]) -> BrokerUnavailableError:
    """One error for the queues of a fan-out whose brokers could not answer, naming each broker."""
    brokers = sorted({mq.broker_name for mq in failed})
    first = next(iter(failed.values()))
    return BrokerUnavailableError(
        f"{what}: broker{'s' if len(brokers) > 1 else ''} {', '.join(brokers)} could not "
        f"answer now ({first}); retry when {'they are' if len(brokers) > 1 else 'it is'} "
        "back",
        code=first.code,
        remark=first.remark,
    )


def gather(
    client: Bursts, what: str, mqs: Iterable[MessageQueue], make: Callable[[MessageQueue], Call], *, partial: bool
) -> Answers:
    """``make(mq)`` for every queue, all in flight at once (every broker asked concurrently). A queue whose
    broker does not answer is asked once more on its own (fresh route and connection, maybe another member
    of its broker group); if that fails too, it is unavailable: with ``partial`` it goes to
    ``Answers.failed``, else one BrokerUnavailableError names the brokers. Any other error is raised."""
    calls: dict[MessageQueue, Call] = {}
    failed: dict[MessageQueue, RocketMQError] = {}
    with client.burst():
        for mq in mqs:
            try:
                calls[mq] = make(mq)
            except RETRYABLE as e:
                failed[mq] = e
    out = Answers()
    for mq, call in calls.items():
        try:
            out[mq] = call.result()
        except RETRYABLE as e:
            failed[mq] = e
        else:
            if call.replica:
                out.replica.add(mq)
    down: set[str] = set()
    for mq in list(failed):
        if mq.broker_name in down:
            continue  # its broker failed twice already: do not wait on it once per queue
        try:
            call = make(mq)
            out[mq] = call.result()
        except RETRYABLE as e:
            failed[mq] = e
            down.add(mq.broker_name)
        else:
            del failed[mq]
            if call.replica:
                out.replica.add(mq)
    if failed and not partial:
        raise unavailable(what, failed)
    out.failed = failed
    return out
