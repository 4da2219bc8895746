"""Held pulls over plain TCP, kept in the compiled core's hold lines: a quiet answer and a
master's new end are held again by the core, without Python; what ended a hold the core does not hold again reaches
Python as the error or result it means. Against a scripted broker (RocketMQ itself: tests/integration)."""

from __future__ import annotations

import queue
import time

from rmq_spark.client import RemotingClient
from rmq_spark.client.errors import AuthError, ConnectionLostError, RocketMQError
from rmq_spark.client.holds import EndedHold
from rmq_spark.client.model import MessageQueue, PullResult
from rmq_spark.client.remoting import codes
from rmq_spark.client.remoting.native_holds import NativeHolds
from rmq_spark.compiled import PullStatus
from tests.support.scripted_remoting import ScriptedRemoting

MQ = MessageQueue("T", "broker-a", 0)


class _HeldQueue:
    """The broker's side of one queue's holds: each pull waits for the answer the test gives next."""

    def __init__(self) -> None:
        self.asked: queue.Queue[int] = queue.Queue()  # the offset of each hold received
        self.answers: queue.Queue[PullResult | RocketMQError] = queue.Queue()

    def pull_async(self, mq, offset, max_nums, **subscription):
        self.asked.put(offset)
        return self

    def result(self) -> PullResult:
        answer = self.answers.get(timeout=10)
        if isinstance(answer, RocketMQError):
            raise answer
        return answer

    def next_hold(self) -> int:
        return self.asked.get(timeout=5)


def _ended(holds: NativeHolds, count: int) -> list[EndedHold]:
    """The next ``count`` holds that end."""
    out: list[EndedHold] = []
    deadline = time.monotonic() + 5.0
    while len(out) < count:
        assert time.monotonic() < deadline, f"{len(out)} holds ended, not {count}: {out}"
        out.extend(holds.ended())
        time.sleep(0.01)
    return out


def test_quiet_ends_and_new_ends_are_held_again_in_the_core_and_the_rest_reach_python():
    held = _HeldQueue()
    with ScriptedRemoting(held) as broker, RemotingClient(broker.address) as client:
        holds = client.holds("g", 1000)
        assert isinstance(holds, NativeHolds)
        holds.hold(MQ, 5)
        assert held.next_hold() == 5
        held.answers.put(PullResult(PullStatus.NO_NEW_MSG, 5, 0, 5))  # the hold timed out: nothing came
        assert held.next_hold() == 5  # held again where it was, by the core
        held.answers.put(PullResult(PullStatus.FOUND, 6, 0, 9, body=b"m"))  # a message: the end is 9
        assert held.next_hold() == 9
        ends = _ended(holds, 2)
        assert [(e.mq, e.offset, e.next_offset, e.outcome) for e in ends] == [(MQ, 5, 5, None), (MQ, 5, 9, None)]
        assert all(e.armed_at <= e.ended_at for e in ends)

        held.answers.put(RocketMQError("no permission", code=codes.NO_PERMISSION, remark="no permission to pull"))
        (refused,) = _ended(holds, 1)
        assert (refused.offset, refused.next_offset) == (9, None)
        assert isinstance(refused.outcome, AuthError) and broker.address in str(refused.outcome)
        assert held.asked.empty(), "a refused hold was held again"

        holds.hold(MQ, 9)
        assert held.next_hold() == 9
        held.answers.put(PullResult(PullStatus.OFFSET_ILLEGAL, 3, 3, 8))  # no end told: not held again
        (moved,) = _ended(holds, 1)
        assert moved.next_offset is None and moved.outcome.status is PullStatus.OFFSET_ILLEGAL

        holds.hold(MQ, 8)
        assert held.next_hold() == 8
        held.answers.put(ConnectionLostError("the broker went away"))  # the connection breaks
        (lost,) = _ended(holds, 1)
        assert lost.next_offset is None and isinstance(lost.outcome, ConnectionLostError)
        holds.close()


def test_a_dropped_or_held_anew_queue_tells_nothing_of_its_earlier_hold():
    held = _HeldQueue()
    with ScriptedRemoting(held) as broker, RemotingClient(broker.address) as client:
        holds = client.holds("g", 1000)
        holds.hold(MQ, 5)
        assert held.next_hold() == 5
        holds.hold(MQ, 7)  # moved on before the hold at 5 ended
        held.answers.put(PullResult(PullStatus.FOUND, 6, 0, 9, body=b"m"))  # the answer to the hold at 5
        assert held.next_hold() == 7
        time.sleep(0.3)
        assert holds.ended() == []
        holds.drop(MQ)
        held.answers.put(PullResult(PullStatus.FOUND, 8, 0, 10, body=b"m"))  # the answer to the hold at 7
        time.sleep(0.3)
        assert holds.ended() == [] and held.asked.empty()
        holds.close()
