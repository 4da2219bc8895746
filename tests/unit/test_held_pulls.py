"""HeldPulls' bookkeeping: which ended holds tell their queue's new end (and are armed there), which hand their
queue back to be asked, which are armed again as they were, when a refused queue is held again and which queues are
never held again, and what an answered hold keeps."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
import weakref

from rmq_spark.client.base import BaseClient
from rmq_spark.client.errors import AuthError, ConnectionLostError, UnsupportedError
from rmq_spark.client.model import MessageQueue, PullResult
from rmq_spark.compiled import PullStatus
from rmq_spark.source.held_pulls import HeldPulls

A, B = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)


class _Call:
    def __init__(self, mq: MessageQueue, offset: int) -> None:
        self.mq, self.offset = mq, offset
        self.outcome: PullResult | Exception | None = None
        self.cancelled = False
        self.thread = threading.current_thread()
        self._fn = None

    def add_done_callback(self, fn) -> None:
        self._fn = fn

    def end(self, outcome: PullResult | Exception, ago: float = 0.0) -> None:
        """End the call with ``outcome``, its answer come ``ago`` seconds before (read a round late)."""
        self.outcome, self.ended_at = outcome, time.monotonic() - ago
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
        self.bursts: list[list[_Call]] = []  # the calls sent in each burst

    @contextlib.contextmanager
    def burst(self):
        first = len(self.calls)
        yield
        self.bursts.append(self.calls[first:])

    holds = BaseClient.holds

    def hold_async(self, mq, offset, *, group, hold_ms):
        call = _Call(mq, offset)
        self.calls.append(call)
        return call

    def last(self, mq: MessageQueue) -> _Call:
        return [c for c in self.calls if c.mq == mq][-1]

    def settled(self, calls: int) -> list[_Call]:
        """The calls once there are ``calls`` of them (the arming thread sends in the background)."""
        deadline = time.monotonic() + 5.0
        while len(self.calls) < calls:
            assert time.monotonic() < deadline, f"{len(self.calls)} holds armed, not {calls}"
            time.sleep(0.001)
        return self.calls


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
    client.settled(4)
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


def _arm_until_held(holds: HeldPulls, mq: MessageQueue, now: list[float]) -> None:
    """Arm ``mq`` every 0.5 s of the fake clock (as the watch does at each poll) until it is held (at most 10 min)."""
    for _ in range(1200):
        now[0] += 0.5
        holds.arm(mq, 5)
        if mq in holds:
            return
    raise AssertionError(f"{mq} was never held again")


def test_a_failed_hold_hands_the_queue_back_and_a_refused_one_is_held_again_after_a_backoff(monkeypatch):
    import rmq_spark.source.held_pulls as held_pulls

    now = [100.0]
    monkeypatch.setattr(held_pulls.time, "monotonic", lambda: now[0])
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    holds.arm(B, 5)
    client.last(A).end(ConnectionLostError("gone"))
    client.last(B).end(AuthError("no permission to pull"))
    assert holds.rung() == {A: None, B: None}
    holds.arm(A, 5)
    holds.arm(B, 5)
    assert A in holds and B not in holds  # waiting cures a lost connection at once, a refusal not at once
    waits = []
    for _ in range(4):  # refused again at each try: the tries come further and further apart
        tried_at = now[0]
        _arm_until_held(holds, B, now)
        waits.append(now[0] - tried_at)
        client.last(B).end(AuthError("no permission to pull"))
        assert holds.rung() == {B: None}
    assert waits == sorted(waits) and waits[-1] > waits[0] and waits[0] <= held_pulls.REFUSED_RETRY_S + 0.5
    _arm_until_held(holds, B, now)
    client.last(B).end(_quiet(5))  # the broker takes holds again: the next refusal starts the backoff anew
    assert holds.rung() == {} and B in holds
    client.last(B).end(AuthError("no permission to pull"))
    holds.rung()
    now[0] += held_pulls.REFUSED_RETRY_S
    holds.arm(B, 5)
    assert B in holds


def test_a_transport_without_holds_is_never_asked_again():
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    client.last(A).end(UnsupportedError("held pulls are not offered over gRPC"))
    assert holds.rung() == {A: None}
    holds.arm(A, 5)
    assert A not in holds and len(client.calls) == 1


class _Body:
    """A stand-in for a pulled message body (up to 4 MiB) that can be watched for being freed."""


def test_an_answered_hold_keeps_the_answers_header_not_its_body(monkeypatch):
    import rmq_spark.source.held_pulls as held_pulls

    monkeypatch.setattr(held_pulls.time, "monotonic", lambda: 100.0)  # the answer is fresh however slow gc is
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    call = client.calls.pop()
    body = _Body()
    freed = weakref.ref(body)
    call.end(PullResult(PullStatus.FOUND, 6, 0, 9, body=body, first_offset=5))
    del call, body
    gc.collect()
    assert freed() is None, "the answered hold keeps the message body until the next trigger"
    assert holds.rung() == {A: 9}


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
    import rmq_spark.source.held_pulls as held_pulls

    now = [100.0]
    monkeypatch.setattr(held_pulls.time, "monotonic", lambda: now[0])
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    client.last(A).end(PullResult(PullStatus.FOUND, 6, 0, 9, body=b"...", first_offset=5))
    now[0] += 1.0  # messages kept coming while the last batch ran: the end has moved on since
    assert holds.rung() == {A: None} and A not in holds


def _a_held_on_a_fake_clock(monkeypatch) -> tuple[list[float], _Client, HeldPulls]:
    """A held at 5, on a clock that moves only when the test moves ``now[0]``."""
    import rmq_spark.source.held_pulls as held_pulls

    now = [100.0]
    monkeypatch.setattr(held_pulls.time, "monotonic", lambda: now[0])
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    return now, client, holds


def test_an_answer_after_a_long_quiet_hold_stands_for_the_end_for_as_long(monkeypatch):
    """A trickle: a queue quiet for seconds before its message is taken to be quiet for as long
    after it, so a batch every second asks no GET_MAX_OFFSET for it; a message that came meanwhile ends the hold
    armed at the answered end at once, and the next poll sees it."""
    now, client, holds = _a_held_on_a_fake_clock(monkeypatch)
    now[0] += 4.0
    client.last(A).end(PullResult(PullStatus.FOUND, 6, 0, 6, body=b"...", first_offset=5))
    holds.arm(B, 5)
    now[0] += 0.5
    client.last(B).end(PullResult(PullStatus.FOUND, 6, 0, 6, body=b"...", first_offset=5))
    now[0] += 0.9  # the next batch: A's answer is younger than its hold's wait (4 s), B's older (0.5 s)
    assert holds.rung() == {A: 6, B: None}
    client.settled(4)  # both armed again at their new end: B's hold rings if B's end moved on
    assert client.last(A).offset == 6 and A in holds and B not in holds


def test_an_answer_read_a_round_after_it_came_is_as_old_as_it_is(monkeypatch):
    """A transport that reads held answers in rounds: the end an answer told is as old as the answer, not as the
    read, so a busy queue's answer read late does not stand for its end (its offsets are asked)."""
    now, client, holds = _a_held_on_a_fake_clock(monkeypatch)
    now[0] += 0.1
    client.last(A).end(PullResult(PullStatus.FOUND, 6, 0, 6, body=b"...", first_offset=5), ago=0.08)
    assert holds.rung() == {A: None}  # came 0.08 s ago after a 0.02 s wait: more may have come since


