"""Pulls the brokers hold at the end of each queue until a message arrives (RocketMQ's long polling: the suspend
flag, PullRequestHoldService), so that the stream driver learns which queues moved without asking every queue on
a clock. A hold is mostly a doorbell: only a master's answer that a message just ended tells the queue's end. A
hold that ends quietly, or with such an answer, is armed again at once (where it was, or at that end) by a thread
of its own, so Spark's thread only reads what the holds learned; a queue whose hold ends any other way (a failure,
an answer that does not tell the end) or whose answer is older than it may stand for is handed back to be asked
its offsets (docs/DESIGN.md §10's rules live with that asking, in QueueWatch)."""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Iterable

from rmq_spark.client.base import BaseClient, HeldCall
from rmq_spark.client.errors import RETRYABLE, RocketMQError, UnsupportedError
from rmq_spark.client.model import MessageQueue, PullResult
from rmq_spark.client.outages import RETRY_DOWN_S
from rmq_spark.compiled import PullStatus

# How long a broker holds each pull: an idle queue costs one request per hold. RocketMQ's push consumer holds
# 15 s; 30 s keeps 1,000 idle queues at ~33 requests/s.
HOLD_MS = 30_000
# How old the end offset a hold's answer tells may be to stand for the queue's end now: a query that waits for
# messages asks every ~10 ms; under a steady flow the answer came right after the last batch was planned. An answer
# that ended a hold held longer than that stands for as long as the hold waited (``_Hold.stands``).
FRESH_S = 0.02
# The arming thread arms the holds that ended meanwhile in rounds this far apart: one write per broker for all of
# them, and a queue whose messages keep coming is held anew at most this often (its answers then stand for a moment
# only, and its offsets are asked). A message that comes between a hold's answer and the next round rings at once.
ARM_ROUND_S = 0.1
# A queue whose hold the broker refused (no permission, a group or topic it does not know yet) is held again after
# this long, the wait doubling at each refusal up to REFUSED_RETRY_MAX_S; its offsets are asked on the clock
# meanwhile.
REFUSED_RETRY_S = RETRY_DOWN_S
REFUSED_RETRY_MAX_S = 60.0


class _Chain:
    """The holds of one queue, each armed by the arming thread at the end the one before learned: dropped as one."""

    __slots__ = ("dropped",)

    def __init__(self) -> None:
        self.dropped = False


class _Hold:
    """One armed hold: the call while it is out; once it ended, what it answered (header only) or raised."""

    __slots__ = ("mq", "offset", "chain", "call", "outcome", "armed_at", "ended_at")

    def __init__(self, mq: MessageQueue, offset: int, chain: _Chain, call: HeldCall) -> None:
        self.mq, self.offset, self.chain = mq, offset, chain
        self.call: HeldCall | None = call
        self.outcome: PullResult | BaseException | None = None
        self.armed_at = time.monotonic()
        self.ended_at = 0.0

    def stands(self, now: float) -> bool:
        """Whether the end its answer told may stand for the queue's end at ``now``: the answer is a moment old,
        or younger than the time the hold waited for it (a queue quiet that long before its message is taken to
        be quiet since; a message that came meanwhile ends the hold armed at that end at once, and the next poll
        sees it)."""
        age = now - self.ended_at
        return age <= FRESH_S or age <= self.ended_at - self.armed_at

    def next_offset(self) -> int | None:
        """Where the queue is held next once this hold ended: where it was after a quiet end (nothing came before
        it timed out), at the end a master's message told, else nowhere (the queue is to be asked)."""
        result = self.outcome
        if not isinstance(result, PullResult):
            return None
        if (
            result.status is PullStatus.NO_NEW_MSG
            and result.next_begin_offset == self.offset
            and result.max_offset in (-1, self.offset)  # -1: the transport does not report it
        ):
            return self.offset
        if result.status is PullStatus.FOUND and result.max_offset > self.offset:
            return result.max_offset
        return None


