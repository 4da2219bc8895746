"""HeldPulls' bookkeeping: which ended holds tell their queue's new end (and are armed there), which hand their
queue back to be asked, which are armed again as they were, and which queues are never held again."""
from __future__ import annotations

from rmq_spark.client.errors import AuthError, ConnectionLostError
from rmq_spark.client.model import MessageQueue, PullResult
from rmq_spark.compiled import PullStatus
from rmq_spark.held_pulls import HeldPulls

A, B = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)


class _Call:
    def __init__(self, mq: MessageQueue, offset: int) -> None:
        self.mq, self.offset = mq, offset
        self.outcome: PullResult | Exception | None = None
        self.cancelled = False
        self._fn = None

    def add_done_callback(self, fn) -> None:
        self._fn = fn

    def end(self, outcome: PullResult | Exception) -> None:
        self.outcome = outcome
        self._fn()

    def result(self) -> PullResult:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    def cancel(self) -> None:
        self.cancelled = True


class _Client:
    def __init__(self) -> None:
        self.calls: list[_Call] = []

    def hold_async(self, mq, offset, *, group, hold_ms):
        call = _Call(mq, offset)
        self.calls.append(call)
        return call

    def last(self, mq: MessageQueue) -> _Call:
        return [c for c in self.calls if c.mq == mq][-1]


def _quiet(offset: int, max_offset: int | None = None) -> PullResult:
    return PullResult(PullStatus.NO_NEW_MSG, offset, 0, offset if max_offset is None else max_offset)


def test_a_quiet_hold_is_armed_again_and_a_message_tells_the_new_end():
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    holds.arm(B, 7)
    holds.arm(A, 5)  # held there already
    assert len(client.calls) == 2 and len(holds) == 2
    client.last(A).end(_quiet(5))
    client.last(B).end(PullResult(PullStatus.FOUND, 8, 0, 9, body=b"...", first_offset=7))
    assert holds.rung() == {B: 9}
    assert A in holds and B in holds
    assert (client.last(A).offset, client.last(B).offset, len(client.calls)) == (5, 9, 4)  # armed again
    assert holds.rung() == {}


def test_a_message_without_the_new_end_hands_the_queue_back():
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    client.last(A).end(PullResult(PullStatus.FOUND, 6, -1, -1, frames=(b"..",), first_offset=5))
    assert holds.rung() == {A: None} and A not in holds


def test_an_end_that_is_not_the_queue_end_any_more_is_not_quiet():
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    client.last(A).end(_quiet(5, max_offset=9))  # e.g. a master that took over with more messages
    assert holds.rung() == {A: None} and A not in holds


def test_a_failed_hold_hands_the_queue_back_and_a_refused_one_is_never_held_again():
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    holds.arm(B, 5)
    client.last(A).end(ConnectionLostError("gone"))
    client.last(B).end(AuthError("no permission to pull"))
    assert holds.rung() == {A: None, B: None}
    holds.arm(A, 5)
    holds.arm(B, 5)
    assert A in holds and B not in holds  # waiting cures a lost connection, not a refusal


def test_a_dropped_or_rearmed_hold_that_ends_later_is_ignored():
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    first = client.last(A)
    holds.arm(A, 6)  # moved on: the hold at 5 is dropped
    assert first.cancelled
    first.end(_quiet(5))
    first.end(_quiet(5))  # a callback told twice
    assert holds.rung() == {} and A in holds
    holds.arm(B, 1)
    holds.keep([A])
    assert B not in holds and client.last(B).cancelled
    client.last(B).end(PullResult(PullStatus.FOUND, 2, 0, 2, body=b"..", first_offset=1))
    assert holds.rung() == {}


def test_an_answer_older_than_a_moment_does_not_stand_for_the_end(monkeypatch):
    import rmq_spark.held_pulls as held_pulls
    now = [100.0]
    monkeypatch.setattr(held_pulls.time, "monotonic", lambda: now[0])
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    client.last(A).end(PullResult(PullStatus.FOUND, 6, 0, 9, body=b"...", first_offset=5))
    now[0] += 1.0  # messages kept coming while the last batch ran: the end has moved on since
    assert holds.rung() == {A: None} and A not in holds