def _a_rang_and_b_ended_quietly() -> tuple[_Client, HeldPulls]:
    """Holds of A at 5 and B at 7; A's rang with its master's new end 9, B's timed out with nothing new."""
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    holds.arm(B, 7)
    client.last(A).end(PullResult(PullStatus.FOUND, 6, 0, 9, body=b"...", first_offset=5))
    client.last(B).end(_quiet(7))
    return client, holds


def test_a_hold_that_rang_or_ended_quietly_is_armed_again_off_the_thread_that_asks_what_rang():
    """Spark's thread only reads what the holds learned: the hold at a queue's new end, and the
    one again where a quiet hold was, are sent by the arming thread."""
    client, holds = _a_rang_and_b_ended_quietly()
    assert holds.rung() == {A: 9}
    again = client.settled(4)[2:]
    assert sorted((c.mq, c.offset) for c in again) == [(A, 9), (B, 7)]
    assert all(c.thread is not threading.current_thread() for c in again), "armed again on the calling thread"
    assert A in holds and B in holds and len(holds) == 2


class _SlowClient(_Client):
    """Holds sent by any thread but the test's wait until ``go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.go, self.sending = threading.Event(), threading.Event()

    def hold_async(self, mq, offset, *, group, hold_ms):
        if threading.current_thread() is not threading.main_thread():
            self.sending.set()
            assert self.go.wait(5.0)
        return super().hold_async(mq, offset, group=group, hold_ms=hold_ms)


def test_a_queue_dropped_while_its_hold_is_armed_again_stays_dropped():
    client = _SlowClient()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    client.last(A).end(PullResult(PullStatus.FOUND, 6, 0, 9, body=b"...", first_offset=5))
    assert client.sending.wait(5.0)  # the arming thread is sending the hold at 9
    holds.keep([])  # meanwhile A's topic left the routes
    client.go.set()
    late = client.settled(2)[1]
    deadline = time.monotonic() + 5.0
    while not late.cancelled:
        assert time.monotonic() < deadline, "the hold armed for a dropped queue was kept"
        time.sleep(0.001)
    assert A not in holds and len(holds) == 0 and holds.rung() == {}


def test_a_hold_the_arming_thread_cannot_send_hands_its_queue_back(monkeypatch):
    import rmq_spark.source.held_pulls as held_pulls

    monkeypatch.setattr(held_pulls.time, "monotonic", lambda: 100.0)  # the answer is fresh however slow the thread
    client = _Client()
    holds = HeldPulls(client, "g")
    holds.arm(A, 5)
    tried = threading.Event()

    def lost(*args, **kwargs):
        tried.set()
        raise ConnectionLostError("gone")

    client.hold_async = lost
    client.calls[0].end(PullResult(PullStatus.FOUND, 6, 0, 9, body=b"...", first_offset=5))
    assert tried.wait(5.0)
    assert holds.rung() == {A: 9}  # what the answer told still counts
    assert A not in holds, "a queue whose hold could not be sent still counts as held"


def test_the_holds_that_end_within_a_round_are_armed_again_in_one_burst():
    """One write per broker for the holds a trickle ends, not one per hold."""
    client, holds = _a_rang_and_b_ended_quietly()
    again = client.settled(4)[2:]
    assert client.bursts == [again]