class HeldPulls:
    """One held pull per queue at the offset it was armed with. A hold that ends quietly or with a master's new end
    is armed again (there, or at that end) by an arming thread of its own, so that Spark's thread only reads what
    the holds learned: ``rung()`` takes the queues whose hold ended since it was last asked.

    Spark's thread (``arm``, ``rung``, ``keep``, ``close``) and the arming thread share the held and refused
    queues under one lock; neither sends while holding it. The calls' threads only hand ended holds over."""

    def __init__(self, client: BaseClient, group: str, hold_ms: int = HOLD_MS) -> None:
        self._client, self._group, self._hold_ms = client, group, hold_ms
        self._lock = threading.Lock()
        self._held: dict[MessageQueue, _Hold] = {}
        # held queues whose last answer did not stand: not counted as held until the watch arms them at an end
        # it asked for
        self._stale: set[MessageQueue] = set()
        self._ended: collections.deque[_Hold] = collections.deque()  # appended by the calls' threads
        # a queue whose hold was refused -> (when it may be held again, the wait after the next refusal)
        self._refused: dict[MessageQueue, tuple[float, float]] = {}
        self._to_arm: queue.SimpleQueue[_Hold | None] = queue.SimpleQueue()
        self._armer: threading.Thread | None = None
        self._armer_failed: BaseException | None = None

    def __len__(self) -> int:
        with self._lock:
            return len(self._held) - len(self._stale)

    def __contains__(self, mq: MessageQueue) -> bool:
        with self._lock:
            return mq in self._held and mq not in self._stale

    def unheld(self, queues: Iterable[MessageQueue]) -> list[MessageQueue]:
        """Those of ``queues`` not held (in order)."""
        with self._lock:
            return [mq for mq in queues if mq not in self._held or mq in self._stale]

    def arm(self, mq: MessageQueue, offset: int) -> None:
        """Hold a pull of ``mq`` at ``offset`` unless one is held there already; one held elsewhere is dropped. A
        broker that cannot take it now, or that refused a hold of the queue lately, leaves the queue unheld (its
        offsets are asked on the clock instead)."""
        with self._lock:
            refused = self._refused.get(mq)
            if refused is not None and time.monotonic() < refused[0]:
                return
            held = self._held.get(mq)
            if held is not None:
                self._stale.discard(mq)
                if held.offset == offset:
                    return
                self._drop(mq)
            if self._armer is None:
                self._armer = threading.Thread(target=self._arming, name="rmq-holds", daemon=True)
                self._armer.start()
        self._hold(mq, offset, _Chain(), None)

    def _hold(self, mq: MessageQueue, offset: int, chain: _Chain, after: _Hold | None) -> None:
        """Send a hold of ``mq`` at ``offset`` and keep it as the queue's hold, unless the queue's hold changed
        meanwhile from ``after`` (the ended hold it follows; None: the queue had none)."""
        try:
            call = self._client.hold_async(mq, offset, group=self._group, hold_ms=self._hold_ms)
        except RocketMQError as e:
            with self._lock:
                if self._held.get(mq) is after:
                    if after is not None:
                        self._forget(mq)
                    self._note_failure(mq, e)
            return
        hold = _Hold(mq, offset, chain, call)
        with self._lock:
            if self._held.get(mq) is not after:
                call.cancel()  # dropped or armed anew on Spark's thread while this one was sent
                return
            self._held[mq] = hold
        call.add_done_callback(lambda: self._ended_hold(hold))

    def _ended_hold(self, hold: _Hold) -> None:
        """On the thread that ended the call: keep what it answered without the message it carried (up to 4 MiB)
        and let go of the call, then hand the hold to ``rung()``, and to the arming thread when it tells where the
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
        except Exception as e:  # raised on the driver's thread by rung(), not on the connection's reader
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
            except BaseException as e:  # a defect: raised on Spark's thread by the next rung()
                self._armer_failed = e

    def _arm_again(self, hold: _Hold) -> None:
        """Hold ``hold``'s queue again where it tells, unless its hold changed meanwhile."""
        offset = hold.next_offset()
        assert offset is not None, "only holds that tell where to hold next are handed over"
        with self._lock:
            if self._held.get(hold.mq) is not hold:
                return  # dropped, or armed anew by Spark's thread
            self._refused.pop(hold.mq, None)  # the broker takes holds of the queue again
        self._hold(hold.mq, offset, hold.chain, hold)

    def rung(self) -> dict[MessageQueue, int | None]:
        """The queues whose hold ended since the last call because a message came, with the end offset the master
        answered with if that answer still stands (``_Hold.stands``; the queue is held there), or None where the
        end now is not known: an older answer (messages keep coming: the end may have moved on since), an answer
        that did not say, an offset that is no longer the queue's end, or a failed hold (its broker is away, or
        refused it). Those no longer count as held: ask their offsets."""
        if self._armer_failed is not None:
            raise self._armer_failed
        if self._held:
            self._client.poll_holds()  # answers that came since the transport last read them
        last: dict[MessageQueue, _Hold] = {}
        while self._ended:
            hold = self._ended.popleft()
            if not hold.chain.dropped:
                last[hold.mq] = hold  # a later hold of the queue's chain knows better
        moved: dict[MessageQueue, int | None] = {}
        now = time.monotonic()
        with self._lock:
            for mq, hold in last.items():
                result = hold.outcome
                if isinstance(result, BaseException) and not isinstance(result, RocketMQError):
                    raise result
                next_offset = hold.next_offset()
                if isinstance(result, RocketMQError):
                    self._note_failure(mq, result)
                else:
                    self._refused.pop(mq, None)  # the broker takes holds of the queue again
                if next_offset == hold.offset:
                    continue  # quiet: held again where it was
                if next_offset is None:
                    moved[mq] = None
                    if self._held.get(mq) is hold:
                        self._forget(mq)
                elif hold.stands(now):
                    moved[mq] = next_offset
                    self._stale.discard(mq)
                else:
                    moved[mq] = None
                    if mq in self._held:
                        self._stale.add(mq)  # still held at the end it told, for the doorbell
        return moved

    def keep(self, queues: Iterable[MessageQueue]) -> None:
        """Drop the holds (and refusals) of queues not in ``queues`` (their topic or broker left the routes)."""
        keep = set(queues)
        with self._lock:
            for mq in [mq for mq in self._held if mq not in keep]:
                self._drop(mq)
            for mq in [mq for mq in self._refused if mq not in keep]:
                del self._refused[mq]

    def close(self) -> None:
        """Drop every hold and end the arming thread."""
        with self._lock:
            for mq in list(self._held):
                self._drop(mq)
        self._to_arm.put(None)

    def _note_failure(self, mq: MessageQueue, e: RocketMQError) -> None:
        """A failed hold: one the broker refused is not tried again for a while (never, where the transport has no
        holds); one that waiting cures (a broker away or busy) may be armed again at once."""
        if isinstance(e, RETRYABLE):
            return
        if isinstance(e, UnsupportedError):
            self._refused[mq] = (float("inf"), float("inf"))
            return
        wait = self._refused.get(mq, (0.0, REFUSED_RETRY_S))[1]
        self._refused[mq] = (time.monotonic() + wait, min(2 * wait, REFUSED_RETRY_MAX_S))

    def _forget(self, mq: MessageQueue) -> _Hold:
        """No hold of ``mq`` any more (under the lock)."""
        self._stale.discard(mq)
        return self._held.pop(mq)

    def _drop(self, mq: MessageQueue) -> None:
        """Drop ``mq``'s hold and the answers of its chain not yet taken (under the lock)."""
        hold = self._forget(mq)
        hold.chain.dropped = True
        if hold.call is not None:
            hold.call.cancel()
