"""Held pulls as a transport keeps them: one pull per queue held at an offset until a message arrives or the hold
times out (RocketMQ's long polling), held again by the transport where its answer tells (``Holds``). The transport
hands back every hold that ended (``EndedHold``); what an end means for the stream is the driver's
(``rmq_spark.source.held_pulls``). ``CallHolds`` keeps them over any transport's ``hold_async`` calls, re-arming on
a thread of its own; the remoting transport over plain TCP keeps them in the compiled core
(``rmq_spark.client.remoting.native_holds``)."""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import NamedTuple, Protocol

from rmq_spark.client.errors import RocketMQError
from rmq_spark.client.model import MessageQueue, PullResult
from rmq_spark.client.transport import Bursts, HeldCall
from rmq_spark.compiled import next_hold

# The holds that ended meanwhile are armed again in rounds this far apart: one write per broker for all of them,
# and a queue whose messages keep coming is held anew at most this often.
ARM_ROUND_S = 0.1


class EndedHold(NamedTuple):
    """A hold of ``mq`` at ``offset`` that ended: written at ``armed_at``, its answer come at ``ended_at`` at the
    earliest (``time.monotonic()``). ``next_offset`` is where the transport holds the queue again (``offset`` after
    a quiet end, the end a master's message told), None when it does not: then ``outcome`` is what ended it (a
    PullResult that does not tell where to hold next, or the error). A driver-side record made for every message of
    a trickling stream: a named tuple, made in a quarter of a frozen dataclass's time."""

    mq: MessageQueue
    offset: int
    armed_at: float
    ended_at: float
    next_offset: int | None
    outcome: PullResult | BaseException | None = None


class Holds:
    """The held pulls of one consumer group: ``hold``, ``drop``, and ``ended()`` for the holds that ended since.
    One thread uses it (the stream driver's); the transport's own threads only read answers and hold again."""

    def hold(self, mq: MessageQueue, offset: int) -> None:
        """Hold a pull of ``mq`` at ``offset``, in place of its hold, if any (whose ends are not told any more).
        Raises the RocketMQError that keeps it from being sent."""
        raise NotImplementedError

    def drop(self, mq: MessageQueue) -> None:
        """No hold of ``mq`` any more (its ends not yet told are not told)."""
        raise NotImplementedError

    def ended(self) -> list[EndedHold]:
        """The holds that ended since the last call, in the order they ended (the answers come meanwhile read)."""
        raise NotImplementedError

    def close(self) -> None:
        """Drop every hold."""
        raise NotImplementedError


class HoldSender(Bursts, Protocol):
    """What ``CallHolds`` sends its holds through: a transport's held pulls, re-armed in bursts."""

    def hold_async(self, mq: MessageQueue, offset: int, *, group: str, hold_ms: int) -> HeldCall: ...


class _Chain:
    """The holds of one queue, each armed by the arming thread at the end the one before learned: dropped as one."""

    __slots__ = ("dropped",)

    def __init__(self) -> None:
        self.dropped = False


class _Call:
    """One hold in flight over a call; once ended, what it answered (header only) or raised."""

    __slots__ = ("mq", "offset", "chain", "call", "outcome", "armed_at", "ended_at")

    def __init__(self, mq: MessageQueue, offset: int, chain: _Chain, call: HeldCall | None) -> None:
        self.mq, self.offset, self.chain = mq, offset, chain
        self.call = call
        self.outcome: PullResult | BaseException | None = None
        self.armed_at = time.monotonic()
        self.ended_at = 0.0

    def next_offset(self) -> int | None:
        """Where the queue is held next once this hold ended (the core's rule, as its hold lines judge)."""
        r = self.outcome
        return (
            next_hold(r.status, r.next_begin_offset, r.max_offset, self.offset) if isinstance(r, PullResult) else None
        )


