"""Pulls the brokers hold at the end of each queue until a message arrives (RocketMQ's long polling: the suspend
flag, PullRequestHoldService), so that the stream driver learns which queues moved without asking every queue on
a clock. A hold is mostly a doorbell: only a master's answer that a message just ended tells the queue's end; a
queue whose hold ends any other way (an older answer, a failure) is handed back to be asked its offsets
(docs/DESIGN.md §10's rules live with that asking, in QueueWatch)."""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable
from dataclasses import replace

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
# A queue whose hold the broker refused (no permission, a group or topic it does not know yet) is held again after
# this long, the wait doubling at each refusal up to REFUSED_RETRY_MAX_S; its offsets are asked on the clock
# meanwhile.
REFUSED_RETRY_S = RETRY_DOWN_S
REFUSED_RETRY_MAX_S = 60.0


class _Hold:
    """One armed hold: the call while it is out; once it ended, what it answered (header only) or raised."""

    __slots__ = ("mq", "offset", "call", "outcome", "armed_at", "ended_at")

    def __init__(self, mq: MessageQueue, offset: int, call: HeldCall) -> None:
        self.mq, self.offset = mq, offset
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


class HeldPulls:
    """One held pull per queue at the offset it was armed with. ``rung()`` takes the queues whose hold ended since
    it was last asked; a hold that ended quietly (nothing came before it timed out) is armed again instead."""

    def __init__(self, client: BaseClient, group: str, hold_ms: int = HOLD_MS) -> None:
        self._client, self._group, self._hold_ms = client, group, hold_ms
        self._held: dict[MessageQueue, _Hold] = {}
        self._ended: collections.deque[_Hold] = collections.deque()  # appended by the calls' threads
        # a queue whose hold was refused -> (when it may be held again, the wait after the next refusal)
        self._refused: dict[MessageQueue, tuple[float, float]] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, mq: MessageQueue) -> bool:
        return mq in self._held

    def arm(self, mq: MessageQueue, offset: int) -> None:
        """Hold a pull of ``mq`` at ``offset`` unless one is held there already; one held elsewhere is dropped. A
        broker that cannot take it now, or that refused a hold of the queue lately, leaves the queue unheld (its
        offsets are asked on the clock instead)."""
        refused = self._refused.get(mq)
        if refused is not None and time.monotonic() < refused[0]:
            return
        held = self._held.get(mq)
        if held is not None:
            if held.offset == offset:
                return
            self._drop(mq)
        try:
            call = self._client.hold_async(mq, offset, group=self._group, hold_ms=self._hold_ms)
        except RocketMQError as e:
            self._note_failure(mq, e)
            return
        hold = self._held[mq] = _Hold(mq, offset, call)
        call.add_done_callback(lambda: self._ended_hold(hold))

    def _ended_hold(self, hold: _Hold) -> None:
        """On the thread that ended the call: keep what it answered without the message it carried (up to 4 MiB)
        and let go of the call, then hand the hold to ``rung()``."""
        call = hold.call
        if call is None:
            return  # told twice
        try:
            outcome = call.result()
            outcome = replace(outcome, body=b"", frames=None)
        except Exception as e:  # raised on the driver's thread by rung(), not on the connection's reader
            outcome = e
        hold.outcome, hold.ended_at, hold.call = outcome, time.monotonic(), None
        self._ended.append(hold)

    def rung(self) -> dict[MessageQueue, int | None]:
        """The queues whose hold ended since the last call because a message came, with the end offset the master
        answered with if that answer still stands (``_Hold.stands``; its hold is armed again there), or None where
        the end now is not known: an older answer (messages keep coming: the end may have moved on since), an
        answer that did not say, an offset that is no longer the queue's end, or a failed hold (its broker is away,
        or refused it). Those are no longer held: ask their offsets."""
        moved: dict[MessageQueue, int | None] = {}
        now = time.monotonic()
        while self._ended:
            hold = self._ended.popleft()
            mq = hold.mq
            if self._held.get(mq) is not hold:
                continue  # dropped, re-armed, or told twice
            del self._held[mq]
            result, offset = hold.outcome, hold.offset
            if isinstance(result, RocketMQError):
                self._note_failure(mq, result)
                moved[mq] = None
                continue
            if isinstance(result, BaseException):
                raise result
            assert result is not None, "an ended hold keeps what it answered"
            self._refused.pop(mq, None)  # the broker takes holds of the queue again
            if (
                result.status is PullStatus.NO_NEW_MSG
                and result.next_begin_offset == offset
                and result.max_offset in (-1, offset)
            ):  # -1: the transport does not report it
                self.arm(mq, offset)  # quiet: nothing came before the hold timed out
            elif result.status is PullStatus.FOUND and result.max_offset > offset and hold.stands(now):
                moved[mq] = result.max_offset
                self.arm(mq, result.max_offset)
            else:
                moved[mq] = None
        return moved

    def keep(self, queues: Iterable[MessageQueue]) -> None:
        """Drop the holds (and refusals) of queues not in ``queues`` (their topic or broker left the routes)."""
        keep = set(queues)
        for mq in [mq for mq in self._held if mq not in keep]:
            self._drop(mq)
        for mq in [mq for mq in self._refused if mq not in keep]:
            del self._refused[mq]

    def close(self) -> None:
        for mq in list(self._held):
            self._drop(mq)

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

    def _drop(self, mq: MessageQueue) -> None:
        call = self._held.pop(mq).call
        if call is not None:
            call.cancel()