class CallHolds(Holds):
    """Holds over a transport's ``hold_async`` calls. A call that ends quietly or with a master's new end is armed
    again (there, or at that end) by an arming thread of its own, in rounds ARM_ROUND_S apart, in one burst."""

    def __init__(self, client: HoldSender, group: str, hold_ms: int) -> None:
        self._client, self._group, self._hold_ms = client, group, hold_ms
        self._lock = threading.Lock()  # the holds, shared with the arming thread
        self._held: dict[MessageQueue, _Call] = {}
        self._ended: collections.deque[_Call] = collections.deque()  # appended by the calls' threads
        self._to_arm: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._armer: threading.Thread | None = None
        self._armer_failed: BaseException | None = None

    def hold(self, mq: MessageQueue, offset: int) -> None:
        with self._lock:
            self._drop(mq)
            if self._armer is None:
                self._armer = threading.Thread(target=self._arming, name="rmq-holds", daemon=True)
                self._armer.start()
        self._send(mq, offset, _Chain(), None)

    def _send(self, mq: MessageQueue, offset: int, chain: _Chain, after: _Call | None) -> None:
        """Send a hold of ``mq`` at ``offset`` and keep it as the queue's, unless the queue's hold changed meanwhile
        from ``after`` (the ended hold it follows; None: the queue had none). Raises what keeps it from being sent."""
        call = self._client.hold_async(mq, offset, group=self._group, hold_ms=self._hold_ms)
        hold = _Call(mq, offset, chain, call)
        with self._lock:
            if self._held.get(mq) is not after:
                call.cancel()  # dropped or held anew while this one was sent
                return
            self._held[mq] = hold
        call.add_done_callback(lambda: self._ended_call(hold))

    def _ended_call(self, hold: _Call) -> None:
        """On the thread that ended the call: keep what it answered without the message it carried (up to 4 MiB)
        and let go of the call, then hand the hold to ``ended()``, and to the arming thread when it tells where the
        queue is held next."""
        call = hold.call
        if call is None:
            return  # told twice
        outcome: PullResult | Exception
        try:
            answer = call.result()
            outcome = (
                answer
                if not answer.body and answer.frames is None
                else PullResult(answer.status, answer.next_begin_offset, answer.min_offset, answer.max_offset)
            )
        except Exception as e:  # raised on the driver's thread by the stream's rules, not on the connection's reader
            outcome = e
        hold.outcome, hold.ended_at, hold.call = outcome, call.ended_at, None
        self._ended.append(hold)
        if not hold.chain.dropped and hold.next_offset() is not None:
            self._to_arm.put(hold)

    def _arming(self) -> None:
        """The arming thread, until ``close()``: in rounds ARM_ROUND_S apart, the queues whose hold ended since the
        last round are held again where their hold tells, in one burst (one write per broker)."""
        while True:
            ended = [self._to_arm.get()]
            time.sleep(ARM_ROUND_S)
            while not self._to_arm.empty():
                ended.append(self._to_arm.get())
            if None in ended:
                return
            try:
                with self._client.burst():
                    for hold in ended:
                        assert hold is not None
                        self._arm_again(hold)
            except BaseException as e:  # a defect: raised on the driver's thread by the next ended()
                self._armer_failed = e

    def _arm_again(self, hold: _Call) -> None:
        """Hold ``hold``'s queue again where it tells, unless its hold changed meanwhile; one that cannot be sent
        ends there."""
        offset = hold.next_offset()
        assert offset is not None, "only holds that tell where to hold next are handed over"
        with self._lock:
            if self._held.get(hold.mq) is not hold:
                return  # dropped, or held anew
        try:
            self._send(hold.mq, offset, hold.chain, hold)
        except RocketMQError as e:
            failed = _Call(hold.mq, offset, hold.chain, None)
            failed.outcome, failed.ended_at = e, failed.armed_at
            with self._lock:
                if self._held.get(hold.mq) is hold:
                    self._held[hold.mq] = failed  # ended() lets go of it
                    self._ended.append(failed)

    def ended(self) -> list[EndedHold]:
        if self._armer_failed is not None:
            raise self._armer_failed
        out = []
        with self._lock:
            while self._ended:
                hold = self._ended.popleft()
                if hold.chain.dropped:
                    continue
                next_offset = hold.next_offset()
                out.append(
                    EndedHold(
                        hold.mq,
                        hold.offset,
                        hold.armed_at,
                        hold.ended_at,
                        next_offset,
                        hold.outcome if next_offset is None else None,
                    )
                )
                if next_offset is None and self._held.get(hold.mq) is hold:
                    del self._held[hold.mq]
        return out

    def drop(self, mq: MessageQueue) -> None:
        with self._lock:
            self._drop(mq)

    def close(self) -> None:
        with self._lock:
            for mq in list(self._held):
                self._drop(mq)
        self._to_arm.put(None)

    def _drop(self, mq: MessageQueue) -> None:
        """Drop ``mq``'s hold and the ends of its chain not yet told (under the lock)."""
        hold = self._held.pop(mq, None)
        if hold is None:
            return
        hold.chain.dropped = True
        if hold.call is not None:
            hold.call.cancel()
